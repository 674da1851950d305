package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/grading"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/verify"
)

// fixturePyBases returns the layered fixture's py base images for
// linux/amd64 and linux/arm64, from the shared fixture build (pushed by
// digest), as --build-context flags binding the names the fixture task
// repo's Dockerfiles start FROM (swebuild-fixture-base-py-<arch>).
func fixturePyBases(t *testing.T, built stacktest.Built) []string {
	t.Helper()
	var flags []string
	for _, r := range built.Records {
		if r.Kind != core.KindBase || !strings.HasPrefix(r.Key, "sweb.base.fixture.") {
			continue
		}
		if !strings.HasPrefix(r.Ref, built.Repo+"@sha256:") {
			t.Fatalf("base %s %s: ref %q", r.Key, r.Platform, r.Ref)
		}
		flags = append(flags, "--build-context", fmt.Sprintf("swebuild-fixture-base-py-%s=docker-image://%s", r.Platform.GOARCH(), r.Ref))
	}
	if len(flags) != 2*len(core.AllPlatforms()) {
		t.Fatalf("py base images %q, want one per platform", flags)
	}
	return flags
}

// TestVerifyTaskRepoBothPlatforms (issue 19): one task of the fixture task
// repo, fixture__calc-1, built with `build --task-repo` for linux/amd64 and
// linux/arm64 (QEMU) and pushed by digest, then `verify --task-repo
// --metadata-file` on both platforms under v5's rules with the task's own
// eval.sh (no exit-status recording of its own: verify adds it as upstream
// v5's record_test_exit_code does) and its log_parser:
//   - gold resolves: v5 rules, parse_log_pytest, wrapper status 0, log 0;
//   - --control does not resolve;
//   - a prediction that prints PASSED lines and ">>>>> Test Exit Code: 0"
//     while its tests fail is not resolved: wrapper non-zero, log 0,
//     disagreement reported;
//   - a prediction whose suite never starts (conftest.py raises ImportError)
//     is not graded: decision no_results_and_no_sign_the_suite_ran.
func TestVerifyTaskRepoBothPlatforms(t *testing.T) {
	start := time.Now()
	defer func() { t.Logf("wall time %s", time.Since(start).Round(time.Second)) }()
	f, built := sharedFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	taskRepo := filepath.Join(f.root, "testdata", "fixture", "taskrepo")
	const id = "fixture__calc-1"
	platforms := []core.Platform{core.AMD64, core.ARM64}

	binds := fixturePyBases(t, built)
	t.Logf("bases bound after %s: %v", time.Since(start).Round(time.Second), binds)

	md := filepath.Join(tmp, "metadata.jsonl")
	args := append([]string{"--task-repo", taskRepo, "--specs", f.specs, "--instance", id, "--platform", "linux/amd64,linux/arm64",
		"--push", f.reg + "/swebuild-test/taskrepo-verify", "--metadata-file", md, "--run-dir", filepath.Join(tmp, "build"),
		"--progress", "quiet"}, binds...)
	var stdout, stderr bytes.Buffer
	if err := runBuild(ctx, args, &stdout, &stderr); err != nil {
		t.Fatalf("swebuild build %s: %v\n%s\n%s", strings.Join(args, " "), err, stdout.String(), tail(stderr.String(), 3000))
	}
	t.Logf("built after %s:\n%s", time.Since(start).Round(time.Second), stdout.String())
	recs, err := core.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	pushed := map[core.Platform]string{}
	for _, r := range recs {
		if r.Kind == core.KindInstance && r.InstanceID == id && r.Status == core.StatusBuilt &&
			strings.HasPrefix(r.Ref, f.reg+"/swebuild-test/taskrepo-verify@sha256:") {
			pushed[r.Platform] = r.Ref
		}
	}
	for _, p := range platforms {
		if pushed[p] == "" {
			t.Fatalf("no pushed %s image of %s in %s", p, id, md)
		}
	}

	verifyRun := func(name string, args ...string) *verify.Summary {
		runDir := filepath.Join(tmp, name)
		args = append([]string{"--task-repo", taskRepo, "--specs", f.specs, "--metadata-file", md, "--instance", id,
			"--platform", "linux/amd64,linux/arm64", "--run-dir", runDir, "--run-id", name, "--timeout", "10m"}, args...)
		var stdout, stderr bytes.Buffer
		err := runVerify(ctx, args, &stdout, &stderr)
		t.Logf("verify %s (after %s): %v\n%s\n%s", strings.Join(args, " "), time.Since(start).Round(time.Second), err, stdout.String(), tail(stderr.String(), 4000))
		if err != nil {
			t.Errorf("verify %s: %v", name, err)
		}
		sum, rerr := verify.ReadSummary(filepath.Join(runDir, "summary.json"))
		if rerr != nil {
			t.Fatalf("verify %s: no summary: %v (run: %v)", name, rerr, err)
		}
		return sum
	}
	result := func(t *testing.T, sum *verify.Summary, mode string, p core.Platform) verify.Result {
		t.Helper()
		for _, r := range sum.Results {
			if r.Mode == mode && r.Platform == p && r.InstanceID == id {
				return r
			}
		}
		t.Fatalf("no %s result for %s in %+v", mode, p, sum.Results)
		return verify.Result{}
	}

	// Gold, control and the printer in one run.
	printer := writePredictions(t, map[string]any{"instance_id": id, "model_name_or_path": "org/printer", "model_patch": newFilePatch("conftest.py", printerConftest)})
	// The printer and the broken suite are conftest.py files: harness
	// changes, run here with --allow-harness-changes.
	sum := verifyRun("gold-control-printer", "--gold", "--control", "--predictions", printer, "--allow-harness-changes")
	for _, p := range platforms {
		t.Run(p.GOARCH(), func(t *testing.T) {
			gold := result(t, sum, verify.ModeGold, p)
			if !gold.Resolved || !gold.OK() || gold.Cached || gold.Script == nil || gold.Script.Source != verify.ScriptDataset ||
				gold.Rules != grading.RulesV5 || gold.Parser != "parse_log_pytest" ||
				gold.Exit == nil || gold.Exit.Wrapper == nil || *gold.Exit.Wrapper != 0 || gold.Exit.Log == nil || *gold.Exit.Log != 0 || gold.Exit.Disagree {
				t.Errorf("gold: resolved %v, failure %q (%s), script %+v, rules %q, parser %q, exit %+v", gold.Resolved, gold.Failure, gold.Error, gold.Script, gold.Rules, gold.Parser, gold.Exit)
			}
			out, _ := os.ReadFile(filepath.Join(gold.Dir, "test_output.txt"))
			if n := strings.Count(string(out), ">>>>> Test Exit Code: 0\n"); n != 1 {
				t.Errorf("gold test output has %d exit-code lines, want the wrapper's one:\n%s", n, tail(string(out), 2000))
			}
			ctl := result(t, sum, verify.ModeControl, p)
			if ctl.Resolved {
				t.Errorf("control resolved: %+v", ctl)
			}
			if gold.Discriminates == nil || !*gold.Discriminates {
				t.Errorf("gold does not discriminate from the control: %v", gold.Discriminates)
			}
			pr := result(t, sum, verify.ModePredictions, p)
			if pr.Resolved || pr.Exit == nil || pr.Exit.Wrapper == nil || *pr.Exit.Wrapper == 0 || pr.Exit.Log == nil || *pr.Exit.Log != 0 || !pr.Exit.Disagree {
				t.Errorf("printer: resolved %v, failure %q, exit %+v; want unresolved, wrapper non-zero, log 0, disagree", pr.Resolved, pr.Failure, pr.Exit)
			}
			out, _ = os.ReadFile(filepath.Join(pr.Dir, "test_output.txt"))
			if !strings.Contains(string(out), ">>>>> Test Exit Code: 0\n") || !strings.Contains(string(out), "PASSED ") {
				t.Errorf("the printer's forged lines are not in its test output:\n%s", tail(string(out), 2000))
			}
		})
	}

	// A suite that never starts.
	broken := writePredictions(t, map[string]any{"instance_id": id, "model_name_or_path": "m", "model_patch": newFilePatch("conftest.py", "raise ImportError(\"broken on purpose\")\n")})
	sum = verifyRun("no-suite", "--predictions", broken, "--allow-harness-changes")
	for _, p := range platforms {
		ns := result(t, sum, verify.ModePredictions, p)
		decision := ""
		if len(ns.Runs) > 0 {
			decision = ns.Runs[0].Decision
		}
		if ns.Resolved || decision != "no_results_and_no_sign_the_suite_ran" {
			t.Errorf("%s: a suite that never started: resolved %v, decision %q, failure %q (%s)", p, ns.Resolved, decision, ns.Failure, ns.Error)
		}
	}
}
