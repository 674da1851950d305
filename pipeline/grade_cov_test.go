package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/internal/gradereftest"
)

// checkReports compares each result, in order, with the reference's log
// and upstream v5's report.json; written says the reports were written
// beside the logs and must be upstream's bytes too.
func checkReports(t *testing.T, results []GradeResult, want []*gradereftest.Log, written bool) {
	t.Helper()
	if len(results) != len(want) {
		t.Fatalf("%d results, want %d", len(results), len(want))
	}
	same := 0
	for i, res := range results {
		w := want[i]
		switch {
		case res.Path != w.Path || res.InstanceID != w.InstanceID || res.Model != w.Name:
			t.Errorf("result %d is %s (%s, model %s), want %s (%s, model %s)", i, res.Path, res.InstanceID, res.Model, w.Path, w.InstanceID, w.Name)
			continue
		case res.Err != nil || res.Skipped != "" || res.Report == nil:
			t.Errorf("%s: err %v, skipped %q, report %v", w.Name, res.Err, res.Skipped, res.Report)
			continue
		}
		if got := res.Report.JSON(); !bytes.Equal(got, w.Want) {
			t.Errorf("%s: report differs from upstream v5's:\n got %s\nwant %s", w.Name, got, w.Want)
			continue
		}
		if w.V5.MarkersPresent && !patchIsNoneReport(w) && !res.StartMarker {
			t.Errorf("%s: upstream found the markers; StartMarker false", w.Name)
		}
		if written {
			got, err := os.ReadFile(filepath.Join(w.Dir, ReportFile))
			if err != nil || !bytes.Equal(got, w.Want) {
				t.Errorf("%s: report.json written: %v\n got %s\nwant %s", w.Name, err, got, w.Want)
				continue
			}
		}
		same++
	}
	t.Logf("%d of %d reports equal to upstream v5's", same, len(want))
}

// patchIsNoneReport: upstream's report says patch_is_None (the log was
// not read).
func patchIsNoneReport(r *gradereftest.Log) bool {
	return bytes.Contains(r.Report, []byte(`"patch_is_None": true`))
}

// TestGradeReferenceRuns grades the 369 logs of upstream-v5/grading in one
// Grade call, as three upstream runs (RunDir against the options' dataset,
// then two Runs each with its own dataset, the last with a predictions
// file of null patches): every report, and every report.json written
// beside its log, is upstream v5's byte for byte, and the results come in
// the order of the logs (the run directory's, sorted, then each run's).
func TestGradeReferenceRuns(t *testing.T) {
	lay := gradereftest.New(t)
	var log bytes.Buffer
	results, err := Grade(context.Background(), GradeOptions{
		Inputs: Inputs{Dataset: lay.Main.Dataset, CacheDir: t.TempDir(), Offline: true},
		RunDir: lay.Main.Dir,
		Runs: []GradeRun{
			{Dir: lay.Second.Dir, Dataset: lay.Second.Dataset},
			{Dir: lay.None.Dir, Dataset: lay.None.Dataset, PredictionsFile: lay.NonePredictions},
		},
		WriteReports: true,
		Jobs:         2,
		Log:          &log,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	want := slices.Concat(lay.Main.Logs, lay.Second.Logs, lay.None.Logs)
	checkReports(t, results, want, true)
}

// TestGradePatchChoices: without predictions, what was evaluated is
// Patch's: the gold patch (default) and a given patch are both "a patch
// exists" to upstream, so the main run's reports are upstream's; PatchNone
// gives upstream's patch_is_None reports of the two null predictions, the
// logs not read.
func TestGradePatchChoices(t *testing.T) {
	lay := gradereftest.New(t)
	ctx := context.Background()
	for _, patch := range []string{"", PatchGold, PatchGiven} {
		t.Run("patch="+patch, func(t *testing.T) {
			results, err := Grade(ctx, GradeOptions{
				Inputs: Inputs{Dataset: lay.Second.Dataset, CacheDir: t.TempDir(), Offline: true},
				RunDir: lay.Second.Dir, Patch: patch,
			})
			if err != nil {
				t.Fatal(err)
			}
			checkReports(t, results, lay.Second.Logs, false)
		})
	}
	results, err := Grade(ctx, GradeOptions{
		Inputs: Inputs{Dataset: lay.None.Dataset, CacheDir: t.TempDir(), Offline: true},
		RunDir: lay.None.Dir, Patch: PatchNone,
	})
	if err != nil {
		t.Fatal(err)
	}
	checkReports(t, results, lay.None.Logs, false)
	for _, r := range results {
		if r.StartMarker {
			t.Errorf("%s: StartMarker set for a log that is not read (no patch)", r.Path)
		}
	}
}

// TestGradeStatusMap: with StatusMap the logs are parsed, not graded: each
// status map and "found" is upstream v5's get_logs_eval of the log.
func TestGradeStatusMap(t *testing.T) {
	lay := gradereftest.New(t)
	results, err := Grade(context.Background(), GradeOptions{
		Inputs:    Inputs{Dataset: lay.Main.Dataset, CacheDir: t.TempDir(), Offline: true},
		RunDir:    lay.Main.Dir,
		StatusMap: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(lay.Main.Logs) {
		t.Fatalf("%d results, want %d", len(results), len(lay.Main.Logs))
	}
	same := 0
	for i, res := range results {
		w := lay.Main.Logs[i]
		if res.Err != nil || res.EvalResult == nil || res.Report != nil {
			t.Errorf("%s: err %v, eval result %v, report %v; want only the parse", w.Name, res.Err, res.EvalResult, res.Report)
			continue
		}
		got := map[string]string{}
		if res.EvalResult.StatusMap != nil {
			got = res.EvalResult.StatusMap.Map()
		}
		if res.EvalResult.Applied != w.Found || !maps.Equal(got, w.StatusMap) { // maps.Equal: nil and empty alike
			t.Errorf("%s: found %v, %d statuses; upstream v5: found %v, %d statuses", w.Name, res.EvalResult.Applied, len(got), w.Found, len(w.StatusMap))
			continue
		}
		same++
	}
	t.Logf("%d of %d status maps equal to upstream v5's", same, len(results))
}

// TestGradePredictions: with a predictions file, upstream grades only the
// logs of predictions of their model: a log of another model's prediction
// and a log with no prediction are skipped, each saying why; Instances
// keeps to the logs of those ids.
func TestGradePredictions(t *testing.T) {
	lay := gradereftest.New(t)
	// An instance with two logs in the main run (two model directories).
	byID := map[string][]*gradereftest.Log{}
	for _, l := range lay.Main.Logs {
		byID[l.InstanceID] = append(byID[l.InstanceID], l)
	}
	var two, one *gradereftest.Log
	var twoOther *gradereftest.Log
	for _, l := range lay.Main.Logs {
		switch n := len(byID[l.InstanceID]); {
		case n == 2 && two == nil:
			two, twoOther = byID[l.InstanceID][0], byID[l.InstanceID][1]
		case n == 1 && one == nil:
			one = l
		}
	}
	if two == nil || one == nil {
		t.Fatal("the reference has no instance with two logs and one with one")
	}
	// The prediction of two is its first log's model; one has none. The
	// patch text is never read (upstream: "a patch exists").
	preds := filepath.Join(t.TempDir(), "preds.jsonl")
	line := fmt.Sprintf(`{"instance_id": %q, "model_name_or_path": %q, "model_patch": "diff --git a/x b/x\n"}`+"\n", two.InstanceID, two.Name)
	if err := os.WriteFile(preds, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	results, err := Grade(context.Background(), GradeOptions{
		Inputs:          Inputs{Dataset: lay.Main.Dataset, CacheDir: t.TempDir(), Offline: true, Instances: []string{two.InstanceID, one.InstanceID}},
		RunDir:          lay.Main.Dir,
		PredictionsFile: preds,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ // log -> why skipped ("" graded)
		two.Path:      "",
		twoOther.Path: fmt.Sprintf("the prediction of %s is model %s's", two.InstanceID, two.Name),
		one.Path:      "no prediction of " + one.InstanceID,
	}
	if len(results) != len(want) {
		t.Fatalf("%d results, want %d (the logs of %s and %s)", len(results), len(want), two.InstanceID, one.InstanceID)
	}
	for _, r := range results {
		skip, ok := want[r.Path]
		switch {
		case !ok:
			t.Errorf("%s graded: not a log of the instances asked", r.Path)
		case r.Skipped != skip:
			t.Errorf("%s: skipped %q, want %q", r.Path, r.Skipped, skip)
		case skip == "" && (r.Report == nil || !bytes.Equal(r.Report.JSON(), two.Want)):
			t.Errorf("%s: report %v, want upstream's %s", r.Path, r.Report, two.Want)
		case skip != "" && (r.Report != nil || r.Err != nil):
			t.Errorf("%s: skipped yet report %v, err %v", r.Path, r.Report, r.Err)
		}
	}
}

// TestGradeErrors: what stops a call names the run directory, the
// instances asked or the predictions file; a log that cannot be graded is
// named with its path and why, and the others are graded.
func TestGradeErrors(t *testing.T) {
	lay := gradereftest.New(t)
	ctx := context.Background()
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	empty := filepath.Join(tmp, "empty")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	in := Inputs{Dataset: lay.None.Dataset, CacheDir: t.TempDir(), Offline: true}
	for _, tc := range []struct {
		name string
		o    GradeOptions
		want string
	}{
		{"no run directory", GradeOptions{Inputs: in, RunDir: filepath.Join(tmp, "absent")}, "run directory: "},
		{"run directory a file", GradeOptions{Inputs: in, RunDir: file}, "run directory " + file + ": not a directory"},
		{"empty run directory", GradeOptions{Inputs: in, RunDir: empty}, "run directory " + empty + ": no <model>/<instance_id>/test_output.txt"},
		{"empty run of Runs", GradeOptions{Inputs: in, Runs: []GradeRun{{Dir: empty}}}, "run directory " + empty + ": no <model>/<instance_id>/test_output.txt"},
		{"nothing to grade", GradeOptions{Inputs: in}, "no test log to grade"},
		{"no log of the instances", GradeOptions{Inputs: Inputs{Dataset: in.Dataset, CacheDir: in.CacheDir, Instances: []string{"a__b-1", "c__d-2"}}, RunDir: lay.None.Dir}, "no test log of a__b-1, c__d-2"},
		{"predictions absent", GradeOptions{Inputs: in, RunDir: lay.None.Dir, PredictionsFile: filepath.Join(tmp, "preds.jsonl")}, "predictions " + filepath.Join(tmp, "preds.jsonl")},
		{"dataset absent", GradeOptions{Inputs: Inputs{Dataset: filepath.Join(tmp, "d.jsonl"), CacheDir: in.CacheDir}, RunDir: lay.None.Dir}, filepath.Join(tmp, "d.jsonl")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Grade(ctx, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) || res != nil {
				t.Errorf("err %v, %d results; want an error saying %q and no results", err, len(res), tc.want)
			}
		})
	}

	// Logs given by path: the instance id is the directory's name. One of
	// an instance the dataset lacks, one that cannot be read, one too
	// large: each is named, the good one graded.
	good := lay.None.Logs[0]
	stray := filepath.Join(tmp, "run", "m", "nobody__none-1", TestOutputFile)
	gone := filepath.Join(tmp, "run", "m", good.InstanceID, TestOutputFile)
	if err := os.MkdirAll(filepath.Dir(stray), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stray, []byte("log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(gone), 0o755); err != nil {
		t.Fatal(err)
	}
	results, err := Grade(ctx, GradeOptions{
		Inputs: in, Patch: PatchGiven, Jobs: 1,
		Logs: []GradeLog{{Path: good.Path}, {Path: stray}, {Path: gone}},
	})
	if err == nil {
		t.Fatal("no error for two logs that cannot be graded")
	}
	for _, want := range []string{
		stray + ": instance nobody__none-1 not found among the valid records of " + lay.None.Dataset,
		gone, "2 of 3 log(s) could not be graded",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if len(results) != 3 || results[0].Err != nil || results[0].Report == nil || results[0].InstanceID != good.InstanceID ||
		results[1].Err == nil || results[2].Err == nil || !errors.Is(results[2].Err, os.ErrNotExist) {
		t.Fatalf("results %+v", results)
	}

	// A log larger than MaxLogSize is not read.
	results, err = Grade(ctx, GradeOptions{Inputs: in, Patch: PatchGiven, MaxLogSize: 10, Logs: []GradeLog{{Path: good.Path}}})
	if err == nil || len(results) != 1 || results[0].Err == nil || results[0].Report != nil {
		t.Errorf("a log over MaxLogSize 10: err %v, results %+v", err, results)
	}

	// A report.json that cannot be written is the log's error.
	ro := filepath.Join(tmp, "ro", "m", good.InstanceID)
	if err := os.MkdirAll(filepath.Join(ro, ReportFile), 0o755); err != nil { // a directory where the report goes
		t.Fatal(err)
	}
	if err := os.Symlink(good.Path, filepath.Join(ro, TestOutputFile)); err != nil {
		t.Fatal(err)
	}
	results, err = Grade(ctx, GradeOptions{Inputs: in, Patch: PatchGiven, WriteReports: true, Logs: []GradeLog{{Path: filepath.Join(ro, TestOutputFile)}}})
	if err == nil || !strings.Contains(err.Error(), "writing "+filepath.Join(ro, ReportFile)) {
		t.Errorf("report.json unwritable: %v", err)
	}

	// Invalid records are the input's problem: said, and the valid
	// records' logs graded.
	bad := filepath.Join(tmp, "bad.jsonl")
	data, err := os.ReadFile(lay.None.Dataset)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, append(data, []byte(`{"instance_id": "broken__record-1"}`+"\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	results, err = Grade(ctx, GradeOptions{Inputs: Inputs{Dataset: bad, CacheDir: in.CacheDir}, RunDir: lay.None.Dir, Patch: PatchNone, Log: &log})
	if err == nil || !strings.Contains(err.Error(), "1 invalid record(s)") || !strings.Contains(log.String(), bad+":3: field \"repo\": missing required field") {
		t.Errorf("dataset with a bad record: err %v, log %q", err, log.String())
	}
	checkReports(t, results, lay.None.Logs, false)

	// A cancelled call says so.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Grade(cctx, GradeOptions{Inputs: in, RunDir: lay.None.Dir}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
