package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/grading"
	"github.com/swebuild/swebuild/pipeline"
)

// runGrade implements `swebuild grade`: grade test logs exactly as
// upstream SWE-bench v5.0.2 or v4.1.0 does, in one process. One log: print
// its report.json (or the parsed status map). Many (--log repeated, or an
// upstream run directory, --run-dir): write each report.json beside its log
// as upstream's harness does and print one line per log.
func runGrade(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("grade", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	var f gradeFlags
	f.register(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: swebuild grade --dataset FILE|--task-repo DIR (--log [ID=]FILE [--instance ID] | --log [ID=]FILE... | --run-dir DIR) [--predictions FILE|--patch FILE|--gold|--no-patch] [OPTIONS]\n"+
			"       swebuild grade --run dir=DIR,dataset=FILE[,predictions=FILE] [--run ...] [OPTIONS]\n\n"+
			"Grade test logs as upstream SWE-bench v5.0.2 (--grading v5) or v4.1.0 (--grading v4.1) does, in one process.\n"+
			"One log: print its report.json; which rules and parser graded is said on stderr. Several --log, or an\n"+
			"upstream run directory (--run-dir logs/run_evaluation/<run_id>: <model>/<instance_id>/test_output.txt):\n"+
			"write each report.json beside its log, as upstream's harness does, and print one line per log. A log's\n"+
			"instance is ID=, --instance (one log), or the name of the directory holding it. --run grades more run\n"+
			"directories in the same process, each against its own dataset (or task repo) and predictions.\n\nOptions:\n%s", fs.FlagUsages())
	}
	if done, err := parseFlags(fs, args, true, stdout, stderr); done {
		return err
	}
	f.exitCodeSet = fs.Changed("exit-code")
	o, err := f.options(fs.Args(), stderr)
	if err != nil {
		return usageErr(fs, stderr, "%v", err)
	}
	results, err := pipeline.Grade(ctx, o)
	if !o.WriteReports {
		if len(results) == 1 && results[0].Err == nil {
			return errors.Join(f.print(results[0], stdout, stderr), err)
		}
		return err
	}
	return errors.Join(writeGradeLines(results, stdout, stderr), err)
}

// gradeFlags are the flags of `swebuild grade`.
type gradeFlags struct {
	g                                  genInputs
	logs, runs                         []string
	runDir, predictions, patchPath     string
	parser, rules                      string
	gold, wholeLog, statusMap, noPatch bool
	maxLogSize                         int64
	exitCode, jobs                     int
	exitCodeSet                        bool
}

func (f *gradeFlags) register(fs *pflag.FlagSet) {
	f.g.register(fs)
	fs.StringArrayVar(&f.logs, "log", nil, "test log to grade (test_output.txt), [ID=]FILE; repeatable: each report.json is written beside its log")
	fs.StringVar(&f.runDir, "run-dir", "", "upstream run directory (logs/run_evaluation/<run_id>): grade every <model>/<instance_id>/test_output.txt and write report.json beside it")
	fs.StringArrayVar(&f.runs, "run", nil, "another run graded in the same call against its own records: dir=RUN_DIR[,dataset=FILE|,task-repo=DIR][,predictions=FILE] (repeatable; without dataset= or task-repo=, --dataset/--task-repo; without predictions=, --predictions)")
	fs.StringVar(&f.predictions, "predictions", "", "upstream predictions file: a null model_patch is patch_is_None; logs without a prediction (of that model) are not graded, as upstream's --rewrite_reports")
	fs.StringVar(&f.patchPath, "patch", "", "the evaluated patch (its content is not graded; it only has to exist)")
	fs.BoolVar(&f.gold, "gold", false, "the evaluated patch is the dataset's gold patch (the default when no --patch is given)")
	fs.BoolVar(&f.noPatch, "no-patch", false, "the prediction had no patch (model_patch None): report patch_is_None without reading the log")
	fs.BoolVar(&f.wholeLog, "whole-log", false, "parse the whole log and do not require the Start/End Test Output markers (logs of pre-marker harnesses)")
	fs.BoolVar(&f.statusMap, "status-map", false, "print the parsed test status map instead of the report (one log)")
	fs.Int64Var(&f.maxLogSize, "max-log-size", grading.MaxLogSize, "largest log to read, in bytes (a longer one is an error)")
	fs.StringVar(&f.parser, "parser", "", "parser to use instead of the record's log_parser (v5) or the repo's (v4.1): "+grading.ParserHelp()+
		"; under v5 also the aliases of upstream's PARSER_REGISTRY (parse_log_sphinx, parse_log_xarray, ...)")
	fs.StringVar(&f.rules, "grading", "", "grading rules: v5 (upstream 5.0.2) or v4.1 (upstream 4.1.0); default v5 for a record with log_parser, else v4.1")
	fs.IntVar(&f.exitCode, "exit-code", 0, "the test command's exit status as observed outside the container (one log); under v5 it replaces the log's '>>>>> Test Exit Code: N' line")
	fs.IntVarP(&f.jobs, "jobs", "j", 0, "logs graded at once (default: one per CPU)")
}

// options check the flags and make the pipeline's options: the first usage
// problem is the error.
func (f *gradeFlags) options(args []string, stderr io.Writer) (pipeline.GradeOptions, error) {
	stderr = core.SyncWriter(stderr) // its workers write at once
	var o pipeline.GradeOptions
	if err := f.check(args); err != nil {
		return o, err
	}
	runs, err := f.gradeRuns()
	if err != nil {
		return o, err
	}
	g := f.g
	if !g.given() && len(runs) > 0 && !slices.ContainsFunc(runs, func(r pipeline.GradeRun) bool { return r.Dataset == "" && r.TaskRepo == "" }) {
		g.dataset, g.taskRepo = runs[0].Dataset, runs[0].TaskRepo // every run names its records
	}
	in, err := g.inputs(stderr)
	if err != nil {
		return o, err
	}
	patch, err := f.patch()
	if err != nil {
		return o, err
	}
	many := f.many()
	if !many {
		in.Instances = nil // the one log's instance: f.gradeLogs
	}
	o.Inputs, o.Logs, o.RunDir, o.PredictionsFile, o.Patch, o.Runs = in, f.gradeLogs(), f.runDir, f.predictions, patch, runs
	o.StatusMap, o.MaxLogSize, o.WriteReports, o.Jobs, o.Log = f.statusMap, f.maxLogSize, many, f.jobs, stderr
	o.Grade = grading.GradeOptions{WholeLog: f.wholeLog, Parser: f.parser, Rules: grading.Rules(f.rules)}
	if f.exitCodeSet {
		o.Grade.ExitCode = &f.exitCode
	}
	return o, nil
}

// many says whether several logs are graded (their reports written beside
// them) rather than one (its report printed).
func (f *gradeFlags) many() bool { return len(f.logs) > 1 || f.runDir != "" || len(f.runs) > 0 }

// check reports the first usage problem: arguments, what to grade, flags
// that exclude each other, values out of range.
func (f *gradeFlags) check(args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(args, " "))
	}
	if len(f.logs) == 0 && f.runDir == "" && len(f.runs) == 0 {
		return errors.New("--log FILE (or --run-dir DIR, or --run dir=DIR,...) is required")
	}
	n := 0
	for _, set := range []bool{f.patchPath != "", f.gold, f.noPatch, f.predictions != ""} {
		if set {
			n++
		}
	}
	switch grading.Rules(f.rules) {
	case "", grading.RulesV5, grading.RulesV41:
	default:
		return fmt.Errorf("--grading %q: want %s or %s", f.rules, grading.RulesV5, grading.RulesV41)
	}
	switch many := f.many(); {
	case n > 1:
		return errors.New("--patch, --gold, --no-patch and --predictions exclude each other")
	case f.maxLogSize <= 0:
		return errors.New("--max-log-size must be a positive number of bytes")
	case f.jobs < 0:
		return fmt.Errorf("--jobs %d: want at least 1 (or 0: one per CPU)", f.jobs)
	case f.exitCodeSet && grading.Rules(f.rules) == grading.RulesV41:
		return errors.New("--exit-code needs v5 rules (v4.1 has no exit-status rule)")
	case many && f.exitCodeSet:
		return errors.New("--exit-code is one log's exit status: give one --log")
	case many && f.statusMap:
		return errors.New("--status-map prints one log's status map: give one --log")
	case !many && len(f.g.instances) > 1:
		return errors.New("one --log is graded against one --instance")
	}
	return nil
}

// gradeRuns are the --run values: dir=RUN_DIR[,dataset=FILE|,task-repo=DIR][,predictions=FILE].
func (f *gradeFlags) gradeRuns() ([]pipeline.GradeRun, error) {
	var out []pipeline.GradeRun
	for _, v := range f.runs {
		var r pipeline.GradeRun
		for _, kv := range strings.Split(v, ",") {
			key, val, ok := strings.Cut(kv, "=")
			if !ok || val == "" {
				return nil, fmt.Errorf("--run %q: %q is not KEY=VALUE (keys: dir, dataset, task-repo, predictions)", v, kv)
			}
			var dst *string
			switch key {
			case "dir":
				dst = &r.Dir
			case "dataset":
				dst = &r.Dataset
			case "task-repo":
				dst = &r.TaskRepo
			case "predictions":
				dst = &r.PredictionsFile
			default:
				return nil, fmt.Errorf("--run %q: unknown key %q (keys: dir, dataset, task-repo, predictions)", v, key)
			}
			if *dst != "" {
				return nil, fmt.Errorf("--run %q: %s given twice", v, key)
			}
			*dst = val
		}
		switch {
		case r.Dir == "":
			return nil, fmt.Errorf("--run %q: dir=RUN_DIR is required", v)
		case r.Dataset != "" && r.TaskRepo != "":
			return nil, fmt.Errorf("--run %q: dataset= and task-repo=: give one", v)
		case r.PredictionsFile != "" && (f.patchPath != "" || f.gold || f.noPatch):
			return nil, fmt.Errorf("--run %q: predictions= and --patch, --gold or --no-patch exclude each other", v)
		}
		out = append(out, r)
	}
	return out, nil
}

// gradeLogs are the --log values: ID=FILE names the instance; one log
// takes the one --instance; otherwise the directory holding the log names
// it (pipeline.GradeOptions.Logs).
func (f *gradeFlags) gradeLogs() []pipeline.GradeLog {
	var out []pipeline.GradeLog
	for _, l := range f.logs {
		gl := pipeline.GradeLog{Path: l}
		if id, path, ok := strings.Cut(l, "="); ok && id != "" && !strings.ContainsRune(id, os.PathSeparator) {
			gl = pipeline.GradeLog{InstanceID: id, Path: path}
		} else if !f.many() && len(f.g.instances) == 1 {
			gl.InstanceID = f.g.instances[0]
		}
		out = append(out, gl)
	}
	return out
}

// patch is what was evaluated, as pipeline.GradeOptions.Patch takes it: a
// --patch must exist (grading only needs it to, upstream's patch_exists;
// its content is never read).
func (f *gradeFlags) patch() (string, error) {
	switch {
	case f.noPatch:
		return pipeline.PatchNone, nil
	case f.patchPath != "":
		st, err := os.Stat(f.patchPath)
		if err != nil {
			return "", fmt.Errorf("reading patch: %w", err)
		}
		if st.IsDir() {
			return "", fmt.Errorf("reading patch %s: is a directory", f.patchPath)
		}
		return pipeline.PatchGiven, nil
	}
	return pipeline.PatchGold, nil
}

// print prints one log's report (or status map) on stdout, with what
// upstream would not have applied on stderr.
func (f *gradeFlags) print(res pipeline.GradeResult, stdout, stderr io.Writer) error {
	path := res.Path
	if res.Skipped != "" {
		return fmt.Errorf("%s: not graded: %s", path, res.Skipped)
	}
	if er := res.EvalResult; er != nil {
		fmt.Fprintf(stderr, "swebuild grade: %s: %s rules, parser %s%s\n", path, upstreamName(er.Rules), parserLabel(er.Registry, er.Parser), decisionLabel(er.Decision))
		if !er.Applied {
			fmt.Fprintf(stderr, "swebuild grade: %s: not applied for %s: %s\n", path, upstreamName(er.Rules), er.Reason)
		} else if er.FellBack {
			fmt.Fprintf(stderr, "swebuild grade: %s: nothing parsed between the markers; parsed the whole log with %s (as upstream does)\n", path, er.Parser)
		}
		return writeOut(stdout, er.StatusMap.JSON())
	}
	rep := res.Report
	fmt.Fprintf(stderr, "swebuild grade: %s: %s rules, parser %s%s\n", path, upstreamName(rep.Rules), parserLabel(rep.ParserRegistry, rep.Parser), decisionLabel(rep.Decision))
	if rep.ExitCodeDisagrees {
		fmt.Fprintf(stderr, "swebuild grade: %s: the log's exit-code line says %d but the test command exited %d; graded with %d\n", path, *rep.LogExitCode, *rep.ExitCode, *rep.ExitCode)
	}
	if rep.NotApplied != "" {
		hint := ""
		if !f.wholeLog && !res.StartMarker {
			hint = " (a log from a harness older than the markers needs --whole-log)"
		}
		fmt.Fprintf(stderr, "swebuild grade: %s: not applied for %s: %s%s\n", path, upstreamName(rep.Rules), rep.NotApplied, hint)
	}
	if rep.InfraFailureReason != "" {
		fmt.Fprintf(stderr, "swebuild grade: %s: infra_failure_reason %s (%s tier)\n", path, rep.InfraFailureReason, rep.InfraTier)
	}
	return writeOut(stdout, rep.JSON())
}

// writeGradeLines prints one line per log (its verdict, or why it was not
// graded) and the totals.
func writeGradeLines(results []pipeline.GradeResult, stdout, stderr io.Writer) error {
	var resolved, unresolved, none, skipped, failed int
	var b strings.Builder
	for _, r := range results {
		verdict := ""
		switch {
		case r.Err != nil:
			failed++
			fmt.Fprintf(stderr, "swebuild grade: %v\n", r.Err)
			continue
		case r.Skipped != "":
			skipped++
			verdict = "not graded: " + r.Skipped
		case r.Report.PatchIsNone:
			none++
			verdict = "patch_is_None"
		case r.Report.Resolved:
			resolved++
			verdict = "resolved"
		default:
			unresolved++
			verdict = "unresolved"
			if r.Report.Decision != "" && r.Report.Decision != grading.DecisionGraded {
				verdict += " (" + r.Report.Decision + ")"
			}
		}
		fmt.Fprintf(&b, "%s: %s\n", r.Path, verdict)
	}
	fmt.Fprintf(&b, "graded %d of %d logs: %d resolved, %d unresolved, %d patch_is_None; %d not graded, %d errors; report.json beside each graded log\n",
		resolved+unresolved+none, len(results), resolved, unresolved, none, skipped, failed)
	if _, err := io.WriteString(stdout, b.String()); err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
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
