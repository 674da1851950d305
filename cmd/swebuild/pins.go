package main

import (
	"context"
	"encoding/json"
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
		fmt.Fprintf(fs.Output(), "Usage: swebuild pins list [--format text|json]\n\nList the pin rules applied on top of upstream specs (--pins default), then the\nrules that make instances x86-only (no linux/arm64 image) whatever the pins.\n\nOptions:\n%s", fs.FlagUsages())
	}
	if done, err := parseFlags(fs, args, true, stdout, stderr); done {
		return err
	}
	if fs.NArg() != 1 || fs.Arg(0) != "list" {
		return usageErr(fs, stderr, "want the subcommand \"list\", got %q", strings.Join(fs.Args(), " "))
	}
	rules := pins.All()
	x86 := spec.X86Rules()
	switch format {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Pins    []pins.Rule    `json:"pins"`
			X86Only []spec.X86Rule `json:"x86_only_rules"`
		}{rules, x86})
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
		return nil
	}
	return usageErr(fs, stderr, "--format %q: want text or json", format)
}
