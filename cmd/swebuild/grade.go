package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/dataset"
	"github.com/swebuild/swebuild/grading"
)

// runGrade implements `swebuild grade`: grade one test log exactly as
// upstream SWE-bench v4.1.0 does and print its report.json (or the parsed
// status map).
func runGrade(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("grade", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	var f gradeFlags
	f.register(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: swebuild grade --dataset FILE --instance ID --log FILE [--patch FILE|--gold|--no-patch] [OPTIONS]\n\n"+
			"Grade a test log as upstream SWE-bench v4.1.0 does and print report.json.\n\nOptions:\n%s", fs.FlagUsages())
	}
	if done, err := parseFlags(fs, args, true, stdout, stderr); done {
		return err
	}
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
	parser                             string
	gold, wholeLog, statusMap, noPatch bool
	maxLogSize                         int64
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
	fs.StringVar(&f.parser, "parser", "", "parser to use instead of the repo's: "+grading.ParserHelp())
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
	return nil
}

// patch is the evaluated patch as grading takes it: nil for --no-patch, ""
// for --patch (grading only needs it to exist, upstream's patch_exists; its
// content is never read), the gold patch otherwise.
func (f *gradeFlags) patch(inst dataset.Instance) (*string, error) {
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
func (f *gradeFlags) grade(inst dataset.Instance, stdout, stderr io.Writer) error {
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
	opts := grading.GradeOptions{WholeLog: f.wholeLog, Parser: f.parser}
	if f.statusMap {
		res, err := grading.EvalLog(inst, log, opts)
		if err != nil {
			return fmt.Errorf("%s: %w", f.logPath, err)
		}
		if !res.Applied {
			fmt.Fprintf(stderr, "swebuild grade: %s: not applied for upstream v4.1.0: %s\n", f.logPath, res.Reason)
		} else if res.FellBack {
			fmt.Fprintf(stderr, "swebuild grade: %s: nothing parsed between the markers; parsed the whole log with %s (as upstream does)\n", f.logPath, res.Parser)
		}
		return writeOut(stdout, res.StatusMap.JSON())
	}
	rep, err := grading.Grade(inst, log, patch, opts)
	if err != nil {
		return fmt.Errorf("%s: %w", f.logPath, err)
	}
	if rep.NotApplied != "" {
		hint := ""
		if !f.wholeLog && !strings.Contains(log, grading.StartTestOutput) {
			hint = " (a log from a harness older than the markers needs --whole-log)"
		}
		fmt.Fprintf(stderr, "swebuild grade: %s: not applied for upstream v4.1.0: %s%s\n", f.logPath, rep.NotApplied, hint)
	}
	return writeOut(stdout, rep.JSON())
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
func findInstance(ctx context.Context, ds *datasetFlags, id string, stderr io.Writer) (dataset.Instance, error) {
	insts, err := ds.open(ctx, nil, stderr)
	path := ds.source.String()
	var verr *dataset.ValidationError
	if err != nil && !errors.As(err, &verr) {
		return dataset.Instance{}, err
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
			return dataset.Instance{}, fmt.Errorf("instance %s: %s", id, strings.Join(own, "; "))
		}
		return dataset.Instance{}, fmt.Errorf("instance %s not found among the valid records of %s: %w", id, path, err)
	}
	return dataset.Instance{}, fmt.Errorf("instance %s not found in %s", id, path)
}
