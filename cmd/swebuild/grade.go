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
	var (
		ds                                 datasetFlags
		instanceID, logPath, patchPath     string
		parser                             string
		gold, wholeLog, statusMap, noPatch bool
		maxLogSize                         int64
	)
	ds.register(fs)
	fs.StringVar(&instanceID, "instance", "", "instance id to grade")
	fs.StringVar(&logPath, "log", "", "test log to grade (test_output.txt)")
	fs.StringVar(&patchPath, "patch", "", "the evaluated patch (its content is not graded; it only has to exist)")
	fs.BoolVar(&gold, "gold", false, "the evaluated patch is the dataset's gold patch (the default when no --patch is given)")
	fs.BoolVar(&noPatch, "no-patch", false, "the prediction had no patch (model_patch None): report patch_is_None without reading the log")
	fs.BoolVar(&wholeLog, "whole-log", false, "parse the whole log and do not require the Start/End Test Output markers (logs of pre-marker harnesses)")
	fs.BoolVar(&statusMap, "status-map", false, "print the parsed test status map instead of the report")
	fs.Int64Var(&maxLogSize, "max-log-size", grading.MaxLogSize, "largest log to read, in bytes (a longer one is an error)")
	fs.StringVar(&parser, "parser", "", "parser to use instead of the repo's: "+grading.ParserHelp())
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: swebuild grade --dataset FILE --instance ID --log FILE [--patch FILE|--gold|--no-patch] [OPTIONS]\n\n"+
			"Grade a test log as upstream SWE-bench v4.1.0 does and print report.json.\n\nOptions:\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	usageErr := func(msg string) error {
		fmt.Fprintf(stderr, "swebuild grade: %s\n", msg)
		fs.Usage()
		return errUsage
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments: " + strings.Join(fs.Args(), " "))
	}
	var missing []string
	for _, f := range []struct{ name, val string }{{"--dataset", ds.dataset}, {"--instance", instanceID}, {"--log", logPath}} {
		if f.val == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return usageErr(strings.Join(missing, ", ") + " required")
	}
	n := 0
	for _, set := range []bool{patchPath != "", gold, noPatch} {
		if set {
			n++
		}
	}
	if n > 1 {
		return usageErr("--patch, --gold and --no-patch exclude each other")
	}
	if maxLogSize <= 0 {
		return usageErr("--max-log-size must be a positive number of bytes")
	}

	inst, err := findInstance(ctx, &ds, instanceID, stderr)
	if err != nil {
		return err
	}
	var patch *string
	switch {
	case noPatch:
	case patchPath != "":
		// Grading only needs the patch to exist (upstream's patch_exists);
		// its content is never read.
		st, err := os.Stat(patchPath)
		if err != nil {
			return fmt.Errorf("reading patch: %w", err)
		}
		if st.IsDir() {
			return fmt.Errorf("reading patch %s: is a directory", patchPath)
		}
		p := ""
		patch = &p
	default:
		patch = &inst.Patch
	}
	var log string
	if patch != nil || statusMap {
		if log, err = grading.ReadLog(logPath, maxLogSize); err != nil {
			return err
		}
	}
	opts := grading.GradeOptions{WholeLog: wholeLog, Parser: parser}

	if statusMap {
		res, err := grading.EvalLog(inst, log, opts)
		if err != nil {
			return fmt.Errorf("%s: %w", logPath, err)
		}
		if !res.Applied {
			fmt.Fprintf(stderr, "swebuild grade: %s: not applied for upstream v4.1.0: %s\n", logPath, res.Reason)
		} else if res.FellBack {
			fmt.Fprintf(stderr, "swebuild grade: %s: nothing parsed between the markers; parsed the whole log with %s (as upstream does)\n", logPath, res.Parser)
		}
		return writeOut(stdout, res.StatusMap.JSON())
	}
	rep, err := grading.Grade(inst, log, patch, opts)
	if err != nil {
		return fmt.Errorf("%s: %w", logPath, err)
	}
	if rep.NotApplied != "" {
		hint := ""
		if !wholeLog && !strings.Contains(log, grading.StartTestOutput) {
			hint = " (a log from a harness older than the markers needs --whole-log)"
		}
		fmt.Fprintf(stderr, "swebuild grade: %s: not applied for upstream v4.1.0: %s%s\n", logPath, rep.NotApplied, hint)
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
