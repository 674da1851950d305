package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/dataset"
	"github.com/swebuild/swebuild/pins"
)

// runPins implements `swebuild pins list`.
func runPins(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("pins", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		format   string
		datasets []string
	)
	fs.StringVar(&format, "format", "text", "output format: text or json")
	fs.StringArrayVar(&datasets, "dataset", nil, "count the instances of this dataset each rule touches (file or hub name, as for plan; repeatable)")
	var files []string
	fs.StringArrayVar(&files, "file", nil, "also list the hold rules of this pins file (a nightly's proposal), read as --pins default,FILE reads it (repeatable)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: swebuild pins list [--dataset DATASET]... [--file FILE]... [--format text|json]\n\n"+
			"List the pin rules applied on top of upstream specs (--pins default), then the\n"+
			"rules that make instances x86-only (no linux/arm64 image), each with how to turn\n"+
			"it off (--pins default,-ID) and, per --dataset, how many instances it touches;\n"+
			"then the arm64 rules for v5 flat Dockerfiles.\n\n"+
			"--pins takes none, default, a list of ids (ID,ID) or default minus some (default,-ID);\n"+
			"-ID of an x86-only rule lifts it, to try the arm64 images it forbids.\n\nOptions:\n%s", fs.FlagUsages())
	}
	if done, err := parseFlags(fs, args, true, stdout, stderr); done {
		return err
	}
	if fs.NArg() != 1 || fs.Arg(0) != "list" {
		return usageErr(fs, stderr, "want the subcommand \"list\", got %q", strings.Join(fs.Args(), " "))
	}
	if format != "text" && format != "json" {
		return usageErr(fs, stderr, "--format %q: want text or json", format)
	}
	counts, err := countPins(ctx, datasets, stderr)
	if err != nil {
		return err
	}
	rules := pins.All()
	builtin := len(rules)
	for _, f := range files {
		_, fr, err := pins.ReadFile(f)
		if err != nil {
			return fmt.Errorf("--file: %w", err)
		}
		rules = append(rules, fr...)
	}
	x86 := spec.X86Rules()
	flat := pins.FlatRules()
	if format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Pins    []pins.Rule     `json:"pins"`
			X86Only []spec.X86Rule  `json:"x86_only_rules"`
			Flat    []pins.FlatRule `json:"flat_arm64_rules"`
			Counts  []pinCounts     `json:"counts,omitempty"`
		}{rules, x86, flat, counts})
	}
	touches := func(id string) {
		for _, c := range counts {
			for _, t := range c.Touched {
				if t.Rule != id {
					continue
				}
				fmt.Fprintf(stdout, "touches:  %s: %d of %d instances", c.Dataset, t.Instances, c.Instances)
				if len(t.ByPlatform) > 0 {
					fmt.Fprintf(stdout, " (%s %d, %s %d)", core.AMD64.Arch(), t.ByPlatform[core.AMD64.String()], core.ARM64.Arch(), t.ByPlatform[core.ARM64.String()])
				}
				fmt.Fprintln(stdout)
			}
		}
	}
	for i, r := range rules {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		off := "--pins default,-" + r.ID
		if i >= builtin {
			off = "a pins file's rule: leave the file out of --pins (on with --pins default,FILE)"
		}
		fmt.Fprintf(stdout, "id:       %s\nmatch:    %s\nchange:   %s\nreason:   %s\nevidence: %s\nturn off: %s\n", r.ID, r.Match, r.Change, r.Reason, r.Evidence, off)
		touches(r.ID)
	}
	fmt.Fprintf(stdout, "\nx86-only rules (instances matching one get no linux/arm64 image; USE_X86 and a --specs file's x86_only list come first):\n")
	for _, r := range x86 {
		fmt.Fprintf(stdout, "\nid:       %s\nmatch:    %s\nchange:   no linux/arm64 image (plan, build, verify, ci and sizes skip it)\nreason:   %s\nevidence: %s\nlift:     --pins default,-%s (plans and builds their linux/arm64 images, to try them)\n", r.ID, r.Match, r.Reason, r.Evidence, r.ID)
		touches(r.ID)
	}
	fmt.Fprintf(stdout, "\narm64 rules for flat Dockerfiles (v5 make_v5_dockerfiles.py output and task-repo Dockerfiles; pins.RewriteFlatArm64):\n")
	for _, r := range flat {
		kind := ""
		if r.X86Only {
			kind = " (x86-only rule)"
		}
		fmt.Fprintf(stdout, "\nid:       %s%s\nmatch:    %s\nchange:   %s\nreason:   %s\nevidence: %s\n", r.ID, kind, r.Match, r.Change, r.Reason, r.Evidence)
	}
	return nil
}

// pinCounts is how many instances of one dataset each rule touches.
type pinCounts struct {
	Dataset    string         `json:"dataset"`
	Instances  int            `json:"instances"`
	Unresolved int            `json:"unresolved,omitempty"`
	Touched    []pins.Touched `json:"touched"`
}

// countPins loads each dataset (as plan does, with its flags' defaults
// from the environment) and counts the instances each rule touches.
func countPins(ctx context.Context, datasets []string, stderr io.Writer) ([]pinCounts, error) {
	if len(datasets) == 0 {
		return nil, nil
	}
	tables, err := spec.Load()
	if err != nil {
		return nil, err
	}
	var out []pinCounts
	for _, name := range datasets {
		env := readDatasetEnv()
		d := datasetFlags{dataset: name, env: env, cacheDir: env.cacheRoot, offline: env.hfOffline}
		insts, err := d.open(ctx, tables, stderr)
		var verr *dataset.ValidationError
		if err != nil && !errors.As(err, &verr) {
			return nil, fmt.Errorf("--dataset %s: %w", name, err)
		}
		if verr != nil {
			fmt.Fprintln(stderr, verr.Error())
		}
		c := pinCounts{Dataset: name, Instances: len(insts)}
		c.Touched, c.Unresolved = pins.Count(tables, insts)
		out = append(out, c)
	}
	return out, nil
}
