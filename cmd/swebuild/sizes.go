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

// runSizes implements `swebuild sizes`: measure image set A (and B) in the
// registry and write a comparison report.
func runSizes(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("sizes", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	var (
		cfg       sizes.Config
		format    string
		out       string
		maxGrowth float64
	)
	fs.StringVar(&cfg.Images, "images", "", "image set A: REPO (swebuild naming), swebuild:REPO, upstream[:REPO], epoch[:REPO], a template with {arch} and {id} or {id_1776}, or a metadata file")
	fs.StringVar(&cfg.Against, "against", "", "image set B to compare with (same syntax as --images)")
	var g genInputs
	g.register(fs)
	ids := fs.String("ids", "", "file of instance ids, one per line, instead of --dataset or --task-repo (x86-only decided from the id alone)")
	platformsVar(fs, &cfg.Platforms, "platform", []core.Platform{core.AMD64}, "platforms to measure (linux/amd64, linux/arm64)")
	fs.StringVar(&format, "format", "md", "output format: "+strings.Join(sizes.Formats, ", "))
	fs.StringVarP(&out, "out", "o", "", "write the report to this file instead of stdout")
	fs.Float64Var(&maxGrowth, "max-growth", 0, "exit non-zero when A's unique-layer compressed size grew by more than this percentage against B")
	fs.BoolVar(&cfg.Uncompressed, "uncompressed", false, "also measure uncompressed sizes (reads every unique layer once; cached by digest)")
	authEnv := fs.String("registry-auth-env", registry.DefaultAuthEnv, "environment variable holding REGISTRY=USER:PASSWORD,... for the registries measured; the Docker config and credential helpers are used too")
	fs.IntVarP(&cfg.Jobs, "jobs", "j", 8, "concurrent registry requests")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: swebuild sizes --images SET [--against SET] [OPTIONS]\n\nCompare image set sizes (1024-based units).\n\nOptions:\n%s", fs.FlagUsages())
	}
	if done, err := parseFlags(fs, args, false, stdout, stderr); done {
		return err
	}
	if cfg.Images == "" {
		return usageErr(fs, stderr, "--images is required")
	}
	if fs.Changed("max-growth") && cfg.Against == "" {
		return usageErr(fs, stderr, "--max-growth needs --against")
	}
	if !slices.Contains(sizes.Formats, format) {
		return usageErr(fs, stderr, "--format: unknown format %q (want one of %s)", format, strings.Join(sizes.Formats, ", "))
	}
	if err := sizesInstances(ctx, &cfg, &g, *ids, stderr); err != nil {
		if errors.Is(err, errUsage) {
			return usageErr(fs, stderr, "%v", err)
		}
		return err
	}
	cfg.CacheDir = filepath.Join(g.cacheDir, "sizes", "layers") // uncompressed layer sizes by digest
	cfg.PlatformsGiven = fs.Changed("platform")
	if fs.Changed("max-growth") {
		cfg.MaxGrowthPercent = &maxGrowth
	}
	reader, err := publicationReader(*authEnv, "", registry.Options{})
	if err != nil {
		return err
	}
	cfg.Source = sizes.NewRemote(reader)
	rep, err := sizes.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if err := writeReport(stdout, out, func(w io.Writer) error { return sizes.Write(w, rep, format) }); err != nil {
		return err
	}
	if probs := rep.Problems(); len(probs) > 0 {
		return errors.New(strings.Join(probs, "; "))
	}
	return nil
}

// sizesInstances gives cfg the instances of sets named by scheme: the
// input's records with their platform decision, or an id list.
func sizesInstances(ctx context.Context, cfg *sizes.Config, g *genInputs, ids string, stderr io.Writer) error {
	switch {
	case g.given() && ids != "":
		return usageProblem{errors.New("--ids and --dataset/--task-repo: give one")}
	case strings.EqualFold(filepath.Ext(g.dataset), ".txt"):
		return usageProblem{fmt.Errorf("--dataset %s: a list of ids is given as --ids %s", g.dataset, g.dataset)}
	case ids != "":
		in, err := sizes.ReadIDList(ids)
		if err != nil {
			return fmt.Errorf("--ids: %w", err)
		}
		cfg.Instances = in
		return nil
	case !g.given():
		return nil
	}
	in, err := g.inputs(stderr)
	if err != nil {
		return usageProblem{err}
	}
	in.NotRendered = true // ids and platform decisions only
	loaded, err := pipeline.Load(ctx, in)
	if loaded == nil {
		return err
	}
	if err != nil {
		fmt.Fprintf(stderr, "swebuild sizes: %v\n", err)
	}
	for _, in := range loaded.Instances {
		cfg.Instances = append(cfg.Instances, sizes.Instance{ID: in.InstanceID, Repo: in.Repo, Version: in.Version})
	}
	slices.SortFunc(cfg.Instances, func(a, b sizes.Instance) int { return strings.Compare(a.ID, b.ID) })
	cfg.Policy = sizes.PlatformPolicy(loaded.PlatformsByID())
	return nil
}
