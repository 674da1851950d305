package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/verify"
)

// attack is one hostile prediction for fixture__calc-1 (testdata/attacks,
// README there): its code file, the instance id it runs under (an alias of
// fixture__calc-1: same image, record and labels), and what verify must make
// of it.
type attack struct {
	name, file string
	// harness: the patch is a harness file (file is the file's path in the
	// repository); else file becomes calc/_hooks.py, imported by
	// calc/__init__.py.
	harness string
	// want is the result's failure class by default; resolved says the run
	// resolves (the documented limit: a printer in the code under test).
	want     string
	resolved bool
	// allowed is the failure class with --allow-harness-changes ("":
	// not run that way), allowedResolved the verdict then.
	allowed         string
	allowedResolved bool
}

var attacks = []attack{
	{name: "post-test-tools", file: "tools.py", want: verify.FailureTests},
	{name: "diff-external", file: "diff_external.py", want: verify.FailureTests},
	{name: "capture-forgery", file: "capture.py", want: verify.FailureTests},
	{name: "kill-capture", file: "kill_capture.py", want: verify.FailureTests},
	{name: "eval-rewrite", file: "eval_rewrite.py", want: verify.FailureTests},
	{name: "detached-writer", file: "detached.py", want: verify.FailureTests},
	{name: "fork-swarm", file: "swarm.py", want: verify.FailureTests},
	{name: "disk-fill", file: "disk_fill.py", want: verify.FailureTests},
	// Output is output: code the patch puts in the package under test can
	// print results after pytest's own, and upstream grades them too.
	{name: "printer-in-package", file: "printer.py", resolved: true},
	{name: "printer-conftest", file: "harness_conftest.py", harness: "conftest.py", want: verify.FailureHarness, allowed: "", allowedResolved: true},
	{name: "shadow-pytest", file: "harness_pytest.py", harness: "pytest.py", want: verify.FailureHarness, allowed: "", allowedResolved: true},
	// Run alone with a short time limit.
	{name: "sleep-past-timeout", file: "sleeper.py", want: verify.FailureTimeout},
}

const sleeperName = "sleep-past-timeout"

// attackFixture is fixture__calc-1 built and published once for the
// attack table, and the v5 dataset of it and its aliases.
type attackFixture struct {
	f       fixtureStack
	mirror  string
	dataset string
	inst    core.Instance
	ids     map[string]string // attack name -> instance id
	tmp     string
}

// newAttackFixture builds fixture__calc-1 for platforms, publishes it under
// a registry prefix of its own as the record's image field names it, and
// writes a v5 dataset holding the record and one alias per attack (ids
// fixture__calc-1001...: the same record, image and labels).
func newAttackFixture(t *testing.T, ctx context.Context, platforms []string) *attackFixture {
	f := newFixtureStack(t)
	tmp := t.TempDir()
	a := &attackFixture{f: f, tmp: tmp, ids: map[string]string{}}
	a.mirror = fmt.Sprintf("%s/swebuild-test/attacks-%d", f.reg, time.Now().UnixNano())
	begin := time.Now()
	md := filepath.Join(tmp, "metadata.jsonl")
	if _, err := f.build(t, ctx, f.dataset, a.mirror+"-staging", md, "--instance", "fixture__calc-1", "--platform", strings.Join(platforms, ","),
		"--publish", a.mirror+"/swebench", "--ledger", filepath.Join(tmp, "ledger.jsonl")); err != nil {
		t.Fatalf("building and publishing fixture__calc-1: %v", err)
	}
	t.Logf("fixture__calc-1 built and published for %s in %.0fs", strings.Join(platforms, ", "), time.Since(begin).Seconds())
	ds, inst := v5FixtureDataset(t, f)
	a.inst = inst
	var b bytes.Buffer
	line, err := os.ReadFile(ds)
	if err != nil {
		t.Fatal(err)
	}
	b.Write(line)
	for i, at := range attacks {
		alias := inst
		alias.InstanceID = fmt.Sprintf("fixture__calc-%d", 1001+i)
		a.ids[at.name] = alias.InstanceID
		l, err := json.Marshal(alias)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(l, '\n'))
	}
	a.dataset = filepath.Join(tmp, "attacks.jsonl")
	if err := os.WriteFile(a.dataset, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return a
}

// patch is attack at's prediction patch: its code (after common.py, with
// the labels) as calc/_hooks.py imported by calc/__init__.py, or as its
// harness file.
func (a *attackFixture) patch(t *testing.T, at attack) string {
	t.Helper()
	dir := filepath.Join(a.f.root, "cmd", "swebuild", "testdata", "attacks")
	common, err := os.ReadFile(filepath.Join(dir, "common.py"))
	if err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile(filepath.Join(dir, at.file))
	if err != nil {
		t.Fatal(err)
	}
	labels, err := json.Marshal(append(append([]string{}, a.inst.FailToPass...), a.inst.PassToPass...))
	if err != nil {
		t.Fatal(err)
	}
	src := strings.ReplaceAll(string(common), "__LABELS__", string(labels)) + "\n" + string(code)
	if at.harness != "" {
		return newFilePatch(at.harness, src)
	}
	return newFilePatch("calc/_hooks.py", src) + `diff --git a/calc/__init__.py b/calc/__init__.py
--- a/calc/__init__.py
+++ b/calc/__init__.py
@@ -1,6 +1,7 @@
 """calc: small arithmetic helpers."""
 
+import calc._hooks  # noqa: F401
 from calc.ops import add, div, mul, sub
 from calc.stats import mean
 
`
}

// predictions writes a predictions file of the named attacks (model
// "attacks") and returns it with the instance ids.
func (a *attackFixture) predictions(t *testing.T, names ...string) (string, []string) {
	t.Helper()
	var preds []map[string]any
	var ids []string
	for _, at := range attacks {
		for _, n := range names {
			if at.name == n {
				preds = append(preds, map[string]any{"instance_id": a.ids[n], "model_name_or_path": "attacks", "model_patch": a.patch(t, at)})
				ids = append(ids, a.ids[n])
			}
		}
	}
	return writePredictions(t, preds...), ids
}

// verifyWith runs `swebuild verify` (this build, or the binary bin when it
// is set) with args on the attack dataset for one engine and platform, and
// returns the summary and the wall time.
func (a *attackFixture) verifyWith(t *testing.T, ctx context.Context, bin, engine, platform, name string, args ...string) (*verify.Summary, time.Duration, error) {
	t.Helper()
	runDir := filepath.Join(a.tmp, strings.ReplaceAll(t.Name(), "/", "_"), name)
	args = append([]string{"--dataset", a.dataset, "--specs", a.f.specs, "--platform", platform, "--images", "dataset=" + a.mirror,
		"--engine", engine, "--run-dir", runDir, "--run-id", name, "--workers", "2"}, args...)
	if engine == "docker" {
		args = append(args, "--docker-host", os.Getenv(stacktest.EnvDockerHost))
	}
	var stdout, stderr bytes.Buffer
	begin := time.Now()
	var err error
	if bin == "" {
		err = runVerify(ctx, args, &stdout, &stderr)
	} else {
		cmd := exec.CommandContext(ctx, bin, append([]string{"verify"}, args...)...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.WaitDelay = time.Minute
		err = cmd.Run()
	}
	took := time.Since(begin)
	t.Logf("verify %s (%s, %.0fs): %v\n%s\n%s", name, bin, took.Seconds(), err, stdout.String(), tail(stderr.String(), 3000))
	sum, serr := verify.ReadSummary(filepath.Join(runDir, "summary.json"))
	if serr != nil {
		return nil, took, fmt.Errorf("%v; %v", err, serr)
	}
	return sum, took, err
}

// TestVerifyAttacks is the attack table of issue 28: each hostile prediction
// (testdata/attacks) run by `swebuild verify` on fixture__calc-1's image
// with BuildKit and Docker on linux/amd64 and BuildKit on linux/arm64
// (QEMU), none of them fixing the bug. Only the printer in the package under
// test resolves (output is output; upstream is fooled the same way); the
// harness files are refused by default and resolve, as upstream, with
// --allow-harness-changes; everything else is graded from the real output
// and exit status (test_failures), and the sleeper is ended at its time
// limit. The gold patch resolves and the control does not in the same
// images. The fixture is built once for every subtest.
//
// -short skips it (minutes per engine; TestHostileTestProcess in package
// verify is the fast check of the engines). SWEBUILD_ATTACK_COMPARE=/path/to/swebuild also runs every table
// with that binary (e.g. main's) and logs what it made of each attack,
// without judging it.
func TestVerifyAttacks(t *testing.T) {
	if testing.Short() {
		// Measured here (2 shared cores, load about 10): 9 min for the
		// BuildKit linux/amd64 table with its build, far over the fast
		// tier's budget; TestHostileTestProcess (package verify) is the
		// fast tier's check of the engines.
		t.Skip("-short: the attack table takes minutes per engine; the thorough tier runs it")
	}
	stacktest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 170*time.Minute)
	defer cancel()
	platforms := []string{"linux/amd64", "linux/arm64"}
	begin := time.Now()
	a := newAttackFixture(t, ctx, platforms)
	compare := os.Getenv("SWEBUILD_ATTACK_COMPARE")
	for _, e := range []struct {
		name, engine, platform string
		timeout                string // the sleeper's
	}{
		{"buildkit-amd64", "buildkit", "linux/amd64", "30s"},
		{"docker-amd64", "docker", "linux/amd64", "30s"},
		{"buildkit-arm64", "buildkit", "linux/arm64", "90s"},
	} {
		t.Run(e.name, func(t *testing.T) {
			if e.engine == "docker" {
				stacktest.RequireDocker(t)
			}
			start := time.Now()
			// Gold and control.
			sum, _, err := a.verifyWith(t, ctx, "", e.engine, e.platform, "gold-control", "--gold", "--control", "--instance", "fixture__calc-1", "--timeout", "10m")
			if err != nil {
				t.Errorf("gold and control: %v", err)
			}
			for _, r := range resultsOf(sum) {
				switch {
				case r.Mode == verify.ModeGold && (!r.Resolved || !r.OK()):
					t.Errorf("gold: %+v (%s)", r, r.Why())
				case r.Mode == verify.ModeControl && (r.Resolved || r.Failure != verify.FailureTests):
					t.Errorf("control: resolved %v, failure %q (%s)", r.Resolved, r.Failure, r.Why())
				}
			}
			if n := len(resultsOf(sum)); n != 2 {
				t.Errorf("%d gold and control results, want 2", n)
			}

			// Every attack but the sleeper, by default and, for the harness
			// files, with --allow-harness-changes; the sleeper alone.
			var names, harness []string
			for _, at := range attacks {
				if at.name != sleeperName {
					names = append(names, at.name)
				}
				if at.harness != "" {
					harness = append(harness, at.name)
				}
			}
			runs := []struct {
				name  string
				names []string
				args  []string
				allow bool
			}{
				{"attacks", names, []string{"--timeout", "10m"}, false},
				{"allowed", harness, []string{"--timeout", "10m", "--allow-harness-changes"}, true},
				{"sleeper", []string{sleeperName}, []string{"--timeout", e.timeout}, false},
			}
			for _, run := range runs {
				preds, ids := a.predictions(t, run.names...)
				args := append([]string{"--predictions", preds}, run.args...)
				for _, id := range ids {
					args = append(args, "--instance", id)
				}
				sum, took, err := a.verifyWith(t, ctx, "", e.engine, e.platform, run.name, args...)
				if err != nil {
					t.Errorf("verify %s: %v", run.name, err)
				}
				got := map[string]verify.Result{}
				for _, r := range resultsOf(sum) {
					got[r.InstanceID] = r
				}
				for _, n := range run.names {
					at := attackByName(n)
					r, ok := got[a.ids[n]]
					if !ok {
						t.Errorf("%s: no result", n)
						continue
					}
					wantFailure, wantResolved := at.want, at.resolved
					if run.allow {
						wantFailure, wantResolved = at.allowed, at.allowedResolved
					}
					t.Logf("%-20s %-8s resolved=%-5v failure=%-28q exit=%s %s", n, run.name, r.Resolved, r.Failure, exitText(r.Exit), firstLine(r.Error))
					if r.Resolved != wantResolved || r.Failure != wantFailure {
						t.Errorf("%s (%s): resolved %v, failure %q (%s); want resolved %v, failure %q", n, run.name, r.Resolved, r.Failure, r.Why(), wantResolved, wantFailure)
					}
				}
				if run.name == "sleeper" {
					t.Logf("the sleeper's verify took %s with --timeout %s", took.Round(time.Second), e.timeout)
					// Not a speed target: a bound on a hang (the limit, the
					// 2 minutes a killed run gets to end, and the prepare
					// container and start-up on a loaded machine).
					if limit, _ := time.ParseDuration(e.timeout); took > limit+2*time.Minute+10*time.Minute {
						t.Errorf("the sleeper's verify took %s with --timeout %s: the limit did not end it", took.Round(time.Second), e.timeout)
					}
				}
				if compare != "" && !run.allow {
					cctx, ccancel := context.WithTimeout(ctx, 10*time.Minute)
					csum, ctook, cerr := a.verifyWith(t, cctx, compare, e.engine, e.platform, run.name+"-compare", args...)
					ccancel()
					for _, r := range resultsOf(csum) {
						t.Logf("COMPARE %s %-20s resolved=%-5v failure=%q (%.0fs) %s", compare, nameByID(a, r.InstanceID), r.Resolved, r.Failure, ctook.Seconds(), firstLine(r.Error))
					}
					if cerr != nil {
						t.Logf("COMPARE %s %s: %v (after %s)", compare, run.name, cerr, ctook.Round(time.Second))
					}
				}
			}
			t.Logf("%s table: %s", e.name, time.Since(start).Round(time.Second))
		})
	}
	t.Logf("TestVerifyAttacks: %s in all (build and publish included)", time.Since(begin).Round(time.Second))
}

func resultsOf(s *verify.Summary) []verify.Result {
	if s == nil {
		return nil
	}
	out := append([]verify.Result{}, s.Results...)
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}

func attackByName(n string) attack {
	for _, at := range attacks {
		if at.name == n {
			return at
		}
	}
	return attack{}
}

func nameByID(a *attackFixture, id string) string {
	for n, i := range a.ids {
		if i == id {
			return n
		}
	}
	return id
}

func exitText(e *verify.ExitStatus) string {
	if e == nil {
		return "-"
	}
	return e.String()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}
