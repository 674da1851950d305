package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/core"
)

// runPlan implements `swebuild plan`.
func runPlan(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("plan", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	var (
		g         genInputs
		platforms []core.Platform
		format    string
	)
	g.register(fs)
	platformsVar(fs, &platforms, "platform", core.AllPlatforms(), "platforms to plan (linux/amd64, linux/arm64)")
	fs.StringVar(&format, "format", "table", "output format: table or json")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: swebuild plan --dataset FILE|--task-repo DIR [--platform linux/amd64,linux/arm64] [--format table|json]\n\nPrint the base/env/instance image graph per platform (a task repo: its tasks per language and platform, and why the rest are x86-only).\n\nOptions:\n%s", fs.FlagUsages())
	}
	if done, err := parseFlags(fs, args, false, stdout, stderr); done {
		return err
	}
	if format != "table" && format != "json" {
		return usageErr(fs, stderr, "--format %q: want table or json", format)
	}
	plats, err := core.PlatformSet(platforms)
	if err != nil {
		return usageErr(fs, stderr, "--platform: %v", err)
	}
	loaded, loadErr := g.load(ctx, fs, stderr)
	if loaded == nil {
		return loadErr
	}
	p, err := loaded.Plan(ctx, plats)
	if err != nil {
		return err
	}
	defer loaded.WriteNetworkHint(stderr, "plan", g.cacheDir)
	if format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(p); err != nil {
			return fmt.Errorf("writing plan: %w", err)
		}
	} else if err := p.WriteTable(stdout); err != nil {
		return fmt.Errorf("writing plan: %w", err)
	}
	if len(p.Errors) > 0 {
		if format == "json" {
			for _, e := range p.Errors {
				fmt.Fprintf(stderr, "plan: %s (%s): %s\n", e.InstanceID, e.Platform, e.Error)
			}
		}
		if loadErr != nil {
			return fmt.Errorf("%w; %d instance(s) could not be planned", loadErr, len(p.Errors))
		}
		return fmt.Errorf("%d instance(s) could not be planned", len(p.Errors))
	}
	return loadErr
}
