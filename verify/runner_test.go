package verify

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/grading"
)

// patchEngine stands in for BuildKit in unit tests of the runner: the
// labelled test passes when the patch says "fix" (or no patch is applied and
// pass is set).
type patchEngine struct{}

func (patchEngine) Run(ctx context.Context, job Job) (*RunOutput, error) {
	status := "FAILED"
	if strings.Contains(job.Patch, "fix") {
		status = "PASSED"
	}
	return &RunOutput{
		Applied: true, TestRan: true, TestSeconds: 1,
		Attempts:   []ApplyAttempt{{Cmd: gitApplyCmds[0]}},
		TestOutput: grading.StartTestOutput + "\n" + status + " tests/test_a.py::test_fix\n" + grading.EndTestOutput + "\n",
		Leak:       LeakDump{BaseTime: "100", Head: "abc tree1\n", Base: "abc tree1\n"},
	}, nil
}

// TestRunDirsStayInside: model names and instance ids are data. A model
// called "..", ".", "/abs", "a/../../b", "gold" or "control" writes nothing
// outside the run directory, gets a directory of its own, keeps its real
// name in the results, and is graded as a model, never as the gold or
// control run it is named after.
func TestRunDirsStayInside(t *testing.T) {
	models := []string{"..", ".", "/abs", "a/../../b", "gold", "control", "plain-model", "new\nline", ""}
	parent := t.TempDir()
	runDir := filepath.Join(parent, "run")
	var targets []Target
	preds := map[string]Prediction{}
	for i, m := range models {
		id := "o__r-" + string(rune('a'+i))
		if m == "" {
			id = "../escape" // an id the dataset would reject; the runner must not trust it either
			m = "m"
		}
		inst := core.Instance{Repo: "o/r", InstanceID: id, BaseCommit: "abc", Patch: "diff fix\n",
			FailToPass: []string{"tests/test_a.py::test_fix"}}
		targets = append(targets, Target{Instance: inst, Platform: core.AMD64, EvalScript: "#!/bin/bash\n", Parser: "parse_log_pytest"})
		broken := "diff broken\n"
		preds[id] = Prediction{InstanceID: id, Model: m, Patch: &broken}
	}
	r := &Runner{Engine: patchEngine{}, RunDir: runDir, Workers: 2}
	sum, err := r.Verify(context.Background(), targets, true, true, preds)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(sum.Results); n != 3*len(models) {
		t.Fatalf("%d results, want %d", n, 3*len(models))
	}

	// Nothing but the run directory in its parent.
	err = filepath.WalkDir(parent, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != parent && p != runDir && !strings.HasPrefix(p, runDir+string(filepath.Separator)) {
			t.Errorf("written outside the run directory: %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	dirs := map[string]string{}
	for _, res := range sum.Results {
		var m map[string]any
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		who := res.InstanceID + " " + res.Mode
		if res.Mode != ModeGold && res.Mode != ModeControl {
			p := preds[res.InstanceID]
			who = res.InstanceID + " model " + p.Model
			if m["model"] != p.Model {
				t.Errorf("%s: result names the model %v, want %q", who, m["model"], p.Model)
			}
			if !res.OK() {
				t.Errorf("%s: an unresolved prediction is a result, not a failure of verification: %s", who, res.Why())
			}
		}
		rel, err := filepath.Rel(runDir, res.Dir)
		if err != nil || !filepath.IsLocal(rel) {
			t.Errorf("%s: logs in %s, outside %s", who, res.Dir, runDir)
		}
		if other, dup := dirs[res.Dir]; dup {
			t.Errorf("%s and %s share the directory %s", who, other, res.Dir)
		}
		dirs[res.Dir] = who
		for _, f := range []string{"patch.diff", "report.json", "test_output.txt"} {
			if _, err := os.Stat(filepath.Join(res.Dir, f)); err != nil {
				t.Errorf("%s: %v", who, err)
			}
		}
		if res.Mode == ModeGold && !res.OK() {
			t.Errorf("%s: gold not OK: %s", who, res.Why())
		}
	}
	if failed := sum.Failed(); len(failed) != 0 {
		t.Errorf("%d results failed, want none: first %s %s: %s", len(failed), failed[0].InstanceID, failed[0].Mode, failed[0].Why())
	}
}

func TestPathName(t *testing.T) {
	seen := map[string]string{}
	for _, s := range []string{"..", ".", "", "/", "a/b", "a_b", "a:b", "a\x00b", ".hidden", "gold", "x+0123456789ab",
		strings.Repeat("x", 101), strings.Repeat("x", 100), "ünïcode", "a b", `a\b`} {
		got := PathName(s)
		if !filepath.IsLocal(got) || strings.ContainsAny(got, `/\`) || got == "." || got == ".." || strings.HasPrefix(got, ".") || len(got) > 100 {
			t.Errorf("PathName(%q) = %q: not one safe path element", s, got)
		}
		if o, dup := seen[got]; dup {
			t.Errorf("PathName(%q) = PathName(%q) = %q", s, o, got)
		}
		seen[got] = s
	}
	for _, plain := range []string{"gold", "a_b", "sweb.eval.x86_64.django__django-11099", strings.Repeat("x", 100)} {
		if got := PathName(plain); got != plain {
			t.Errorf("PathName(%q) = %q, want it unchanged", plain, got)
		}
	}
}

func TestNewRunDir(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "runs")
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a, err := NewRunDir(parent, now)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewRunDir(parent, now)
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatalf("two runs in the same second share %s", a)
	}
	for _, d := range []string{a, b} {
		st, err := os.Stat(d)
		if err != nil || !st.IsDir() || st.Mode().Perm() != 0o755 || filepath.Dir(d) != parent || !strings.HasPrefix(filepath.Base(d), "verify-20260102-030405-") {
			t.Errorf("%s: %v %v", d, st.Mode(), err)
		}
	}
}

// countingEngine is patchEngine counting the patches it was given.
type countingEngine struct {
	mu      sync.Mutex
	patches []string
}

func (c *countingEngine) Run(ctx context.Context, job Job) (*RunOutput, error) {
	c.mu.Lock()
	c.patches = append(c.patches, job.Patch)
	c.mu.Unlock()
	return patchEngine{}.Run(ctx, job)
}

// TestHarnessChangesRefusedOrReported: a gold patch that adds a conftest.py
// runs and resolves, its result naming the file; the same change in a
// prediction is not run (patch_modifies_test_harness, the file named in the
// result and in verify.json, no report.json, an error in the run report),
// unless harness changes are allowed; a prediction equal to the gold patch
// runs.
func TestHarnessChangesRefusedOrReported(t *testing.T) {
	conftest := "diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n+++ b/conftest.py\n@@ -0,0 +1 @@\n+# fix\n"
	inst := core.Instance{Repo: "o/r", InstanceID: "o__r-1", BaseCommit: "abc", Patch: conftest,
		FailToPass: []string{"tests/test_a.py::test_fix"}}
	target := Target{Instance: inst, Platform: core.AMD64, EvalScript: "#!/bin/bash\n", Parser: "parse_log_pytest"}
	model := conftest + "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\n"
	for _, tc := range []struct {
		name   string
		patch  string
		allow  bool
		runs   int // engine runs: gold, then the prediction if it runs
		failed string
	}{
		{"refused", model, false, 1, FailureHarness},
		{"allowed", model, true, 2, ""},
		{"equal to the gold patch", conftest, false, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &countingEngine{}
			r := &Runner{Engine: e, RunDir: t.TempDir(), AllowHarnessChanges: tc.allow}
			p := tc.patch
			sum, err := r.Verify(context.Background(), []Target{target}, true, false, map[string]Prediction{inst.InstanceID: {InstanceID: inst.InstanceID, Model: "m", Patch: &p}})
			if err != nil {
				t.Fatal(err)
			}
			if len(e.patches) != tc.runs {
				t.Errorf("%d runs, want %d", len(e.patches), tc.runs)
			}
			var gold, pred Result
			for _, res := range sum.Results {
				if res.Mode == ModeGold {
					gold = res
				} else {
					pred = res
				}
			}
			if !gold.Resolved || !gold.OK() || len(gold.Harness) != 1 || gold.Harness[0].Path != "conftest.py" {
				t.Errorf("gold: resolved %v, ok %v, harness %+v: want resolved, conftest.py reported", gold.Resolved, gold.OK(), gold.Harness)
			}
			if pred.Failure != tc.failed || len(pred.Harness) != 1 || pred.Harness[0].Path != "conftest.py" || !pred.OK() {
				t.Errorf("prediction: failure %q (%s), harness %+v, ok %v; want failure %q, conftest.py named", pred.Failure, pred.Error, pred.Harness, pred.OK(), tc.failed)
			}
			rec, err := os.ReadFile(filepath.Join(pred.Dir, "verify.json"))
			if err != nil || !strings.Contains(string(rec), `"harness_files": [`) || !strings.Contains(string(rec), `"path": "conftest.py"`) {
				t.Errorf("verify.json: %v\n%s", err, rec)
			}
			_, err = os.Stat(filepath.Join(pred.Dir, "report.json"))
			rep := MakeRunReport([]string{inst.InstanceID}, map[string]Prediction{inst.InstanceID: {InstanceID: inst.InstanceID, Model: "m", Patch: &p}}, sum.Results, core.AMD64)
			if tc.failed != "" {
				if pred.Resolved || !os.IsNotExist(err) || len(rep.ErrorIDs) != 1 || rep.ResolvedInstances != 0 {
					t.Errorf("refused: resolved %v, report.json %v, run report errors %v resolved %d", pred.Resolved, err, rep.ErrorIDs, rep.ResolvedInstances)
				}
			} else if !pred.Resolved || err != nil || rep.ResolvedInstances != 1 {
				t.Errorf("ran: resolved %v, report.json %v, run report resolved %d", pred.Resolved, err, rep.ResolvedInstances)
			}
		})
	}
}
