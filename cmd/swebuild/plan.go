package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/builder/plan"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/taskrepo"
)

// runPlan implements `swebuild plan`.
func runPlan(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("plan", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	var (
		g         genInputs
		platforms []string
		format    string
	)
	g.register(fs)
	fs.StringSliceVar(&platforms, "platform", []string{core.AMD64.String(), core.ARM64.String()}, "platforms to plan (linux/amd64, linux/arm64)")
	fs.StringVar(&format, "format", "table", "output format: table or json")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: swebuild plan --dataset FILE|--task-repo DIR [--platform linux/amd64,linux/arm64] [--format table|json]\n\nPrint the base/env/instance image graph per platform (a task repo: its tasks per language and platform, and why the rest are x86-only).\n\nOptions:\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "swebuild plan: unexpected arguments: %s\n", strings.Join(fs.Args(), " "))
		fs.Usage()
		return errUsage
	}
	if format != "table" && format != "json" {
		fmt.Fprintf(stderr, "swebuild plan: --format %q: want table or json\n", format)
		return errUsage
	}
	plats, err := core.ParsePlatforms(platforms)
	if err != nil {
		fmt.Fprintf(stderr, "swebuild plan: --platform: %v\n", err)
		return errUsage
	}
	loaded, loadErr := g.load(ctx, stderr)
	if errors.Is(loadErr, errUsage) {
		fmt.Fprintf(stderr, "swebuild plan: %v\n", loadErr)
		fs.Usage()
		return errUsage
	}
	if loaded == nil {
		return loadErr
	}
	if loaded.Tasks != nil {
		return writeTaskPlan(loaded.TaskPlan(plats), format, stdout, loadErr)
	}
	r, insts := loaded.Renderer, loaded.Instances
	p, err := plan.Build(ctx, r, insts, plats)
	if err != nil {
		return err
	}
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

// writeTaskPlan prints a task repo's plan: per language and platform, and
// the reasons tasks stay x86-only (table), or every task (json).
func writeTaskPlan(tp taskrepo.Plan, format string, stdout io.Writer, loadErr error) error {
	var err error
	if format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(tp)
	} else {
		err = tp.WriteTable(stdout)
	}
	if err != nil {
		return fmt.Errorf("writing plan: %w", err)
	}
	return loadErr
}
