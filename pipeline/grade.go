package pipeline

import (
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
// an upstream run directory, RunDir) graded against the records of the
// input, in one process, as upstream's harness grades a run.
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
// be graded and the input's problems; the results (in the order of the
// logs: given, then the run directory's sorted) say what each came to.
func Grade(ctx context.Context, o GradeOptions) ([]GradeResult, error) {
	log := writerOr(o.Log)
	logs, err := o.logs()
	if err != nil {
		return nil, err
	}
	in := o.Inputs
	in.Instances, in.NotRendered = nil, true
	loaded, problems, err := loadKeepGoing(ctx, in, log)
	if err != nil {
		return nil, err
	}
	preds, err := o.predictions(log)
	if err != nil {
		return nil, errors.Join(append(problems, err)...)
	}
	records := make(map[string]*core.Instance, len(loaded.Instances))
	for i := range loaded.Instances {
		records[loaded.Instances[i].InstanceID] = &loaded.Instances[i]
	}
	results := make([]GradeResult, len(logs))
	jobs := o.Jobs
	if jobs <= 0 {
		jobs = runtime.GOMAXPROCS(0)
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(jobs, max(len(logs), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = o.gradeOne(ctx, logs[i], records, preds, loaded.Source)
			}
		}()
	}
	for i := range logs {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
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
	if failed > 0 && len(logs) > 1 {
		problems = append(problems, fmt.Errorf("%d of %d log(s) could not be graded", failed, len(logs)))
	}
	return results, errors.Join(problems...)
}

// logs are the logs to grade: those given, then the run directory's, kept
// to Inputs.Instances when it is set.
func (o GradeOptions) logs() ([]GradeLog, error) {
	logs := slices.Clone(o.Logs)
	for i := range logs {
		if logs[i].InstanceID == "" {
			logs[i].InstanceID = filepath.Base(filepath.Dir(logs[i].Path))
		}
	}
	if o.RunDir != "" {
		found, err := RunLogs(o.RunDir)
		if err != nil {
			return nil, err
		}
		logs = append(logs, found...)
	}
	if len(logs) == 0 {
		return nil, errors.New("no test log to grade")
	}
	if len(o.Inputs.Instances) > 0 {
		kept := logs[:0]
		for _, l := range logs {
			if slices.Contains(o.Inputs.Instances, l.InstanceID) {
				kept = append(kept, l)
			}
		}
		if len(kept) == 0 {
			return nil, fmt.Errorf("no test log of %s", strings.Join(o.Inputs.Instances, ", "))
		}
		logs = kept
	}
	return logs, nil
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

// predictions reads PredictionsFile (nil without one). Unusable entries
// are listed to log and fail the run before anything is graded.
func (o GradeOptions) predictions(log io.Writer) (map[string]verify.Prediction, error) {
	if o.PredictionsFile == "" {
		return nil, nil
	}
	preds, err := verify.ReadPredictions(o.PredictionsFile)
	if err != nil {
		fmt.Fprintln(log, err)
		return nil, fmt.Errorf("predictions %s: %w", o.PredictionsFile, err)
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
