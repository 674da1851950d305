package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/core"
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
	fs.StringVar(&cfg.Dataset, "dataset", "", "dataset file (JSONL, JSON array, or .txt with one instance id per line) giving the instance ids")
	platformsVar(fs, &cfg.Platforms, "platform", []core.Platform{core.AMD64}, "platforms to measure (linux/amd64, linux/arm64)")
	fs.StringVar(&format, "format", "md", "output format: "+strings.Join(sizes.Formats, ", "))
	fs.StringVarP(&out, "out", "o", "", "write the report to this file instead of stdout")
	fs.Float64Var(&maxGrowth, "max-growth", 0, "exit non-zero when A's unique-layer compressed size grew by more than this percentage against B")
	fs.BoolVar(&cfg.Uncompressed, "uncompressed", false, "also measure uncompressed sizes (reads every unique layer once; cached by digest)")
	env := readDatasetEnv()
	fs.StringVar(&cfg.CacheDir, "cache-dir", filepath.Join(env.cacheRoot, "sizes", "layers"), "directory caching uncompressed layer sizes by digest")
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
	cfg.PlatformsGiven = fs.Changed("platform")
	if fs.Changed("max-growth") {
		cfg.MaxGrowthPercent = &maxGrowth
	}
	kc, err := registryCredentials(*authEnv, "")
	if err != nil {
		return fmt.Errorf("--registry-auth-env: %w", err)
	}
	client, err := registry.New(registry.Options{Keychain: kc})
	if err != nil {
		return err
	}
	cfg.Source = sizes.NewRemote(client)
	rep, err := sizes.Run(ctx, cfg)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := sizes.Write(&buf, rep, format); err != nil {
		return err
	}
	if out == "" {
		if _, err := stdout.Write(buf.Bytes()); err != nil {
			return fmt.Errorf("writing report: %w", err)
		}
	} else if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	if probs := rep.Problems(); len(probs) > 0 {
		return errors.New(strings.Join(probs, "; "))
	}
	return nil
}
