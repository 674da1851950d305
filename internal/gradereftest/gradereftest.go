// Package gradereftest lays out the reference of upstream v5's grading
// (../shared/swebench-reference/upstream-v5/grading: 369 logs, each with its
// record's labels, its prediction and upstream v5's report) as upstream's
// harness lays out runs, for the tests that grade run directories
// (pipeline.Grade, `swebuild grade --run`).
package gradereftest

import (
	"bytes"
	"encoding/json"
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

// Log is one log of the reference: its parsed/<name>.json (the record's
// labels, the prediction, what upstream v5 made of it) and where the layout
// put it.
type Log struct {
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

	// Path is the log's test_output.txt in the layout (a symbolic link to
	// the shared file), Dir its directory, where report.json is written.
	Path, Dir string
	// Want is upstream's report.json as json.dumps(indent=4) writes it.
	Want []byte
}

// Part is one run directory of the layout: its dataset and logs, in the
// order upstream's run directories list them (model directory, which is
// the log's name, then instance id).
type Part struct {
	Dataset, Dir string
	Logs         []*Log
}

// Layout is the reference as run directories,
// <run>/<model>/<instance_id>/test_output.txt (the model directory named
// for the log, as several logs share an instance). Main holds the logs
// graded against their instance's first label set with a patch; Second the
// 4 instances graded against a second label set (crafted vs the
// multilingual synthetic labels; a dataset holds one record per instance);
// None the 2 logs whose prediction has no patch (model_patch null), with
// NonePredictions saying so.
type Layout struct {
	Main, Second, None Part
	NonePredictions    string
}

// New lays the reference out under a temporary directory of tb (each
// test_output.txt a symbolic link, so it takes milliseconds) and checks the
// reference's own counts (its README: 369 logs, 2 with a null prediction).
func New(tb testing.TB) *Layout {
	tb.Helper()
	shared := spectest.SharedDir(tb)
	src := filepath.Join(shared, "upstream-v5", "grading")
	files, err := filepath.Glob(filepath.Join(src, "parsed", "*.json"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no parsed files under %s: %v", src, err)
	}
	slices.Sort(files) // the names sort as the model directories do
	tmp := tb.TempDir()
	lay := &Layout{}
	for name, p := range map[string]*Part{"main": &lay.Main, "second": &lay.Second, "none": &lay.None} {
		p.Dataset, p.Dir = filepath.Join(tmp, name+".jsonl"), filepath.Join(tmp, "logs", "run_evaluation", name)
	}
	first := map[string]string{} // instance -> its first label set
	records := map[*Part]map[string][]byte{}
	var nonePreds []string
	for _, f := range files {
		r, err := readLog(f)
		if err != nil {
			tb.Fatal(err)
		}
		labels, _ := json.Marshal([]any{r.Repo, r.Version, r.LogParser, r.EvalType, r.FailToPass, r.PassToPass})
		if _, ok := first[r.InstanceID]; !ok {
			first[r.InstanceID] = string(labels)
		}
		part := &lay.Main
		switch {
		case r.Prediction.PatchIsNone:
			part = &lay.None
			nonePreds = append(nonePreds, fmt.Sprintf(`{"instance_id": %q, "model_name_or_path": %q, "model_patch": null}`, r.InstanceID, r.Name))
		case first[r.InstanceID] != string(labels):
			part = &lay.Second
		}
		if records[part] == nil {
			records[part] = map[string][]byte{}
		}
		records[part][r.InstanceID] = record(r)
		if err := place(r, src, shared, part.Dir); err != nil {
			tb.Fatal(err)
		}
		part.Logs = append(part.Logs, r)
	}
	for part, recs := range records {
		var b bytes.Buffer
		for _, id := range slices.Sorted(maps.Keys(recs)) {
			b.Write(append(recs[id], '\n'))
		}
		if err := os.WriteFile(part.Dataset, b.Bytes(), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	lay.NonePredictions = filepath.Join(tmp, "none-predictions.jsonl")
	if err := os.WriteFile(lay.NonePredictions, []byte(strings.Join(nonePreds, "\n")+"\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	if n := len(lay.Main.Logs) + len(lay.Second.Logs) + len(lay.None.Logs); n != 369 || len(lay.None.Logs) != 2 {
		tb.Fatalf("%d logs, %d with a null prediction; want 369 and 2", n, len(lay.None.Logs))
	}
	return lay
}

func readLog(path string) (*Log, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &Log{}
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.Want, err = pyjson.DumpsIndent4(r.Report); err != nil {
		return nil, fmt.Errorf("%s: report: %w", path, err)
	}
	return r, nil
}

// record is the dataset line of r's labels (the fields grading reads; the
// others are what a record must have).
func record(r *Log) []byte {
	version := r.Version
	if version == "" {
		version = "stand-in" // the SWE-smith stand-in records have none; grading never reads it
	}
	rec, _ := json.Marshal(map[string]any{
		"instance_id": r.InstanceID, "repo": r.Repo, "version": version, "base_commit": strings.Repeat("0", 40),
		"patch": "", "test_patch": "diff --git a/t b/t\n", "FAIL_TO_PASS": r.FailToPass, "PASS_TO_PASS": r.PassToPass,
		"log_parser": r.LogParser, "eval_type": r.EvalType,
	})
	return rec
}

// place links r's test output into run directory dir.
func place(r *Log, src, shared, dir string) error {
	target := filepath.Join(src, r.Name, "test_output.txt")
	if r.TestOutput.File == nil { // kept out for size: the same bytes are in eval-logs
		rel, ok := strings.CutPrefix(r.TestOutput.SameBytesAs, "shared/swebench-reference/")
		if !ok {
			return fmt.Errorf("%s: no test output and no same_bytes_as", r.Name)
		}
		target = filepath.Join(shared, rel)
	}
	r.Dir = filepath.Join(dir, r.Name, r.InstanceID)
	r.Path = filepath.Join(r.Dir, "test_output.txt")
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		return err
	}
	return os.Symlink(target, r.Path)
}
