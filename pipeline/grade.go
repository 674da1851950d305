package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/grading"
	"github.com/swebuild/swebuild/verify"
)

// Upstream's names in a run directory (swebench.harness.constants).
const (
	// TestOutputFile is a run's test log, LOG_TEST_OUTPUT.
	TestOutputFile = "test_output.txt"
	// ReportFile is a run's graded report, LOG_REPORT.
	ReportFile = "report.json"
)

// What a graded log's patch was when there are no predictions
// (GradeOptions.Patch).
const (
	// PatchGold: the record's gold patch (grading only asks whether the
	// patch exists).
	PatchGold = "gold"
	// PatchGiven: a patch was given (its content is never read).
	PatchGiven = "given"
	// PatchNone: the prediction had no patch (model_patch None):
	// patch_is_None, the log not read.
	PatchNone = "none"
)

// GradeOptions are one `swebuild grade`: test logs (Logs, or every log of
// an upstream run directory, RunDir, and of further runs, Runs) graded
// against the records of their input, in one process, as upstream's
// harness grades a run.
type GradeOptions struct {
	// Inputs name the records (a dataset or a task repo; no spec tables
	// needed). Inputs.Instances, when set, grades only the logs of those
	// ids.
	Inputs
	// Logs are test logs to grade, each with its instance id ("": the name
	// of the directory holding it, as upstream lays a run out).
	Logs []GradeLog
	// RunDir is an upstream run directory, logs/run_evaluation/<run_id>:
	// every <model>/<instance_id>/test_output.txt below it is graded.
	RunDir string
	// PredictionsFile, when set, says each instance's patch as upstream's
	// --predictions_path does: a null model_patch is patch_is_None; a log
	// whose instance has no prediction, or one of another model, is not
	// graded (upstream's rewrite_reports grades only those).
	PredictionsFile string
	// Runs are more run directories graded in the same call, each against
	// its own records and predictions (upstream grades each run with its
	// dataset and predictions; one call grades many).
	Runs []GradeRun
	// Patch is what was evaluated when there are no predictions: PatchGold
	// ("" too), PatchGiven or PatchNone.
	Patch string
	// Grade are the grading options (rules, parser, whole log, exit code).
	Grade grading.GradeOptions
	// StatusMap parses the logs without grading them (Result.StatusMap).
	StatusMap bool
	// MaxLogSize is the largest log read (default grading.MaxLogSize).
	MaxLogSize int64
	// WriteReports writes each log's report.json beside it, as upstream's
	// harness does (json.dumps(report, indent=4)).
	WriteReports bool
	// Jobs grades this many logs at once (default: one per CPU).
	Jobs int
	// Log receives the input's problems.
	Log io.Writer
}

// GradeRun is one upstream run directory with the records and predictions
// it is graded against.
type GradeRun struct {
	// Dir is the run directory (logs/run_evaluation/<run_id>).
	Dir string
	// Dataset or TaskRepo name the run's records; both empty: the options'
	// Inputs. The options' other inputs (cache, --instance, hub) apply.
	Dataset, TaskRepo string
	// PredictionsFile is the run's predictions (as
	// GradeOptions.PredictionsFile); empty: the options' PredictionsFile,
	// or without one the options' Patch.
	PredictionsFile string
}

// GradeLog is one test log to grade.
type GradeLog struct {
	// InstanceID is the record it is graded against.
	InstanceID string
	// Path is the log (test_output.txt).
	Path string
	// Model is the model directory of a run directory ("" for a log given
	// by path): model_name_or_path with "/" as "__".
	Model string
}

// GradeResult is one log's grade.
type GradeResult struct {
	GradeLog
	// Report is the report (nil with StatusMap or Err); EvalResult the
	// parse (with StatusMap).
	Report     *grading.Report
	EvalResult *grading.LogResult
	// StartMarker says the log holds upstream's ">>>>> Start Test Output"
	// (a log of a harness older than the markers does not).
	StartMarker bool
	// Skipped says why the log was not graded (no prediction of it).
	Skipped string
	// Err is what stopped this log from being graded.
	Err error
}

// Grade grades every log: each against its instance's record, in one
// process, GradeOptions.Jobs at a time, writing report.json beside it when
// asked. Logs fail independently: the error joins every log that could not
// be graded and the inputs' problems; the results (in the order of the
// logs: given, then the run directory's sorted, then each of Runs) say what
// each came to.
func Grade(ctx context.Context, o GradeOptions) ([]GradeResult, error) {
	log := writerOr(o.Log)
	parts, err := o.parts()
	if err != nil {
		return nil, err
	}
	var problems []error
	var jobs []gradeJob
	loads := map[[2]string]*gradeRecords{}
	for _, p := range parts {
		recs, err := o.records(ctx, p, loads, log)
		if err != nil {
			return nil, errors.Join(append(problems, err)...)
		}
		if recs.problems != nil {
			problems = append(problems, recs.problems...)
			recs.problems = nil // said once, however many runs share the input
		}
		preds, err := readPredictions(p.predictions, log)
		if err != nil {
			return nil, errors.Join(append(problems, err)...)
		}
		for _, l := range p.logs {
			jobs = append(jobs, gradeJob{l, recs, preds})
		}
	}
	results := o.gradeAll(ctx, jobs)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	failed := 0
	for _, r := range results {
		if r.Err != nil {
			failed++
			problems = append(problems, r.Err)
		}
	}
	if failed > 0 && len(jobs) > 1 {
		problems = append(problems, fmt.Errorf("%d of %d log(s) could not be graded", failed, len(jobs)))
	}
	return results, errors.Join(problems...)
}

// gradePart is one run of a grade call: its logs, the input of its records
// and its predictions file.
type gradePart struct {
	logs              []GradeLog
	dataset, taskRepo string
	predictions       string
}

// gradeRecords are one input's records by instance id.
type gradeRecords struct {
	byID     map[string]*core.Instance
	source   fmt.Stringer
	problems []error
}

// gradeJob is one log with the records and predictions it is graded
// against.
type gradeJob struct {
	log     GradeLog
	records *gradeRecords
	preds   map[string]verify.Prediction
}

// parts are the runs of the call: the logs given and RunDir against the
// options' input and predictions, then each of Runs; each kept to
// Inputs.Instances when it is set.
func (o GradeOptions) parts() ([]gradePart, error) {
	first := gradePart{logs: slices.Clone(o.Logs), dataset: o.Dataset, taskRepo: o.TaskRepo, predictions: o.PredictionsFile}
	for i := range first.logs {
		if first.logs[i].InstanceID == "" {
			first.logs[i].InstanceID = filepath.Base(filepath.Dir(first.logs[i].Path))
		}
	}
	if o.RunDir != "" {
		found, err := RunLogs(o.RunDir)
		if err != nil {
			return nil, err
		}
		first.logs = append(first.logs, found...)
	}
	var parts []gradePart
	if len(first.logs) > 0 {
		parts = append(parts, first)
	}
	for _, r := range o.Runs {
		found, err := RunLogs(r.Dir)
		if err != nil {
			return nil, err
		}
		p := gradePart{logs: found, dataset: o.Dataset, taskRepo: o.TaskRepo, predictions: cmp.Or(r.PredictionsFile, o.PredictionsFile)}
		if r.Dataset != "" || r.TaskRepo != "" {
			p.dataset, p.taskRepo = r.Dataset, r.TaskRepo
		}
		parts = append(parts, p)
	}
	n := 0
	for i := range parts {
		if len(o.Inputs.Instances) > 0 {
			parts[i].logs = slices.DeleteFunc(parts[i].logs, func(l GradeLog) bool { return !slices.Contains(o.Inputs.Instances, l.InstanceID) })
		}
		n += len(parts[i].logs)
	}
	switch {
	case n > 0:
		return parts, nil
	case len(o.Inputs.Instances) > 0 && (len(o.Logs) > 0 || o.RunDir != "" || len(o.Runs) > 0):
		return nil, fmt.Errorf("no test log of %s", strings.Join(o.Inputs.Instances, ", "))
	}
	return nil, errors.New("no test log to grade")
}

// records loads a part's input once for every part that names it (the
// records are only looked up: no spec tables needed).
func (o GradeOptions) records(ctx context.Context, p gradePart, loads map[[2]string]*gradeRecords, log io.Writer) (*gradeRecords, error) {
	key := [2]string{p.dataset, p.taskRepo}
	if r, ok := loads[key]; ok {
		return r, nil
	}
	in := o.Inputs
	in.Dataset, in.TaskRepo = p.dataset, p.taskRepo
	in.Instances, in.NotRendered = nil, true
	loaded, problems, err := loadKeepGoing(ctx, in, log)
	if err != nil {
		return nil, err
	}
	r := &gradeRecords{byID: make(map[string]*core.Instance, len(loaded.Instances)), source: loaded.Source, problems: problems}
	for i := range loaded.Instances {
		r.byID[loaded.Instances[i].InstanceID] = &loaded.Instances[i]
	}
	loads[key] = r
	return r, nil
}

// gradeAll grades the jobs, o.Jobs at a time (default one per CPU), the
// results in the jobs' order.
func (o GradeOptions) gradeAll(ctx context.Context, jobs []gradeJob) []GradeResult {
	results := make([]GradeResult, len(jobs))
	n := o.Jobs
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(n, max(len(jobs), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				j := jobs[i]
				results[i] = o.gradeOne(ctx, j.log, j.records.byID, j.preds, j.records.source)
			}
		}()
	}
	for i := range jobs {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return results
}

// RunLogs are the test logs of an upstream run directory
// (logs/run_evaluation/<run_id>): <model>/<instance_id>/test_output.txt,
// sorted by model and id. None is an error naming the layout.
func RunLogs(dir string) ([]GradeLog, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("run directory %s: not a directory", dir)
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*", "*", TestOutputFile))
	if err != nil {
		return nil, fmt.Errorf("run directory %s: %w", dir, err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("run directory %s: no <model>/<instance_id>/%s (upstream's logs/run_evaluation/<run_id> layout)", dir, TestOutputFile)
	}
	sort.Strings(paths)
	out := make([]GradeLog, len(paths))
	for i, p := range paths {
		idDir := filepath.Dir(p)
		out[i] = GradeLog{InstanceID: filepath.Base(idDir), Model: filepath.Base(filepath.Dir(idDir)), Path: p}
	}
	return out, nil
}

// readPredictions reads a predictions file (nil for ""). Unusable entries
// are listed to log and fail the call before anything is graded.
func readPredictions(file string, log io.Writer) (map[string]verify.Prediction, error) {
	if file == "" {
		return nil, nil
	}
	preds, err := verify.ReadPredictions(file)
	if err != nil {
		fmt.Fprintln(log, err)
		return nil, fmt.Errorf("predictions %s: %w", file, err)
	}
	return preds, nil
}

// gradeOne grades one log against its record.
func (o GradeOptions) gradeOne(ctx context.Context, l GradeLog, records map[string]*core.Instance, preds map[string]verify.Prediction, src fmt.Stringer) GradeResult {
	res := GradeResult{GradeLog: l}
	inst := records[l.InstanceID]
	if inst == nil {
		res.Err = fmt.Errorf("%s: instance %s not found among the valid records of %s", l.Path, l.InstanceID, src)
		return res
	}
	patch, skip := o.patch(inst, l, preds)
	if skip != "" {
		res.Skipped = skip
		return res
	}
	var text string
	if patch != nil || o.StatusMap {
		var err error
		if text, err = grading.ReadLog(ctx, l.Path, cmpOr(o.MaxLogSize, grading.MaxLogSize)); err != nil {
			res.Err = err
			return res
		}
		res.StartMarker = strings.Contains(text, grading.StartTestOutput)
	}
	if o.StatusMap {
		er, err := grading.EvalLog(*inst, text, o.Grade)
		if err != nil {
			res.Err = fmt.Errorf("%s: %w", l.Path, err)
			return res
		}
		res.EvalResult = &er
		return res
	}
	rep, err := grading.Grade(*inst, text, patch, o.Grade)
	if err != nil {
		res.Err = fmt.Errorf("%s: %w", l.Path, err)
		return res
	}
	res.Report = &rep
	if o.WriteReports {
		path := filepath.Join(filepath.Dir(l.Path), ReportFile)
		if err := os.WriteFile(path, rep.JSON(), 0o644); err != nil {
			res.Err = fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return res
}

// patch is the log's patch as grading takes it (nil: none), or why the log
// is not graded.
func (o GradeOptions) patch(inst *core.Instance, l GradeLog, preds map[string]verify.Prediction) (*string, string) {
	if preds != nil {
		p, ok := preds[l.InstanceID]
		switch {
		case !ok:
			return nil, "no prediction of " + l.InstanceID
		case l.Model != "" && strings.ReplaceAll(p.Model, "/", "__") != l.Model:
			return nil, fmt.Sprintf("the prediction of %s is model %s's", l.InstanceID, p.Model)
		}
		return p.Patch, ""
	}
	switch o.Patch {
	case PatchNone:
		return nil, ""
	case PatchGiven:
		given := ""
		return &given, ""
	}
	return &inst.Patch, ""
}

func cmpOr(v, def int64) int64 {
	if v > 0 {
		return v
	}
	return def
}
