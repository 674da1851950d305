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
	"github.com/swebuild/swebuild/pins"
)

// runPins implements `swebuild pins list`.
func runPins(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("pins", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var format string
	fs.StringVar(&format, "format", "text", "output format: text or json")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: swebuild pins list [--format text|json]\n\nList the pin rules applied on top of upstream specs (--pins default), then the\nrules that make instances x86-only (no linux/arm64 image) whatever the pins,\nthen the arm64 rules for v5 flat Dockerfiles.\n\nOptions:\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if fs.NArg() != 1 || fs.Arg(0) != "list" {
		fmt.Fprintf(stderr, "swebuild pins: want the subcommand \"list\", got %q\n", strings.Join(fs.Args(), " "))
		fs.Usage()
		return errUsage
	}
	rules := pins.All()
	x86 := spec.X86Rules()
	flat := pins.FlatRules()
	switch format {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Pins    []pins.Rule     `json:"pins"`
			X86Only []spec.X86Rule  `json:"x86_only_rules"`
			Flat    []pins.FlatRule `json:"flat_arm64_rules"`
		}{rules, x86, flat})
	case "text":
		for i, r := range rules {
			if i > 0 {
				fmt.Fprintln(stdout)
			}
			fmt.Fprintf(stdout, "id:       %s\nmatch:    %s\nchange:   %s\nreason:   %s\nevidence: %s\n", r.ID, r.Match, r.Change, r.Reason, r.Evidence)
		}
		fmt.Fprintf(stdout, "\nx86-only rules (instances matching one get no linux/arm64 image; USE_X86 and a --specs file's x86_only list come first):\n")
		for _, r := range x86 {
			fmt.Fprintf(stdout, "\nid:       %s\nmatch:    %s\nchange:   no linux/arm64 image (plan, build, verify, ci and sizes skip it)\nreason:   %s\nevidence: %s\n", r.ID, r.Match, r.Reason, r.Evidence)
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
	fmt.Fprintf(stderr, "swebuild pins: --format %q: want text or json\n", format)
	return errUsage
}
