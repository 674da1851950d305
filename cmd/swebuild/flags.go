package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/agext/levenshtein"
	"github.com/spf13/pflag"
)

// The one place every subcommand parses its flags and reports a usage
// problem, Docker style: the problem and a pointer to the help on stderr,
// exit status 2; the help itself on stdout, exit status 0.

// newFlagSet is a command's flag set: errors returned, not exited on;
// problems to stderr; the flags listed in the order registered.
func newFlagSet(name string, stderr io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	return fs
}

// errHelp reports that the help was printed (exit status 0).
var errHelp = errors.New("help printed")

// usageProblem is a usage error whose message has not been printed yet
// (genInputs.load's); errors.Is(err, errUsage) holds for it.
type usageProblem struct{ error }

func (usageProblem) Is(target error) bool { return target == errUsage }

// usageErr prints "swebuild CMD: <problem>" and "See 'swebuild CMD --help'."
// to w and returns errUsage (exit status 2). CMD is the flag set's name
// ("plan", "ci matrix").
func usageErr(fs *pflag.FlagSet, w io.Writer, format string, a ...any) error {
	fmt.Fprintf(w, "swebuild %s: %s\nSee 'swebuild %s --help'.\n", fs.Name(), fmt.Sprintf(format, a...), fs.Name())
	return errUsage
}

// parseFlags parses args into fs; done is true when the command must stop
// and return err: --help printed fs.Usage to stdout (err nil), or any
// problem (an unknown flag, with the nearest known
// ones suggested; a missing or invalid value; a single-value flag given
// twice; a positional argument when takesArgs is false) is printed by
// usageErr to stderr (err errUsage).
func parseFlags(fs *pflag.FlagSet, args []string, takesArgs bool, stdout, stderr io.Writer) (done bool, err error) {
	err = parseArgs(fs, args, takesArgs, stdout, stderr)
	if errors.Is(err, errHelp) {
		return true, nil
	}
	return err != nil, err
}

func parseArgs(fs *pflag.FlagSet, args []string, takesArgs bool, stdout, stderr io.Writer) error {
	fs.SetOutput(stdout) // pflag prints the usage itself, for --help only
	defer fs.SetOutput(stderr)
	seen := map[string]bool{}
	err := fs.ParseAll(args, func(f *pflag.Flag, value string) error {
		if _, multi := f.Value.(pflag.SliceValue); !multi && seen[f.Name] {
			return fmt.Errorf("--%s given twice: it takes one value", f.Name)
		}
		seen[f.Name] = true
		return fs.Set(f.Name, value)
	})
	switch {
	case errors.Is(err, pflag.ErrHelp):
		return errHelp
	case err != nil:
		msg := err.Error()
		if name, ok := unknownFlag(msg); ok {
			if s := suggestFlags(fs, name); len(s) > 0 {
				msg += "; did you mean " + strings.Join(s, " or ") + "?"
			}
		}
		return usageErr(fs, stderr, "%s", msg)
	case !takesArgs && fs.NArg() > 0:
		return usageErr(fs, stderr, "unexpected argument(s): %s", strings.Join(fs.Args(), " "))
	}
	return nil
}

// unknownFlag extracts the flag name from pflag's "unknown flag: --x" and
// "unknown shorthand flag: 'x' in -x" errors.
func unknownFlag(msg string) (string, bool) {
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		name, _, _ = strings.Cut(name, "=")
		return name, true
	}
	if rest, ok := strings.CutPrefix(msg, "unknown shorthand flag: '"); ok {
		name, _, _ := strings.Cut(rest, "'")
		return name, true
	}
	return "", false
}

// flagAliases are names users bring from other tools or other swebuild
// commands, mapped to the flags that mean the same thing here.
var flagAliases = map[string][]string{
	"platform":     {"arch"},
	"platforms":    {"platform", "arch"},
	"arch":         {"platform"},
	"output":       {"out", "format"},
	"o":            {"out"},
	"repo":         {"publish", "push", "images"},
	"registry":     {"push", "repo", "images"},
	"instances":    {"instance"},
	"id":           {"instance"},
	"ids":          {"instance"},
	"jobs":         {"workers", "jobs"},
	"j":            {"jobs", "workers"},
	"workers":      {"jobs"},
	"parallel":     {"workers", "jobs"},
	"metadata":     {"metadata-file"},
	"cache":        {"cache-dir"},
	"no-network":   {"offline"},
	"pin":          {"pins"},
	"spec":         {"specs"},
	"data":         {"dataset"},
	"dataset-name": {"dataset"},
	"dataset-file": {"dataset"},
}

// suggestFlags returns "--name" for the flags of fs close to name: an
// alias, a prefix either way, or an edit distance of at most 2 (1 for short
// names).
func suggestFlags(fs *pflag.FlagSet, name string) []string {
	var out []string
	add := func(n string) {
		if fs.Lookup(n) != nil && !fs.Lookup(n).Hidden && !slices.Contains(out, "--"+n) && n != name {
			out = append(out, "--"+n)
		}
	}
	for _, a := range flagAliases[strings.ToLower(name)] {
		add(a)
	}
	fs.VisitAll(func(f *pflag.Flag) {
		limit := 2
		if len(name) <= 4 {
			limit = 1
		}
		switch {
		case len(name) >= 3 && (strings.HasPrefix(f.Name, name) || strings.HasPrefix(name, f.Name)):
			add(f.Name)
		case editDistance(strings.ToLower(name), f.Name) <= limit:
			add(f.Name)
		}
	})
	if len(out) > 3 {
		out = out[:3]
	}
	return out
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int { return levenshtein.Distance(a, b, nil) }
