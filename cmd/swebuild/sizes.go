package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/pipeline"
	"github.com/swebuild/swebuild/registry"
	"github.com/swebuild/swebuild/sizes"
)

// sizesFlags are the flags of `swebuild sizes`.
type sizesFlags struct {
	cfg                       sizes.Config
	g                         genInputs
	ids, format, out, authEnv string
	maxGrowth                 float64
}

func (f *sizesFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.cfg.Images, "images", "", "image set A: REPO (swebuild naming), swebuild:REPO, upstream[:REPO], epoch[:REPO], a template with {arch} and {id} or {id_1776}, or a metadata file")
	fs.StringVar(&f.cfg.Against, "against", "", "image set B to compare with (same syntax as --images)")
	f.g.register(fs)
	fs.StringVar(&f.ids, "ids", "", "file of instance ids, one per line, instead of --dataset or --task-repo (x86-only decided from the id alone)")
	platformsVar(fs, &f.cfg.Platforms, "platform", []core.Platform{core.AMD64}, "platforms to measure (linux/amd64, linux/arm64)")
	fs.StringVar(&f.format, "format", "md", "output format: "+strings.Join(sizes.Formats, ", "))
	fs.StringVarP(&f.out, "out", "o", "", "write the report to this file instead of stdout")
	fs.Float64Var(&f.maxGrowth, "max-growth", 0, "exit non-zero when A's unique-layer compressed size grew by more than this percentage against B")
	fs.BoolVar(&f.cfg.Uncompressed, "uncompressed", false, "also measure uncompressed sizes (reads every unique layer once; cached by digest)")
	fs.StringVar(&f.authEnv, "registry-auth-env", registry.DefaultAuthEnv, "environment variable holding REGISTRY=USER:PASSWORD,... for the registries measured; the Docker config and credential helpers are used too")
	fs.IntVarP(&f.cfg.Jobs, "jobs", "j", 8, "concurrent registry requests")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: swebuild sizes --images SET [--against SET] [OPTIONS]\n\nCompare image set sizes (1024-based units).\n\nOptions:\n%s", fs.FlagUsages())
	}
}

// runSizes implements `swebuild sizes`: measure image set A (and B) in the
// registry and write a comparison report.
func runSizes(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("sizes", stderr)
	var f sizesFlags
	f.register(fs)
	if done, err := parseFlags(fs, args, false, stdout, stderr); done {
		return err
	}
	cfg := &f.cfg
	switch {
	case cfg.Images == "":
		return usageErr(fs, stderr, "--images is required")
	case fs.Changed("max-growth") && cfg.Against == "":
		return usageErr(fs, stderr, "--max-growth needs --against")
	case !slices.Contains(sizes.Formats, f.format):
		return usageErr(fs, stderr, "--format: unknown format %q (want one of %s)", f.format, strings.Join(sizes.Formats, ", "))
	}
	if err := f.instances(ctx, stderr); err != nil {
		if errors.Is(err, errUsage) {
			return usageErr(fs, stderr, "%v", err)
		}
		return err
	}
	cfg.CacheDir = filepath.Join(f.g.cacheDir, "sizes", "layers") // uncompressed layer sizes by digest
	cfg.PlatformsGiven = fs.Changed("platform")
	if fs.Changed("max-growth") {
		cfg.MaxGrowthPercent = &f.maxGrowth
	}
	reader, err := publicationReader(f.authEnv, "", registry.Options{})
	if err != nil {
		return err
	}
	cfg.Source = sizes.NewRemote(reader)
	rep, err := sizes.Run(ctx, *cfg)
	if err != nil {
		return err
	}
	if err := writeReport(stdout, f.out, func(w io.Writer) error { return sizes.Write(w, rep, f.format) }); err != nil {
		return err
	}
	if probs := rep.Problems(); len(probs) > 0 {
		return errors.New(strings.Join(probs, "; "))
	}
	return nil
}

// instances gives the config the instances of sets named by scheme: the
// input's records with their platform decision, or an id list.
func (f *sizesFlags) instances(ctx context.Context, stderr io.Writer) error {
	switch {
	case f.g.given() && f.ids != "":
		return usageProblem{errors.New("--ids and --dataset/--task-repo: give one")}
	case strings.EqualFold(filepath.Ext(f.g.dataset), ".txt"):
		return usageProblem{fmt.Errorf("--dataset %s: a list of ids is given as --ids %s", f.g.dataset, f.g.dataset)}
	case f.ids != "":
		in, err := sizes.ReadIDList(f.ids)
		if err != nil {
			return fmt.Errorf("--ids: %w", err)
		}
		f.cfg.Instances = in
		return nil
	case !f.g.given():
		return nil
	}
	in, err := f.g.inputs(stderr)
	if err != nil {
		return usageProblem{err}
	}
	return pipeline.SizesInstances(ctx, in, &f.cfg)
}
