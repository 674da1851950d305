package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/builder/spec"
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
	var fileRules []pins.Rule
	for _, f := range files {
		_, fr, err := pins.ReadFile(f)
		if err != nil {
			return fmt.Errorf("--file: %w", err)
		}
		fileRules = append(fileRules, fr...)
	}
	list := pins.NewList(fileRules, counts)
	if format == "json" {
		return list.WriteJSON(stdout)
	}
	list.WriteText(stdout)
	return nil
}

// countPins loads each dataset (as plan does, with its flags' defaults
// from the environment) and counts the instances each rule touches.
func countPins(ctx context.Context, datasets []string, stderr io.Writer) ([]pins.DatasetCounts, error) {
	if len(datasets) == 0 {
		return nil, nil
	}
	tables, err := spec.Load()
	if err != nil {
		return nil, err
	}
	var out []pins.DatasetCounts
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
		c := pins.DatasetCounts{Dataset: name, Instances: len(insts)}
		c.Touched, c.Unresolved = pins.Count(tables, insts)
		out = append(out, c)
	}
	return out, nil
}
