package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/check"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/drift"
	"github.com/swebuild/swebuild/pipeline"
	"github.com/swebuild/swebuild/registry"
)

// runDrift implements `swebuild drift`: the packages that changed between
// the environment documents of two publications.
func runDrift(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("drift", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	images := fs.String("images", "", "publication A: a records file (build metadata file or publish ledger) or a repository prefix (with --dataset)")
	against := fs.String("against", "", "publication B, compared with A (same syntax as --images); changes read A -> B")
	var g genInputs
	g.register(fs)
	format := fs.String("format", "md", "output format: "+strings.Join(drift.Formats, ", "))
	out := fs.StringP("out", "o", "", "write the report to this file instead of stdout")
	maxDrift := fs.Int("max-drift", -1, "exit non-zero when more than N distinct package changes (package, from, to; counted once whatever the number of images) are found; -1: no limit")
	save := fs.String("save", "", "write A's environment documents to this directory (the input of --freeze DIR on render/plan/build)")
	tag := fs.String("tag", check.DefaultTag, "tag read on every name of a repository prefix")
	keepUU := fs.Bool("keep-double-underscore", false, "names keep \"__\" instead of upstream's \"_1776_\" (as publish --keep-double-underscore)")
	authEnv := fs.String("registry-auth-env", registry.DefaultAuthEnv, "environment variable holding REGISTRY=USER:PASSWORD,...; the Docker config and credential helpers are used too")
	insecure := fs.StringArray("insecure-registry", nil, "allow plain HTTP to this registry (HOST[:PORT], repeatable); loopback registries are always allowed")
	jobs := fs.IntP("jobs", "j", 8, "images read at once")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: swebuild drift --images A --against B [OPTIONS]\n\n"+
			"Compare the resolved environments (the CycloneDX documents attached to each env and\n"+
			"instance image) of two publications: per image, matched by kind, name and platform,\n"+
			"the packages added, removed or changed from A to B, grouped by change. An image with\n"+
			"no document is reported as such. Exits non-zero when a document cannot be read, or\n"+
			"with --max-drift N when more than N distinct package changes are found.\n\nOptions:\n%s", fs.FlagUsages())
	}
	if done, err := parseFlags(fs, args, false, stdout, stderr); done {
		return err
	}
	switch {
	case *images == "":
		return usageErr(fs, stderr, "--images is required")
	case *against == "":
		return usageErr(fs, stderr, "--against is required")
	case !slices.Contains(drift.Formats, *format):
		return usageErr(fs, stderr, "--format: unknown format %q (want one of %s)", *format, strings.Join(drift.Formats, ", "))
	case *maxDrift < -1:
		return usageErr(fs, stderr, "--max-drift: %d (want N >= 0, or -1 for no limit)", *maxDrift)
	}
	kc, err := registryCredentials(*authEnv, "")
	if err != nil {
		return fmt.Errorf("--registry-auth-env: %w", err)
	}
	client, err := registry.New(registry.Options{Keychain: kc, InsecureRegistries: *insecure})
	if err != nil {
		return err
	}
	var loaded *pipeline.Loaded
	targets := func(flag, set string) ([]drift.Target, error) {
		if st, err := os.Stat(set); err == nil && !st.IsDir() {
			recs, err := core.ReadRecords(set, stderr)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", flag, err)
			}
			return drift.TargetsFromRecords(set, recs)
		}
		if !g.given() {
			return nil, usageProblem{fmt.Errorf("%s %s: not a file, so a repository prefix: --dataset is required to enumerate its images", flag, set)}
		}
		if loaded == nil {
			l, err := g.load(ctx, stderr)
			if l == nil {
				return nil, err
			}
			if err != nil {
				fmt.Fprintf(stderr, "swebuild drift: %v\n", err)
			}
			loaded = l
		}
		rep, err := check.Run(ctx, loaded.Instances, check.Options{
			Repo: set, KeepDoubleUnderscore: *keepUU, Tag: *tag,
			Platforms: loaded.PlatformsOf(), Client: client, Jobs: *jobs,
		})
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", flag, set, err)
		}
		var out []drift.Target
		missing := 0
		for _, r := range rep.Refs {
			if r.Kind != check.KindArch {
				continue
			}
			if !r.Present {
				missing++
				continue
			}
			out = append(out, drift.Target{Kind: drift.KindInstance, Name: r.InstanceID, Platform: r.Platform, Ref: pinned(r.Name, r.Digest)})
		}
		if missing > 0 {
			fmt.Fprintf(stderr, "swebuild drift: %s %s: %d per-arch images missing (not compared)\n", flag, set, missing)
		}
		return out, nil
	}
	ta, err := targets("--images", *images)
	if errors.Is(err, errUsage) {
		return usageErr(fs, stderr, "%v", err)
	}
	if err != nil {
		return err
	}
	tb, err := targets("--against", *against)
	if errors.Is(err, errUsage) {
		return usageErr(fs, stderr, "%v", err)
	}
	if err != nil {
		return err
	}
	refs := &attest.Referrers{Client: client}
	fa := &drift.Fetcher{Client: client, Referrers: refs, Jobs: *jobs, Save: *save}
	if *save != "" {
		if err := os.MkdirAll(*save, 0o755); err != nil {
			return fmt.Errorf("--save: %w", err)
		}
	}
	a, err := fa.Fetch(ctx, ta)
	if err != nil {
		return fmt.Errorf("--images %s: %w", *images, err)
	}
	fb := &drift.Fetcher{Client: client, Referrers: refs, Jobs: *jobs}
	b, err := fb.Fetch(ctx, tb)
	if err != nil {
		return fmt.Errorf("--against %s: %w", *against, err)
	}
	rep, err := drift.Compare(*images, a, *against, b)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := drift.Write(&buf, rep, *format); err != nil {
		return err
	}
	if *out == "" {
		if _, err := stdout.Write(buf.Bytes()); err != nil {
			return fmt.Errorf("writing report: %w", err)
		}
	} else if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if *maxDrift >= 0 {
		if over, msg := rep.Exceeds(*maxDrift); over {
			return errors.New(msg)
		}
	}
	return nil
}

// pinned is name (REPO:TAG) pinned to digest: REPO@DIGEST.
func pinned(name, digest string) string {
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	return name + "@" + digest
}
