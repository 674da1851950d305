package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/dataset"
	"github.com/swebuild/swebuild/grading"
)

// runGrade implements `swebuild grade`: grade one test log exactly as
// upstream SWE-bench v5.0.2 or v4.1.0 does and print its report.json (or
// the parsed status map).
func runGrade(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("grade", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	var f gradeFlags
	f.register(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: swebuild grade --dataset FILE --instance ID --log FILE [--patch FILE|--gold|--no-patch] [OPTIONS]\n\n"+
			"Grade a test log as upstream SWE-bench v5.0.2 (--grading v5) or v4.1.0 (--grading v4.1) does and print\n"+
			"report.json; which rules and parser graded is said on stderr.\n\nOptions:\n%s", fs.FlagUsages())
	}
	if done, err := parseFlags(fs, args, true, stdout, stderr); done {
		return err
	}
	f.exitCodeSet = fs.Changed("exit-code")
	if err := f.check(fs.Args()); err != nil {
		return usageErr(fs, stderr, "%v", err)
	}
	inst, err := findInstance(ctx, &f.ds, f.instanceID, stderr)
	if err != nil {
		return err
	}
	return f.grade(inst, stdout, stderr)
}

// gradeFlags are the flags of `swebuild grade`.
type gradeFlags struct {
	ds                                 datasetFlags
	instanceID, logPath, patchPath     string
	parser, rules                      string
	gold, wholeLog, statusMap, noPatch bool
	maxLogSize                         int64
	exitCode                           int
	exitCodeSet                        bool
}

func (f *gradeFlags) register(fs *pflag.FlagSet) {
	f.ds.register(fs)
	fs.StringVar(&f.instanceID, "instance", "", "instance id to grade")
	fs.StringVar(&f.logPath, "log", "", "test log to grade (test_output.txt)")
	fs.StringVar(&f.patchPath, "patch", "", "the evaluated patch (its content is not graded; it only has to exist)")
	fs.BoolVar(&f.gold, "gold", false, "the evaluated patch is the dataset's gold patch (the default when no --patch is given)")
	fs.BoolVar(&f.noPatch, "no-patch", false, "the prediction had no patch (model_patch None): report patch_is_None without reading the log")
	fs.BoolVar(&f.wholeLog, "whole-log", false, "parse the whole log and do not require the Start/End Test Output markers (logs of pre-marker harnesses)")
	fs.BoolVar(&f.statusMap, "status-map", false, "print the parsed test status map instead of the report")
	fs.Int64Var(&f.maxLogSize, "max-log-size", grading.MaxLogSize, "largest log to read, in bytes (a longer one is an error)")
	fs.StringVar(&f.parser, "parser", "", "parser to use instead of the record's log_parser (v5) or the repo's (v4.1): "+grading.ParserHelp()+
		"; under v5 also the aliases of upstream's PARSER_REGISTRY (parse_log_sphinx, parse_log_xarray, ...)")
	fs.StringVar(&f.rules, "grading", "", "grading rules: v5 (upstream 5.0.2) or v4.1 (upstream 4.1.0); default v5 for a record with log_parser, else v4.1")
	fs.IntVar(&f.exitCode, "exit-code", 0, "the test command's exit status as observed outside the container; under v5 it replaces the log's '>>>>> Test Exit Code: N' line")
}

// check reports the first usage problem: arguments, a missing required
// flag, flags that exclude each other, a bad size.
func (f *gradeFlags) check(args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(args, " "))
	}
	var missing []string
	for _, r := range []struct{ name, val string }{{"--dataset", f.ds.dataset}, {"--instance", f.instanceID}, {"--log", f.logPath}} {
		if r.val == "" {
			missing = append(missing, r.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s required", strings.Join(missing, ", "))
	}
	n := 0
	for _, set := range []bool{f.patchPath != "", f.gold, f.noPatch} {
		if set {
			n++
		}
	}
	if n > 1 {
		return errors.New("--patch, --gold and --no-patch exclude each other")
	}
	if f.maxLogSize <= 0 {
		return errors.New("--max-log-size must be a positive number of bytes")
	}
	switch grading.Rules(f.rules) {
	case "", grading.RulesV5, grading.RulesV41:
	default:
		return fmt.Errorf("--grading %q: want %s or %s", f.rules, grading.RulesV5, grading.RulesV41)
	}
	if f.exitCodeSet && grading.Rules(f.rules) == grading.RulesV41 {
		return errors.New("--exit-code needs v5 rules (v4.1 has no exit-status rule)")
	}
	return nil
}

// patch is the evaluated patch as grading takes it: nil for --no-patch, ""
// for --patch (grading only needs it to exist, upstream's patch_exists; its
// content is never read), the gold patch otherwise.
func (f *gradeFlags) patch(inst core.Instance) (*string, error) {
	switch {
	case f.noPatch:
		return nil, nil
	case f.patchPath != "":
		st, err := os.Stat(f.patchPath)
		if err != nil {
			return nil, fmt.Errorf("reading patch: %w", err)
		}
		if st.IsDir() {
			return nil, fmt.Errorf("reading patch %s: is a directory", f.patchPath)
		}
		p := ""
		return &p, nil
	default:
		return &inst.Patch, nil
	}
}

// grade reads the log, grades it for inst and prints the report (or the
// status map), with what upstream would not have applied on stderr.
func (f *gradeFlags) grade(inst core.Instance, stdout, stderr io.Writer) error {
	patch, err := f.patch(inst)
	if err != nil {
		return err
	}
	var log string
	if patch != nil || f.statusMap {
		if log, err = grading.ReadLog(f.logPath, f.maxLogSize); err != nil {
			return err
		}
	}
	opts := grading.GradeOptions{WholeLog: f.wholeLog, Parser: f.parser, Rules: grading.Rules(f.rules)}
	if f.exitCodeSet {
		opts.ExitCode = &f.exitCode
	}
	if f.statusMap {
		res, err := grading.EvalLog(inst, log, opts)
		if err != nil {
			return fmt.Errorf("%s: %w", f.logPath, err)
		}
		fmt.Fprintf(stderr, "swebuild grade: %s: %s rules, parser %s%s\n", f.logPath, upstreamName(res.Rules), parserLabel(res.Registry, res.Parser), decisionLabel(res.Decision))
		if !res.Applied {
			fmt.Fprintf(stderr, "swebuild grade: %s: not applied for %s: %s\n", f.logPath, upstreamName(res.Rules), res.Reason)
		} else if res.FellBack {
			fmt.Fprintf(stderr, "swebuild grade: %s: nothing parsed between the markers; parsed the whole log with %s (as upstream does)\n", f.logPath, res.Parser)
		}
		return writeOut(stdout, res.StatusMap.JSON())
	}
	rep, err := grading.Grade(inst, log, patch, opts)
	if err != nil {
		return fmt.Errorf("%s: %w", f.logPath, err)
	}
	fmt.Fprintf(stderr, "swebuild grade: %s: %s rules, parser %s%s\n", f.logPath, upstreamName(rep.Rules), parserLabel(rep.ParserRegistry, rep.Parser), decisionLabel(rep.Decision))
	if rep.ExitCodeDisagrees {
		fmt.Fprintf(stderr, "swebuild grade: %s: the log's exit-code line says %d but the test command exited %d; graded with %d\n", f.logPath, *rep.LogExitCode, *rep.ExitCode, *rep.ExitCode)
	}
	if rep.NotApplied != "" {
		hint := ""
		if !f.wholeLog && !strings.Contains(log, grading.StartTestOutput) {
			hint = " (a log from a harness older than the markers needs --whole-log)"
		}
		fmt.Fprintf(stderr, "swebuild grade: %s: not applied for %s: %s%s\n", f.logPath, upstreamName(rep.Rules), rep.NotApplied, hint)
	}
	if rep.InfraFailureReason != "" {
		fmt.Fprintf(stderr, "swebuild grade: %s: infra_failure_reason %s (%s tier)\n", f.logPath, rep.InfraFailureReason, rep.InfraTier)
	}
	return writeOut(stdout, rep.JSON())
}

// upstreamName names the upstream release whose rules r are.
func upstreamName(r grading.Rules) string {
	if r == grading.RulesV5 {
		return "upstream v5.0.2"
	}
	return "upstream v4.1.0"
}

// parserLabel is the parser's name, with the registry name v5 picked it by
// when that is an alias; "(none)" when the log was not parsed.
func parserLabel(registry, function string) string {
	switch {
	case function == "" && registry == "":
		return "(none: the log was not parsed)"
	case registry == "" || registry == function:
		return function
	case function == "":
		return registry
	}
	return registry + " (" + function + ")"
}

func decisionLabel(d string) string {
	if d == "" {
		return ""
	}
	return ", decision " + d
}

func writeOut(w io.Writer, b []byte) error {
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
}

// findInstance loads the dataset and returns the record of id. Problems in
// other records are printed as warnings; a problem in the record itself is
// the error.
func findInstance(ctx context.Context, ds *datasetFlags, id string, stderr io.Writer) (core.Instance, error) {
	insts, err := ds.open(ctx, nil, stderr)
	path := ds.source.String()
	var verr *dataset.ValidationError
	if err != nil && !errors.As(err, &verr) {
		return core.Instance{}, err
	}
	for _, inst := range insts {
		if inst.InstanceID == id {
			if verr != nil {
				fmt.Fprintf(stderr, "swebuild grade: warning: %d problem(s) in other records of %s (first: %v)\n", len(verr.Problems), path, verr.Problems[0])
			}
			return inst, nil
		}
	}
	if verr != nil {
		var own []string
		for _, p := range verr.Problems {
			if p.InstanceID == id {
				own = append(own, p.Error())
			}
		}
		if len(own) > 0 {
			return core.Instance{}, fmt.Errorf("instance %s: %s", id, strings.Join(own, "; "))
		}
		return core.Instance{}, fmt.Errorf("instance %s not found among the valid records of %s: %w", id, path, err)
	}
	return core.Instance{}, fmt.Errorf("instance %s not found in %s", id, path)
}
