package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/dataset"
	"github.com/swebuild/swebuild/grading"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/verify"
)

// newFilePatch is a git diff adding path with content.
func newFilePatch(path, content string) string {
	lines := strings.SplitAfter(strings.TrimSuffix(content, "\n"), "\n")
	var b strings.Builder
	fmt.Fprintf(&b, "diff --git a/%s b/%s\nnew file mode 100644\n--- /dev/null\n+++ b/%s\n@@ -0,0 +1,%d @@\n", path, path, path, len(lines))
	for _, l := range lines {
		b.WriteString("+" + strings.TrimSuffix(l, "\n") + "\n")
	}
	return b.String()
}

// rewriterConftest (issue 20 row 3): when pytest ends, a double-forked,
// detached process keeps rewriting every recorded test output it can find
// under ROOT (FAILED -> PASSED, failed -> passed) and every exit-status file
// (to 0), for a minute: after eval.sh has ended too. ROOT is
// /swebuild-verify/out (the output directory, where the wrapper wrote the
// test output and exit status while the tests ran until this change) or
// /swebuild-verify (the capture directory too).
func rewriterConftest(root string) string {
	return strings.ReplaceAll(rewriterTemplate, "ROOT", root)
}

const rewriterTemplate = `import glob
import os
import time


def pytest_unconfigure(config):
    if os.fork() != 0:
        return
    os.setsid()
    if os.fork() != 0:
        os._exit(0)
    deadline = time.time() + 60
    while time.time() < deadline:
        for p in glob.glob("ROOT/**/test_output*", recursive=True):
            try:
                with open(p, "r+") as f:
                    s = f.read()
                    t = s.replace("FAILED", "PASSED").replace("failed", "passed")
                    if t != s:
                        f.seek(0)
                        f.write(t)
                        f.truncate()
            except OSError:
                pass
        for p in glob.glob("ROOT/**/test_rc", recursive=True):
            try:
                with open(p, "w") as f:
                    f.write("0\n")
            except OSError:
                pass
        time.sleep(0.005)
    os._exit(0)
`

// printerConftest is upstream's crafted case
// exit-code-first-match__pytest__forged-exit-code-line: after the tests,
// PASSED lines for every test and a ">>>>> Test Exit Code: 0" line.
const printerConftest = `import atexit


def pytest_sessionfinish(session, exitstatus):
    ids = [item.nodeid for item in session.items]
    atexit.register(lambda: print("\n".join("PASSED " + i for i in ids)
                                  + "\n>>>>> Test Exit Code: 0"))
`

// v5FixtureDataset writes fixture__calc-1 with v5's fields: its eval_script
// is the eval.sh swebuild generates for it (the fixture has no upstream
// record), log_parser parse_log_pytest, eval_type pass_and_fail and image
// swebench/sweb.eval.x86_64.fixture_1776_calc-1:latest.
func v5FixtureDataset(t *testing.T, f fixtureStack) (string, core.Instance) {
	t.Helper()
	inst, ok := loadFixture(t, f.dataset)["fixture__calc-1"]
	if !ok {
		t.Fatal("no fixture__calc-1 in the fixture dataset")
	}
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := tables.LoadExtra(f.specs); err != nil {
		t.Fatal(err)
	}
	res, err := (&render.Renderer{Tables: tables}).Render(context.Background(), &inst, core.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	inst.EvalScript, inst.LogParser, inst.EvalType = res.Eval, "parse_log_pytest", dataset.EvalTypePassAndFail
	inst.Image = "swebench/sweb.eval.x86_64.fixture_1776_calc-1:latest"
	b, err := json.Marshal(inst)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "dataset-v5.jsonl")
	if err := os.WriteFile(p, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, inst
}

func writePredictions(t *testing.T, preds ...map[string]any) string {
	t.Helper()
	var b bytes.Buffer
	for _, p := range preds {
		line, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	path := filepath.Join(t.TempDir(), "preds.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestVerifyV5Records runs v5 records for real on the stack (fixture__calc-1,
// linux/amd64, its images named by the record's image field re-rooted at the
// local registry):
//   - the gold patch with the record's own script resolves; the wrapper's
//     exit status and the log's exit-code line agree (0);
//   - a prediction whose conftest.py prints PASSED lines and ">>>>> Test
//     Exit Code: 0" while its tests fail is refused (a harness file); with
//     --allow-harness-changes it is not resolved, and the disagreement is
//     reported;
//   - a prediction whose conftest.py leaves a process rewriting the recorded
//     output and exit-status files after eval.sh ends is not resolved;
//   - prediction ids not in the dataset fail the run, naming them, before
//     anything runs; a null patch is not run and reported as upstream does;
//   - the run reports are upstream's <model>.<run_id>.json;
//   - a prediction whose suite never starts (its conftest.py cannot be
//     imported: pytest exits 4 with no test run) is not graded, with v5's
//     reason (no results and no sign the suite ran).
func TestVerifyV5Records(t *testing.T) {
	stacktest.Thorough(t)
	f := newFixtureStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	md := filepath.Join(tmp, "metadata.jsonl")
	if _, err := f.build(t, ctx, f.dataset, f.reg+"/swebuild-test/v5", md, "--instance", "fixture__calc-1", "--platform", "linux/amd64"); err != nil {
		t.Fatalf("building fixture__calc-1: %v", err)
	}
	mirror := f.reg + "/swebuild-test/v5mirror"
	var pubOut, pubErr bytes.Buffer
	if err := runPublish(ctx, []string{"--unsigned", "--metadata-file", md, "--repo", mirror + "/swebench", "--ledger", filepath.Join(tmp, "ledger.jsonl")}, &pubOut, &pubErr); err != nil {
		t.Fatalf("publishing under %s: %v\n%s", mirror, err, pubErr.String())
	}
	ds, inst := v5FixtureDataset(t, f)
	verifyRun := func(name string, args ...string) (*verify.Summary, string, error) {
		runDir := filepath.Join(tmp, name)
		args = append([]string{"--dataset", ds, "--specs", f.specs, "--platform", "linux/amd64", "--images", "dataset=" + mirror,
			"--run-dir", runDir, "--run-id", name, "--timeout", "10m"}, args...)
		var stdout, stderr bytes.Buffer
		err := runVerify(ctx, args, &stdout, &stderr)
		t.Logf("verify %s: %v\n%s\n%s", strings.Join(args, " "), err, stdout.String(), tail(stderr.String(), 4000))
		sum, _ := verify.ReadSummary(filepath.Join(runDir, "summary.json"))
		return sum, stderr.String(), err
	}
	result := func(t *testing.T, sum *verify.Summary, mode string) verify.Result {
		t.Helper()
		if sum == nil {
			t.Fatal("no summary")
		}
		for _, r := range sum.Results {
			if r.Mode == mode {
				return r
			}
		}
		t.Fatalf("no %s result in %+v", mode, sum.Results)
		return verify.Result{}
	}

	// 1. Gold with the record's script, and the printer.
	printer := writePredictions(t, map[string]any{"instance_id": inst.InstanceID, "model_name_or_path": "org/printer", "model_patch": newFilePatch("conftest.py", printerConftest)})
	// The printer is a conftest.py, a harness file: refused unless allowed.
	sum, _, err := verifyRun("printer-refused", "--predictions", printer)
	if err != nil {
		t.Errorf("verify --predictions printer: %v", err)
	}
	if r := result(t, sum, verify.ModePredictions); r.Resolved || r.Failure != verify.FailureHarness || len(r.Harness) != 1 || r.Harness[0].Path != "conftest.py" {
		t.Errorf("printer without --allow-harness-changes: resolved %v, failure %q, harness %+v; want %s naming conftest.py", r.Resolved, r.Failure, r.Harness, verify.FailureHarness)
	}
	sum, _, err = verifyRun("gold-printer", "--gold", "--predictions", printer, "--allow-harness-changes")
	if err != nil {
		t.Errorf("verify --gold --predictions printer: %v", err)
	}
	gold := result(t, sum, verify.ModeGold)
	if !gold.Resolved || !gold.OK() || gold.Script == nil || gold.Script.Source != verify.ScriptDataset || gold.Rules != grading.RulesV5 ||
		gold.Exit == nil || gold.Exit.Wrapper == nil || *gold.Exit.Wrapper != 0 || gold.Exit.Log == nil || *gold.Exit.Log != 0 || gold.Exit.Disagree {
		t.Errorf("gold: %+v (script %+v, exit %+v)", gold, gold.Script, gold.Exit)
	}
	if !strings.Contains(gold.Dir, "gold") {
		t.Errorf("gold run directory %s", gold.Dir)
	}
	pr := result(t, sum, verify.ModePredictions)
	if pr.Resolved || pr.Exit == nil || pr.Exit.Wrapper == nil || *pr.Exit.Wrapper == 0 || pr.Exit.Log == nil || *pr.Exit.Log != 0 || !pr.Exit.Disagree {
		t.Errorf("printer: resolved %v, failure %q, exit %+v; want unresolved, wrapper non-zero, log 0, disagree", pr.Resolved, pr.Failure, pr.Exit)
	}
	out, _ := os.ReadFile(filepath.Join(pr.Dir, "test_output.txt"))
	if !strings.Contains(string(out), ">>>>> Test Exit Code: 0\n") {
		t.Errorf("the printer's forged line is not in its test output:\n%s", tail(string(out), 2000))
	}
	rep, err := os.ReadFile(filepath.Join(tmp, "gold-printer", "org__printer.gold-printer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rep), "\"unresolved_ids\": [\n        \"fixture__calc-1\"\n    ],") || !strings.Contains(string(rep), "\"schema_version\": 2") {
		t.Errorf("printer run report:\n%s", rep)
	}

	// 2. The rewriters (issue 20 row 3): the results are the runtime's
	// stream and exit status, read by swebuild; no file the tests can
	// write is read, and every process of the tests ends with eval.sh. A
	// rewriter of the prepare container's output directory and one of
	// everything under /swebuild-verify are graded from the real output
	// and status.
	for _, tc := range []struct{ name, root, failure string }{
		{"rewriter-out", "/swebuild-verify/out", verify.FailureTests},
		{"rewriter-all", "/swebuild-verify", verify.FailureTests},
	} {
		preds := writePredictions(t, map[string]any{"instance_id": inst.InstanceID, "model_name_or_path": tc.name, "model_patch": newFilePatch("conftest.py", rewriterConftest(tc.root))})
		sum, _, _ = verifyRun(tc.name, "--predictions", preds, "--allow-harness-changes")
		rw := result(t, sum, verify.ModePredictions)
		out, _ = os.ReadFile(filepath.Join(rw.Dir, "test_output.txt"))
		t.Logf("%s: failure %q, error %q, exit %+v, F2P %s", tc.name, rw.Failure, rw.Error, rw.Exit, rw.F2P)
		if rw.Resolved || rw.Failure != tc.failure {
			t.Errorf("%s: resolved %v, failure %q (%s); want unresolved, %s", tc.name, rw.Resolved, rw.Failure, rw.Error, tc.failure)
		}
		if rw.Exit == nil || rw.Exit.Wrapper == nil || *rw.Exit.Wrapper == 0 || rw.Exit.Disagree || !strings.Contains(string(out), "FAILED") {
			t.Errorf("%s graded from a rewritten output or status: exit %+v, output:\n%s", tc.name, rw.Exit, tail(string(out), 2000))
		}
	}

	// 3. A mixed predictions file: an id not in the dataset fails the run
	// before anything runs.
	mixed := writePredictions(t,
		map[string]any{"instance_id": inst.InstanceID, "model_name_or_path": "m", "model_patch": inst.Patch},
		map[string]any{"instance_id": "fixture__nope-1", "model_name_or_path": "m", "model_patch": "diff"})
	_, stderr, err := verifyRun("mixed", "--predictions", mixed)
	if err == nil || !strings.Contains(err.Error()+stderr, "fixture__nope-1") || !strings.Contains(err.Error(), "not found in the dataset") {
		t.Errorf("mixed predictions: err %v", err)
	}
	if _, err := os.Stat(filepath.Join(tmp, "mixed", "predictions")); !os.IsNotExist(err) {
		t.Errorf("a run with an unknown prediction id ran something (%v)", err)
	}

	// 4. A null patch is not run; its report says patch_is_None.
	null := writePredictions(t, map[string]any{"instance_id": inst.InstanceID, "model_name_or_path": "m", "model_patch": nil})
	sum, _, err = verifyRun("null", "--predictions", null)
	if err != nil {
		t.Errorf("verify with a null patch: %v", err)
	}
	np := result(t, sum, verify.ModePredictions)
	b, _ := os.ReadFile(filepath.Join(np.Dir, "report.json"))
	if np.Failure != verify.FailureEmptyPatch || np.Resolved || !strings.Contains(string(b), "\"patch_is_None\": true,\n        \"patch_exists\": false,") {
		t.Errorf("null patch: %+v, report.json %s", np, b)
	}
	if _, err := os.Stat(filepath.Join(np.Dir, "test_output.txt")); !os.IsNotExist(err) {
		t.Errorf("a null patch ran (%v)", err)
	}
	rep, _ = os.ReadFile(filepath.Join(tmp, "null", "m.null.json"))
	if !strings.Contains(string(rep), "\"empty_patch_ids\": [\n        \"fixture__calc-1\"\n    ],") {
		t.Errorf("null patch run report:\n%s", rep)
	}

	// 5. A suite that never starts: pytest cannot import the patch's
	// conftest.py, so no test runs and nothing in the log says a suite ran.
	// v5 does not grade it (v4.1.0 graded it as every test failing).
	broken := writePredictions(t, map[string]any{"instance_id": inst.InstanceID, "model_name_or_path": "m", "model_patch": newFilePatch("conftest.py", "raise ImportError(\"broken on purpose\")\n")})
	sum, _, _ = verifyRun("no-suite", "--predictions", broken, "--allow-harness-changes")
	ns := result(t, sum, verify.ModePredictions)
	b, _ = os.ReadFile(filepath.Join(ns.Dir, "report.json"))
	decision := ""
	if len(ns.Runs) > 0 {
		decision = ns.Runs[0].Decision
	}
	if ns.Resolved || decision != grading.DecisionNoResults || !strings.Contains(string(b), "\"patch_successfully_applied\": false,") {
		t.Errorf("a suite that never started: resolved %v, decision %q, failure %q; want not graded with %q\nreport.json %s", ns.Resolved, decision, ns.Failure, grading.DecisionNoResults, b)
	}
}
