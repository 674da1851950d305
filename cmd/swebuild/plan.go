package main

import (
	"context"
	"fmt"
	"io"

	"github.com/swebuild/swebuild/core"
)

// runPlan implements `swebuild plan`.
func runPlan(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("plan", stderr)
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
	if err := p.Write(stdout, stderr, format == "json"); err != nil {
		return err
	}
	return p.Err(loadErr)
}
