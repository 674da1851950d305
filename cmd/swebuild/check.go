package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/check"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/registry"
	"github.com/swebuild/swebuild/sign"
)

// runCheck implements `swebuild check`: are the dataset's images in the
// registry?
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("check", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var g genInputs
	g.register(fs)
	// --task-repo comes with genInputs: a task repo's tasks get the
	// platforms of its plan (the flat arm64 rules), a dataset's those of
	// the spec tables.
	repo := fs.String("repo", "", "repository prefix the images were published under, e.g. 127.0.0.1:5000/swebench")
	tag := fs.String("tag", check.DefaultTag, "tag checked on every name")
	digests := fs.String("digests", "", "write instance -> digest per platform and the index digest to FILE (JSON lines)")
	recordRoot := fs.String("record-images", "", "also check each record's own image name (its image field) re-rooted at this registry[/prefix], e.g. 127.0.0.1:5000")
	keepUU := fs.Bool("keep-double-underscore", false, "names keep \"__\" instead of upstream's \"_1776_\" (as publish --keep-double-underscore)")
	platforms := fs.StringSlice("platform", nil, "check only these platforms (linux/amd64, linux/arm64; default: every platform plan decides)")
	authEnv := fs.String("registry-auth-env", registry.DefaultAuthEnv, "environment variable holding USER:PASSWORD (for the --repo registry only) or REGISTRY=USER:PASSWORD,...; the Docker config and credential helpers are used too")
	insecure := fs.StringArray("insecure-registry", nil, "allow plain HTTP to this registry (HOST[:PORT], repeatable); loopback registries are always allowed")
	jobs := fs.IntP("jobs", "j", 8, "references checked at once")
	requireVerified := fs.Bool("require-verified", false, "also require every per-arch image found (in its repository and the index repository) to carry a verification statement signed by --key (or the --certificate-* identity) naming its digest, saying PASSED: gold resolved in every run, the no-patch control failing, network none; each image that does not is named with why")
	verifyDigests := fs.String("verify-digests", "", "verify the signed digest catalog FILE (check --digests FILE wrote it and FILE.sigstore.json) with --key or the --certificate-* identity, and say what it lists; no registry is asked")
	var trust trustFlags
	trust.register(fs)
	var signing signingFlags
	signing.register(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: swebuild check --dataset DATASET --repo REPO [--require-verified --key PUB] [--digests FILE] [OPTIONS]\n       swebuild check --verify-digests FILE --key PUB\n\nCheck that every image the dataset's records call for is in the registry: per instance\nREPO/sweb.eval.<arch>.<id> for each platform plan decides (no arm64 name for x86-only ids;\n--platform narrows them) and the index REPO/sweb.eval.<id> listing those platforms, each\nchild present in the index's repository. One request per reference. Prints N/M images\npresent and the gaps (a 401 as \"login refused by HOST\"); exits non-zero on any gap.\nWith --require-verified, each image must also carry a signed statement saying verified.\n--digests FILE writes the instance -> per-platform digest catalog and signs it\n(FILE.sigstore.json; --signing-key, keyless on GitHub Actions, or --unsigned).\n\nOptions:\n%s", fs.FlagUsages())
	}
	if done, err := parseFlags(fs, args, false, stdout, stderr); done {
		return err
	}
	usage := func(format string, a ...any) error { return usageErr(fs, stderr, format, a...) }
	if *verifyDigests != "" {
		if *repo != "" || *requireVerified || *digests != "" {
			return usage("--verify-digests checks a catalog file alone: no --repo, --require-verified or --digests")
		}
		t, err := trust.trust(usage)
		if err != nil {
			return err
		}
		return verifyCatalog(*verifyDigests, t, stdout)
	}
	if *repo == "" {
		return usageErr(fs, stderr, "--repo is required")
	}
	require, err := trust.requirement(*requireVerified, usage)
	if err != nil {
		return err
	}
	var signer *sign.Signer
	if *digests != "" {
		var err error
		if signer, err = signing.signer(fs, stderr, "check --digests signs the catalog it writes"); err != nil {
			return err
		}
	}
	var only []core.Platform
	if len(*platforms) > 0 {
		var err error
		if only, err = core.ParsePlatforms(*platforms); err != nil {
			return usageErr(fs, stderr, "--platform: %v", err)
		}
	}
	loaded, loadErr := g.load(ctx, stderr)
	if errors.Is(loadErr, errUsage) {
		return usageErr(fs, stderr, "%v", loadErr)
	}
	if loaded == nil {
		return loadErr
	}
	dest, err := registry.RegistryOf(*repo)
	if err != nil {
		return fmt.Errorf("--repo: %w", err)
	}
	reader, err := publicationReader(*authEnv, dest, registry.Options{InsecureRegistries: *insecure})
	if err != nil {
		return err
	}
	reader.Jobs = *jobs
	opts := check.Options{
		Repo:                 *repo,
		KeepDoubleUnderscore: *keepUU,
		Tag:                  *tag,
		Platforms:            loaded.PlatformsOf(),
		Only:                 only,
		RecordRoot:           *recordRoot,
		Reader:               reader,
		Require:              require,
	}
	rep, err := check.Run(ctx, loaded.Instances, opts)
	if err != nil {
		return err
	}
	rep.Print(stdout)
	if *digests != "" {
		if err := writeCatalog(ctx, *digests, signer, rep, loaded.Source.String(), opts, stdout); err != nil {
			return err
		}
	}
	return errors.Join(rep.Err(), loadErr)
}

// writeCatalog writes the report's digest catalog to path and, with a
// signer, its signed statement beside it (path.sigstore.json).
func writeCatalog(ctx context.Context, path string, signer *sign.Signer, rep *check.Report, source string, opts check.Options, stdout io.Writer) error {
	var buf bytes.Buffer
	if err := rep.WriteDigests(&buf); err != nil {
		return err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("--digests: %w", err)
	}
	if signer == nil {
		return nil
	}
	return signCatalog(ctx, signer, path, buf.Bytes(), rep, source, opts, stdout)
}

// catalogBundle is where check --digests FILE writes FILE's signature: a
// Sigstore bundle, as cosign sign-blob --bundle names it.
func catalogBundle(file string) string { return file + ".sigstore.json" }

// signCatalog signs the digest catalog file (its bytes data) as an
// in-toto statement naming it, into FILE.sigstore.json.
func signCatalog(ctx context.Context, signer *sign.Signer, file string, data []byte, rep *check.Report, dataset string, o check.Options, stdout io.Writer) error {
	st, err := rep.Catalog(filepath.Base(file), data, dataset, o)
	if err != nil {
		return err
	}
	bundle, _, err := signer.Sign(ctx, st)
	if err != nil {
		return fmt.Errorf("--digests: signing the catalog: %w", err)
	}
	if err := os.WriteFile(catalogBundle(file), bundle, 0o644); err != nil {
		return fmt.Errorf("--digests: %w", err)
	}
	fmt.Fprintf(stdout, "digest catalog %s signed by %s: %s\n", file, signer.Name(), catalogBundle(file))
	return nil
}

// verifyCatalog verifies the digest catalog file with its bundle and says
// what it lists.
func verifyCatalog(file string, t sign.Trust, stdout io.Writer) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("--verify-digests: %w", err)
	}
	bundle, err := os.ReadFile(catalogBundle(file))
	if err != nil {
		return fmt.Errorf("--verify-digests: the catalog's signature: %w", err)
	}
	info, err := check.VerifyCatalog(t, data, bundle)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	verified := "not gated (written without --require-verified)"
	if info.Verified >= 0 {
		verified = fmt.Sprintf("%d verified images", info.Verified)
	}
	fmt.Fprintf(stdout, "%s: signed by %s: the digest catalog of %s in %s:%s, %d instances, %d/%d references present, %s\n",
		file, t.Name(), info.Dataset, info.Repo, info.Tag, info.Instances, info.Present, info.References, verified)
	return nil
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
