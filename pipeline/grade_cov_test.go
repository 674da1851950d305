package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/internal/pyjson"
)

// refLog is one log of upstream-v5/grading: its record's labels, the
// prediction, and what upstream v5 made of it (parsed/<name>.json).
type refLog struct {
	Name       string   `json:"name"`
	InstanceID string   `json:"instance_id"`
	Repo       string   `json:"repo"`
	Version    string   `json:"version"`
	LogParser  string   `json:"log_parser"`
	EvalType   string   `json:"eval_type"`
	FailToPass []string `json:"FAIL_TO_PASS"`
	PassToPass []string `json:"PASS_TO_PASS"`
	Prediction struct {
		PatchIsNone bool `json:"model_patch_is_None"`
	} `json:"prediction"`
	TestOutput struct {
		File        *string `json:"file"`
		SameBytesAs string  `json:"same_bytes_as"`
	} `json:"test_output"`
	StatusMap map[string]string `json:"status_map"`
	Found     bool              `json:"found"`
	Report    json.RawMessage   `json:"report"`
	V5        struct {
		MarkersPresent bool `json:"markers_present"`
	} `json:"v5"`

	// Where the layout put it.
	log, dir string
	// want is upstream's report.json as json.dumps(indent=4) writes it.
	want []byte
}

// refPart is one upstream run directory of the reference: its dataset and
// logs (in the order RunLogs gives them: by model directory, which is the
// log's name, then instance id).
type refPart struct {
	dataset, dir string
	logs         []*refLog
}

// refLayout is upstream-v5/grading laid out as upstream's harness lays
// runs out, <run>/<model>/<instance_id>/test_output.txt (the model
// directory named for the log, as several logs share an instance): main,
// the logs graded against their instance's first label set with a patch;
// second, the 4 instances graded against a second label set (a dataset
// holds one record per instance); none, the 2 logs whose prediction has
// no patch (model_patch null).
type refLayout struct {
	main, second, none refPart
	// nonePredictions says model_patch null for each log of none.
	nonePredictions string
}

// gradeReference lays the reference out under a temporary directory, each
// test_output.txt a symbolic link to the shared file.
func gradeReference(t *testing.T) *refLayout {
	t.Helper()
	shared := spectest.SharedDir(t)
	src := filepath.Join(shared, "upstream-v5", "grading")
	files, err := filepath.Glob(filepath.Join(src, "parsed", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no parsed files under %s: %v", src, err)
	}
	slices.Sort(files) // the names sort as the model directories do
	tmp := t.TempDir()
	lay := &refLayout{}
	for name, p := range map[string]*refPart{"main": &lay.main, "second": &lay.second, "none": &lay.none} {
		p.dataset, p.dir = filepath.Join(tmp, name+".jsonl"), filepath.Join(tmp, "logs", "run_evaluation", name)
	}
	first := map[string]string{}
	records := map[*refPart]map[string][]byte{}
	var nonePreds []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := &refLog{}
		if err := json.Unmarshal(b, r); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		labels, _ := json.Marshal([]any{r.Repo, r.Version, r.LogParser, r.EvalType, r.FailToPass, r.PassToPass})
		if _, ok := first[r.InstanceID]; !ok {
			first[r.InstanceID] = string(labels)
		}
		part := &lay.main
		switch {
		case r.Prediction.PatchIsNone:
			part = &lay.none
			nonePreds = append(nonePreds, fmt.Sprintf(`{"instance_id": %q, "model_name_or_path": %q, "model_patch": null}`, r.InstanceID, r.Name))
		case first[r.InstanceID] != string(labels):
			part = &lay.second
		}
		version := r.Version
		if version == "" {
			version = "stand-in" // the SWE-smith stand-in records have none; grading never reads it
		}
		rec, _ := json.Marshal(map[string]any{
			"instance_id": r.InstanceID, "repo": r.Repo, "version": version, "base_commit": strings.Repeat("0", 40),
			"patch": "", "test_patch": "diff --git a/t b/t\n", "FAIL_TO_PASS": r.FailToPass, "PASS_TO_PASS": r.PassToPass,
			"log_parser": r.LogParser, "eval_type": r.EvalType,
		})
		if records[part] == nil {
			records[part] = map[string][]byte{}
		}
		records[part][r.InstanceID] = rec
		target := filepath.Join(src, r.Name, TestOutputFile)
		if r.TestOutput.File == nil { // kept out for size: the same bytes are in eval-logs
			rel, ok := strings.CutPrefix(r.TestOutput.SameBytesAs, "shared/swebench-reference/")
			if !ok {
				t.Fatalf("%s: no test output and no same_bytes_as", r.Name)
			}
			target = filepath.Join(shared, rel)
		}
		r.dir = filepath.Join(part.dir, r.Name, r.InstanceID)
		r.log = filepath.Join(r.dir, TestOutputFile)
		if err := os.MkdirAll(r.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, r.log); err != nil {
			t.Fatal(err)
		}
		if r.want, err = pyjson.DumpsIndent4(r.Report); err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		part.logs = append(part.logs, r)
	}
	for part, recs := range records {
		var b bytes.Buffer
		for _, id := range slices.Sorted(maps.Keys(recs)) {
			b.Write(append(recs[id], '\n'))
		}
		if err := os.WriteFile(part.dataset, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lay.nonePredictions = filepath.Join(tmp, "none-predictions.jsonl")
	if err := os.WriteFile(lay.nonePredictions, []byte(strings.Join(nonePreds, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The reference's own counts (its README: 369 logs; 2 with a null
	// prediction).
	if n := len(lay.main.logs) + len(lay.second.logs) + len(lay.none.logs); n != 369 || len(lay.none.logs) != 2 {
		t.Fatalf("%d logs, %d with a null prediction; want 369 and 2", n, len(lay.none.logs))
	}
	return lay
}

// checkReports compares each result, in order, with the reference's log
// and upstream v5's report.json; written says the reports were written
// beside the logs and must be upstream's bytes too.
func checkReports(t *testing.T, results []GradeResult, want []*refLog, written bool) {
	t.Helper()
	if len(results) != len(want) {
		t.Fatalf("%d results, want %d", len(results), len(want))
	}
	same := 0
	for i, res := range results {
		w := want[i]
		switch {
		case res.Path != w.log || res.InstanceID != w.InstanceID || res.Model != w.Name:
			t.Errorf("result %d is %s (%s, model %s), want %s (%s, model %s)", i, res.Path, res.InstanceID, res.Model, w.log, w.InstanceID, w.Name)
			continue
		case res.Err != nil || res.Skipped != "" || res.Report == nil:
			t.Errorf("%s: err %v, skipped %q, report %v", w.Name, res.Err, res.Skipped, res.Report)
			continue
		}
		if got := res.Report.JSON(); !bytes.Equal(got, w.want) {
			t.Errorf("%s: report differs from upstream v5's:\n got %s\nwant %s", w.Name, got, w.want)
			continue
		}
		if w.V5.MarkersPresent && !w.patchIsNoneReport() && !res.StartMarker {
			t.Errorf("%s: upstream found the markers; StartMarker false", w.Name)
		}
		if written {
			got, err := os.ReadFile(filepath.Join(w.dir, ReportFile))
			if err != nil || !bytes.Equal(got, w.want) {
				t.Errorf("%s: report.json written: %v\n got %s\nwant %s", w.Name, err, got, w.want)
				continue
			}
		}
		same++
	}
	t.Logf("%d of %d reports equal to upstream v5's", same, len(want))
}

// patchIsNoneReport: upstream's report says patch_is_None (the log was
// not read).
func (r *refLog) patchIsNoneReport() bool {
	return bytes.Contains(r.Report, []byte(`"patch_is_None": true`))
}

// TestGradeReferenceRuns grades the 369 logs of upstream-v5/grading in one
// Grade call, as three upstream runs (RunDir against the options' dataset,
// then two Runs each with its own dataset, the last with a predictions
// file of null patches): every report, and every report.json written
// beside its log, is upstream v5's byte for byte, and the results come in
// the order of the logs (the run directory's, sorted, then each run's).
func TestGradeReferenceRuns(t *testing.T) {
	lay := gradeReference(t)
	var log bytes.Buffer
	results, err := Grade(context.Background(), GradeOptions{
		Inputs: Inputs{Dataset: lay.main.dataset, CacheDir: t.TempDir(), Offline: true},
		RunDir: lay.main.dir,
		Runs: []GradeRun{
			{Dir: lay.second.dir, Dataset: lay.second.dataset},
			{Dir: lay.none.dir, Dataset: lay.none.dataset, PredictionsFile: lay.nonePredictions},
		},
		WriteReports: true,
		Jobs:         2,
		Log:          &log,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	want := slices.Concat(lay.main.logs, lay.second.logs, lay.none.logs)
	checkReports(t, results, want, true)
}

// TestGradePatchChoices: without predictions, what was evaluated is
// Patch's: the gold patch (default) and a given patch are both "a patch
// exists" to upstream, so the main run's reports are upstream's; PatchNone
// gives upstream's patch_is_None reports of the two null predictions, the
// logs not read.
func TestGradePatchChoices(t *testing.T) {
	lay := gradeReference(t)
	ctx := context.Background()
	for _, patch := range []string{"", PatchGold, PatchGiven} {
		t.Run("patch="+patch, func(t *testing.T) {
			results, err := Grade(ctx, GradeOptions{
				Inputs: Inputs{Dataset: lay.second.dataset, CacheDir: t.TempDir(), Offline: true},
				RunDir: lay.second.dir, Patch: patch,
			})
			if err != nil {
				t.Fatal(err)
			}
			checkReports(t, results, lay.second.logs, false)
		})
	}
	results, err := Grade(ctx, GradeOptions{
		Inputs: Inputs{Dataset: lay.none.dataset, CacheDir: t.TempDir(), Offline: true},
		RunDir: lay.none.dir, Patch: PatchNone,
	})
	if err != nil {
		t.Fatal(err)
	}
	checkReports(t, results, lay.none.logs, false)
	for _, r := range results {
		if r.StartMarker {
			t.Errorf("%s: StartMarker set for a log that is not read (no patch)", r.Path)
		}
	}
}

// TestGradeStatusMap: with StatusMap the logs are parsed, not graded: each
// status map and "found" is upstream v5's get_logs_eval of the log.
func TestGradeStatusMap(t *testing.T) {
	lay := gradeReference(t)
	results, err := Grade(context.Background(), GradeOptions{
		Inputs:    Inputs{Dataset: lay.main.dataset, CacheDir: t.TempDir(), Offline: true},
		RunDir:    lay.main.dir,
		StatusMap: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(lay.main.logs) {
		t.Fatalf("%d results, want %d", len(results), len(lay.main.logs))
	}
	same := 0
	for i, res := range results {
		w := lay.main.logs[i]
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
	lay := gradeReference(t)
	// An instance with two logs in the main run (two model directories).
	byID := map[string][]*refLog{}
	for _, l := range lay.main.logs {
		byID[l.InstanceID] = append(byID[l.InstanceID], l)
	}
	var two, one *refLog
	var twoOther *refLog
	for _, l := range lay.main.logs {
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
		Inputs:          Inputs{Dataset: lay.main.dataset, CacheDir: t.TempDir(), Offline: true, Instances: []string{two.InstanceID, one.InstanceID}},
		RunDir:          lay.main.dir,
		PredictionsFile: preds,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ // log -> why skipped ("" graded)
		two.log:      "",
		twoOther.log: fmt.Sprintf("the prediction of %s is model %s's", two.InstanceID, two.Name),
		one.log:      "no prediction of " + one.InstanceID,
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
		case skip == "" && (r.Report == nil || !bytes.Equal(r.Report.JSON(), two.want)):
			t.Errorf("%s: report %v, want upstream's %s", r.Path, r.Report, two.want)
		case skip != "" && (r.Report != nil || r.Err != nil):
			t.Errorf("%s: skipped yet report %v, err %v", r.Path, r.Report, r.Err)
		}
	}
}

// TestGradeErrors: what stops a call names the run directory, the
// instances asked or the predictions file; a log that cannot be graded is
// named with its path and why, and the others are graded.
func TestGradeErrors(t *testing.T) {
	lay := gradeReference(t)
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
	in := Inputs{Dataset: lay.none.dataset, CacheDir: t.TempDir(), Offline: true}
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
		{"no log of the instances", GradeOptions{Inputs: Inputs{Dataset: in.Dataset, CacheDir: in.CacheDir, Instances: []string{"a__b-1", "c__d-2"}}, RunDir: lay.none.dir}, "no test log of a__b-1, c__d-2"},
		{"predictions absent", GradeOptions{Inputs: in, RunDir: lay.none.dir, PredictionsFile: filepath.Join(tmp, "preds.jsonl")}, "predictions " + filepath.Join(tmp, "preds.jsonl")},
		{"dataset absent", GradeOptions{Inputs: Inputs{Dataset: filepath.Join(tmp, "d.jsonl"), CacheDir: in.CacheDir}, RunDir: lay.none.dir}, filepath.Join(tmp, "d.jsonl")},
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
	good := lay.none.logs[0]
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
		Logs: []GradeLog{{Path: good.log}, {Path: stray}, {Path: gone}},
	})
	if err == nil {
		t.Fatal("no error for two logs that cannot be graded")
	}
	for _, want := range []string{
		stray + ": instance nobody__none-1 not found among the valid records of " + lay.none.dataset,
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
	results, err = Grade(ctx, GradeOptions{Inputs: in, Patch: PatchGiven, MaxLogSize: 10, Logs: []GradeLog{{Path: good.log}}})
	if err == nil || len(results) != 1 || results[0].Err == nil || results[0].Report != nil {
		t.Errorf("a log over MaxLogSize 10: err %v, results %+v", err, results)
	}

	// A report.json that cannot be written is the log's error.
	ro := filepath.Join(tmp, "ro", "m", good.InstanceID)
	if err := os.MkdirAll(filepath.Join(ro, ReportFile), 0o755); err != nil { // a directory where the report goes
		t.Fatal(err)
	}
	if err := os.Symlink(good.log, filepath.Join(ro, TestOutputFile)); err != nil {
		t.Fatal(err)
	}
	results, err = Grade(ctx, GradeOptions{Inputs: in, Patch: PatchGiven, WriteReports: true, Logs: []GradeLog{{Path: filepath.Join(ro, TestOutputFile)}}})
	if err == nil || !strings.Contains(err.Error(), "writing "+filepath.Join(ro, ReportFile)) {
		t.Errorf("report.json unwritable: %v", err)
	}

	// Invalid records are the input's problem: said, and the valid
	// records' logs graded.
	bad := filepath.Join(tmp, "bad.jsonl")
	data, err := os.ReadFile(lay.none.dataset)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, append(data, []byte(`{"instance_id": "broken__record-1"}`+"\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	results, err = Grade(ctx, GradeOptions{Inputs: Inputs{Dataset: bad, CacheDir: in.CacheDir}, RunDir: lay.none.dir, Patch: PatchNone, Log: &log})
	if err == nil || !strings.Contains(err.Error(), "1 invalid record(s)") || !strings.Contains(log.String(), bad+":3: field \"repo\": missing required field") {
		t.Errorf("dataset with a bad record: err %v, log %q", err, log.String())
	}
	checkReports(t, results, lay.none.logs, false)

	// A cancelled call says so.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Grade(cctx, GradeOptions{Inputs: in, RunDir: lay.none.dir}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
