package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/check"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/publication"
	"github.com/swebuild/swebuild/registry"
	"github.com/swebuild/swebuild/sign"
)

// checkFlags are the flags of `swebuild check`.
type checkFlags struct {
	g genInputs
	// --task-repo comes with genInputs: a task repo's tasks get the
	// platforms of its plan (the flat arm64 rules), a dataset's those of
	// the spec tables.
	repo, tag, digests, recordRoot, authEnv, verifyDigests string
	keepUU, requireVerified                                bool
	platforms, insecure                                    []string
	jobs                                                   int
	trust                                                  trustFlags
	signing                                                signingFlags
}

func (f *checkFlags) register(fs *pflag.FlagSet) {
	f.g.register(fs)
	fs.StringVar(&f.repo, "repo", "", "repository prefix the images were published under, e.g. 127.0.0.1:5000/swebench")
	fs.StringVar(&f.tag, "tag", check.DefaultTag, "tag checked on every name")
	fs.StringVar(&f.digests, "digests", "", "write instance -> digest per platform and the index digest to FILE (JSON lines)")
	fs.StringVar(&f.recordRoot, "record-images", "", "also check each record's own image name (its image field) re-rooted at this registry[/prefix], e.g. 127.0.0.1:5000")
	fs.BoolVar(&f.keepUU, "keep-double-underscore", false, "names keep \"__\" instead of upstream's \"_1776_\" (as publish --keep-double-underscore)")
	fs.StringSliceVar(&f.platforms, "platform", nil, "check only these platforms (linux/amd64, linux/arm64; default: every platform plan decides)")
	fs.StringVar(&f.authEnv, "registry-auth-env", registry.DefaultAuthEnv, "environment variable holding USER:PASSWORD (for the --repo registry only) or REGISTRY=USER:PASSWORD,...; the Docker config and credential helpers are used too")
	fs.StringArrayVar(&f.insecure, "insecure-registry", nil, "allow plain HTTP to this registry (HOST[:PORT], repeatable); loopback registries are always allowed")
	fs.IntVarP(&f.jobs, "jobs", "j", 8, "references checked at once")
	fs.BoolVar(&f.requireVerified, "require-verified", false, "also require every per-arch image found (in its repository and the index repository) to carry a verification statement signed by --key (or the --certificate-* identity) naming its digest, saying PASSED: gold resolved in every run, the no-patch control failing, network none; each image that does not is named with why")
	fs.StringVar(&f.verifyDigests, "verify-digests", "", "verify the signed digest catalog FILE (check --digests FILE wrote it and FILE.sigstore.json) with --key or the --certificate-* identity, and say what it lists; no registry is asked")
	f.trust.register(fs)
	f.signing.register(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: swebuild check --dataset DATASET --repo REPO [--require-verified --key PUB] [--digests FILE] [OPTIONS]\n       swebuild check --verify-digests FILE --key PUB\n\nCheck that every image the dataset's records call for is in the registry: per instance\nREPO/sweb.eval.<arch>.<id> for each platform plan decides (no arm64 name for x86-only ids;\n--platform narrows them) and the index REPO/sweb.eval.<id> listing those platforms, each\nchild present in the index's repository. One request per reference. Prints N/M images\npresent and the gaps (a 401 as \"login refused by HOST\"); exits non-zero on any gap.\nWith --require-verified, each image must also carry a signed statement saying verified.\n--digests FILE writes the instance -> per-platform digest catalog and signs it\n(FILE.sigstore.json; --signing-key, keyless on GitHub Actions, or --unsigned).\n\nOptions:\n%s", fs.FlagUsages())
	}
}

// runCheck implements `swebuild check`: are the dataset's images in the
// registry?
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("check", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var f checkFlags
	f.register(fs)
	if done, err := parseFlags(fs, args, false, stdout, stderr); done {
		return err
	}
	usage := func(format string, a ...any) error { return usageErr(fs, stderr, format, a...) }
	if f.verifyDigests != "" {
		if f.repo != "" || f.requireVerified || f.digests != "" {
			return usage("--verify-digests checks a catalog file alone: no --repo, --require-verified or --digests")
		}
		t, err := f.trust.trust(usage)
		if err != nil {
			return err
		}
		if err := check.VerifyCatalogFile(t, f.verifyDigests, stdout); err != nil {
			return fmt.Errorf("--verify-digests: %w", err)
		}
		return nil
	}
	if f.repo == "" {
		return usage("--repo is required")
	}
	opts, signer, err := f.options(fs, usage, stderr)
	if err != nil {
		return err
	}
	loaded, loadErr := f.g.load(ctx, fs, stderr)
	if loaded == nil {
		return loadErr
	}
	if opts.Reader, err = f.reader(); err != nil {
		return err
	}
	opts.Platforms = loaded.PlatformsOf()
	rep, err := check.Run(ctx, loaded.Instances, opts)
	if err != nil {
		return err
	}
	rep.Print(stdout)
	if f.digests != "" {
		if err := rep.WriteCatalogFile(ctx, f.digests, signer, loaded.Source.String(), opts, stdout); err != nil {
			return fmt.Errorf("--digests: %w", err)
		}
	}
	return errors.Join(rep.Err(), loadErr)
}

// options are check's options from the flags (but the platforms and the
// reader) and, with --digests, the catalog's signer.
func (f *checkFlags) options(fs *pflag.FlagSet, usage func(string, ...any) error, stderr io.Writer) (check.Options, *sign.Signer, error) {
	stderr = core.SyncWriter(stderr) // its workers write at once
	opts := check.Options{Repo: f.repo, KeepDoubleUnderscore: f.keepUU, Tag: f.tag, RecordRoot: f.recordRoot}
	var err error
	if opts.Require, err = f.trust.requirement(f.requireVerified, usage); err != nil {
		return opts, nil, err
	}
	var signer *sign.Signer
	if f.digests != "" {
		if signer, err = f.signing.signer(fs, stderr, "check --digests signs the catalog it writes"); err != nil {
			return opts, nil, err
		}
	}
	if len(f.platforms) > 0 {
		if opts.Only, err = core.ParsePlatforms(f.platforms); err != nil {
			return opts, nil, usage("--platform: %v", err)
		}
	}
	return opts, signer, nil
}

// reader is the publication reader of the --repo registry.
func (f *checkFlags) reader() (*publication.Reader, error) {
	client, err := registryClient(f.authEnv, f.repo, "--repo", registry.Options{InsecureRegistries: f.insecure})
	if err != nil {
		return nil, err
	}
	reader := publication.New(client)
	reader.Jobs = f.jobs
	return reader, nil
}

// requirement is check's --require-verified: whose signatures count (the
// key or the certificate identity), nil when not asked; naming a signer
// without asking is a usage error.
func (f *trustFlags) requirement(required bool, usage func(string, ...any) error) (*check.Requirement, error) {
	switch {
	case required:
		t, err := f.trust(usage)
		if err != nil {
			return nil, err
		}
		return &check.Requirement{Trust: t}, nil
	case f.given():
		return nil, usage("--key and --certificate-* say whose signatures count: with --require-verified or --verify-digests")
	}
	return nil, nil
}
