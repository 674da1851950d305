package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/pins"
)

// runPins implements `swebuild pins list`.
func runPins(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("pins", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var format string
	fs.StringVar(&format, "format", "text", "output format: text or json")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: swebuild pins list [--format text|json]\n\nList the pin rules applied on top of upstream specs (--pins default).\n\nOptions:\n%s", fs.FlagUsages())
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
	switch format {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rules)
	case "text":
		for i, r := range rules {
			if i > 0 {
				fmt.Fprintln(stdout)
			}
			fmt.Fprintf(stdout, "id:       %s\nmatch:    %s\nchange:   %s\nreason:   %s\nevidence: %s\n", r.ID, r.Match, r.Change, r.Reason, r.Evidence)
		}
		return nil
	}
	fmt.Fprintf(stderr, "swebuild pins: --format %q: want text or json\n", format)
	return errUsage
}
