package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/pins"
	"github.com/swebuild/swebuild/pipeline"
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
	env := readDatasetEnv()
	counts, err := pipeline.PinCounts(ctx, datasets, pipeline.Inputs{CacheDir: env.cacheRoot, Offline: env.hfOffline,
		Hub: pipeline.HubOptions{Endpoint: env.hfEndpoint, Token: env.hfToken}, Log: stderr})
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
