package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/check"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/registry"
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
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: swebuild check --dataset DATASET --repo REPO [OPTIONS]\n\nCheck that every image the dataset's records call for is in the registry: per instance\nREPO/sweb.eval.<arch>.<id> for each platform plan decides (no arm64 name for x86-only ids;\n--platform narrows them) and the index REPO/sweb.eval.<id> listing those platforms, each\nchild present in the index's repository. One request per reference. Prints N/M images\npresent and the gaps (a 401 as \"login refused by HOST\"); exits non-zero on any gap.\n\nOptions:\n%s", fs.FlagUsages())
	}
	if done, err := parseFlags(fs, args, false, stdout, stderr); done {
		return err
	}
	if *repo == "" {
		return usageErr(fs, stderr, "--repo is required")
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
	rep, err := check.Run(ctx, loaded.Instances, check.Options{
		Repo:                 *repo,
		KeepDoubleUnderscore: *keepUU,
		Tag:                  *tag,
		Platforms:            loaded.PlatformsOf(),
		Only:                 only,
		RecordRoot:           *recordRoot,
		Reader:               reader,
	})
	if err != nil {
		return err
	}
	rep.Print(stdout)
	if *digests != "" {
		var buf bytes.Buffer
		if err := rep.WriteDigests(&buf); err != nil {
			return err
		}
		if err := os.WriteFile(*digests, buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("--digests: %w", err)
		}
	}
	return errors.Join(rep.Err(), loadErr)
}
