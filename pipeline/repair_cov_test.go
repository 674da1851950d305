package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/ci"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/pins"
	"github.com/swebuild/swebuild/publication"
	"github.com/swebuild/swebuild/repair"
	"github.com/swebuild/swebuild/sbom"
	"github.com/swebuild/swebuild/verify"
)

// fixtureInputs are the offline fixture's dataset and spec profiles.
// fixtureEnvKeys are the env keys of the fixture's Python projects (calc
// and textutil share one env per platform) and of semver, per platform.
func fixtureEnvKeys(t *testing.T) (py, js map[core.Platform]string) {
	t.Helper()
	ctx := context.Background()
	py, js = map[core.Platform]string{}, map[core.Platform]string{}
	for _, c := range []struct {
		id  string
		out map[core.Platform]string
	}{{"fixture__calc-1", py}, {"fixture__semver-1", js}} {
		keys, _, err := stepEnvKeys(ctx, fixtureInputs(t, c.id), core.AllPlatforms())
		if err != nil {
			t.Fatal(err)
		}
		for p, ks := range keys {
			if len(ks) != 1 {
				t.Fatalf("%s on %s: env keys %v, want one", c.id, p, ks)
			}
			c.out[p] = ks[0]
		}
	}
	return py, js
}

// TestStepEnvKeys: a step builds the envs its instances build FROM, one
// per platform: the fixture's calc and textutil share the Python env
// (sweb.env.fixture.<arch>.<hash>), semver has its own JS env; the
// x86-only textutil-2 has no arm64 env, which a step on arm64 refuses.
func TestStepEnvKeys(t *testing.T) {
	ctx := context.Background()
	py, js := fixtureEnvKeys(t)
	for _, p := range core.AllPlatforms() {
		prefix := "sweb.env.fixture." + p.Arch() + "."
		if !strings.HasPrefix(py[p], prefix) || !strings.HasSuffix(py[p], ":latest") {
			t.Errorf("calc's env on %s: %q, want %s<hash>:latest", p, py[p], prefix)
		}
		if js[p] == "" || js[p] == py[p] || !strings.Contains(js[p], "."+p.Arch()+".") {
			t.Errorf("semver's env on %s: %q (calc's %q): want its own env of that arch", p, js[p], py[p])
		}
	}
	keys, planned, err := stepEnvKeys(ctx, fixtureInputs(t, "fixture__calc-1", "fixture__textutil-1"), []core.Platform{core.AMD64})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[ci.Key]bool{{InstanceID: "fixture__calc-1", Platform: core.AMD64}: true, {InstanceID: "fixture__textutil-1", Platform: core.AMD64}: true}; !maps.Equal(planned, want) {
		t.Errorf("calc-1 and textutil-1 on amd64: planned %v, want %v", planned, want)
	}
	// textutil-2 is x86-only (the fixture's README): planned on amd64 only.
	_, planned, err = stepEnvKeys(ctx, fixtureInputs(t, "fixture__calc-1", "fixture__textutil-2"), core.AllPlatforms())
	if err != nil {
		t.Fatal(err)
	}
	if want := map[ci.Key]bool{{InstanceID: "fixture__calc-1", Platform: core.AMD64}: true, {InstanceID: "fixture__calc-1", Platform: core.ARM64}: true,
		{InstanceID: "fixture__textutil-2", Platform: core.AMD64}: true}; !maps.Equal(planned, want) {
		t.Errorf("calc-1 and textutil-2 on both: planned %v, want %v", planned, want)
	}
	if want := []string{py[core.AMD64]}; !slices.Equal(keys[core.AMD64], want) || len(keys) != 1 {
		t.Errorf("calc-1 and textutil-1 on amd64: %v, want the one Python env %v", keys, want)
	}
	_, _, err = stepEnvKeys(ctx, fixtureInputs(t, "fixture__textutil-2"), core.AllPlatforms())
	if err == nil || !strings.Contains(err.Error(), "the plan of [fixture__textutil-2] has no env image on linux/arm64") {
		t.Errorf("an x86-only instance on arm64: err = %v", err)
	}
	in := fixtureInputs(t, "fixture__calc-1")
	in.Dataset = filepath.Join(t.TempDir(), "absent.jsonl")
	if _, _, err := stepEnvKeys(ctx, in, core.AllPlatforms()); err == nil || !strings.Contains(err.Error(), "absent.jsonl") {
		t.Errorf("a missing dataset: err = %v", err)
	}
}

// upstreamReport copies a real upstream report.json (scikit-learn 12973,
// one FAIL_TO_PASS and two PASS_TO_PASS failures) into dir.
func upstreamReport(t *testing.T, dir string) {
	t.Helper()
	src := filepath.Join(spectest.SharedDir(t), "eval-logs", "ComposioHQ__composio", "logs", "run_evaluation",
		"langgraph_agent_1725824120N", "composio", "scikit-learn__scikit-learn-12973", "report.json")
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The failing tests of that report: its FAIL_TO_PASS and PASS_TO_PASS
// failures, sorted (FAIL_TO_FAIL and PASS_TO_FAIL are not labelled tests).
var sklearnFailing = []string{
	"sklearn/linear_model/tests/test_least_angle.py::test_lasso_lars_fit_copyX_behaviour[False]",
	"sklearn/linear_model/tests/test_least_angle.py::test_lasso_lars_fit_copyX_behaviour[True]",
	"sklearn/linear_model/tests/test_least_angle.py::test_lasso_lars_ic",
}

// TestFailingTests: the labelled tests a gold result failed come from the
// report.json of its run directory, else of its first run that has one
// (a repeated run's run-N); no readable report gives none.
func TestFailingTests(t *testing.T) {
	root := t.TempDir()
	withReport := filepath.Join(root, "verify", "gold", "scikit-learn__scikit-learn-12973", "x86_64")
	upstreamReport(t, withReport)
	broken := filepath.Join(root, "broken")
	if err := os.MkdirAll(broken, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(broken, "report.json"), []byte(`{"scikit-learn__scikit-learn-12973": `), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(root, "empty")
	for _, tc := range []struct {
		name string
		r    verify.Result
		want []string
	}{
		{"its own directory", verify.Result{Dir: withReport}, sklearnFailing},
		{"a repeated run's", verify.Result{Dir: empty, Runs: []verify.Attempt{{Run: 1, Dir: ""}, {Run: 2, Dir: broken}, {Run: 3, Dir: withReport}}}, sklearnFailing},
		{"an unparsable report", verify.Result{Dir: broken}, nil},
		{"no directory", verify.Result{}, nil},
	} {
		if got := failingTests(tc.r); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRegressed: a repair looks at gold failures of the tests (or a
// timeout) of images rebuilt tonight that were verified before; not at a
// patch that no longer applies, an infrastructure error, a control run,
// a reused image or one never verified.
func TestRegressed(t *testing.T) {
	build := ci.Target{Platform: core.AMD64, Action: ci.ActionBuild, Shard: "amd64-0", PreviouslyVerified: true}
	fail := func(mode, failure string) verify.Result {
		return verify.Result{InstanceID: "fixture__calc-1", Platform: core.AMD64, Mode: mode, Failure: failure}
	}
	newTarget, reused := build, build
	newTarget.PreviouslyVerified = false
	reused.Action, reused.Shard = ci.ActionExisting, ""
	passed := fail(verify.ModeGold, "")
	passed.Resolved = true
	for _, tc := range []struct {
		name string
		g    verify.Result
		t    ci.Target
		want bool
	}{
		{"tests fail", fail(verify.ModeGold, verify.FailureTests), build, true},
		{"timeout", fail(verify.ModeGold, verify.FailureTimeout), build, true},
		{"patch does not apply", fail(verify.ModeGold, verify.FailurePatch), build, false},
		{"infrastructure", fail(verify.ModeGold, verify.FailureInfra), build, false},
		{"gold passed", passed, build, false},
		{"control run", fail(verify.ModeControl, verify.FailureTests), build, false},
		{"never verified", fail(verify.ModeGold, verify.FailureTests), newTarget, false},
		{"reused image", fail(verify.ModeGold, verify.FailureTests), reused, false},
	} {
		if got := regressed(tc.g, tc.t); got != tc.want {
			t.Errorf("%s: regressed = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// nightPlan is a night's plan of the fixture's Python instances built on
// both platforms FROM env keys (textutil-2 x86-only), every image verified
// last night; envAction is what the env stage does with the envs.
func nightPlan(py map[core.Platform]string, envAction string, ids ...string) ci.Plan {
	p := ci.Plan{Platforms: core.AllPlatforms()}
	for _, id := range ids {
		in := ci.PlanInstance{InstanceID: id}
		for _, pl := range core.AllPlatforms() {
			if id == fixtureX86Only && pl == core.ARM64 {
				continue
			}
			in.Targets = append(in.Targets, ci.Target{Platform: pl, Action: ci.ActionBuild, Shard: pl.Arch() + "-0", Env: py[pl], PreviouslyVerified: true})
		}
		p.Instances = append(p.Instances, in)
	}
	for _, pl := range core.AllPlatforms() {
		e := ci.EnvTarget{Key: py[pl], Platform: pl, Action: envAction, Shard: "envs-" + pl.Arch()}
		if envAction == ci.ActionExisting {
			e.Shard, e.Ref = "", "127.0.0.1:5000/nightly/"+strings.TrimSuffix(py[pl], ":latest")+"@sha256:"+strings.Repeat("ab", 32)
		}
		p.Envs = append(p.Envs, e)
	}
	return p
}

func goldFailure(id string, p core.Platform, failure, dir string) verify.Result {
	return verify.Result{InstanceID: id, Platform: p, Mode: verify.ModeGold, Failure: failure, Dir: dir,
		F2P: verify.Counts{Passed: 0, Total: 3}, P2P: verify.Counts{Passed: 4, Total: 5}}
}

func goldPass(id string, p core.Platform) verify.Result {
	return verify.Result{InstanceID: id, Platform: p, Mode: verify.ModeGold, Resolved: true,
		F2P: verify.Counts{Passed: 3, Total: 3}, P2P: verify.Counts{Passed: 5, Total: 5}}
}

// TestGroupAndCoverCases: tonight's regressions are grouped by env (repo
// and version), each case with its failures (sorted, with their failing
// tests), the platforms and instances that failed (what each step
// rebuilds), and every instance of the plan built FROM its envs on their
// platforms (what the repair rebuilds with its rule); a gold result of an
// id the dataset lacks is skipped, saying so.
func TestGroupAndCoverCases(t *testing.T) {
	py, _ := fixtureEnvKeys(t)
	l, err := Load(context.Background(), fixtureInputs(t))
	if err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(t.TempDir(), "shard-arm64-0", "verify", "gold", "fixture__calc-1", "arm64")
	upstreamReport(t, runDir)
	o := RepairOptions{
		Out:  t.TempDir(),
		Plan: nightPlan(py, ci.ActionBuild, "fixture__calc-1", "fixture__calc-2", "fixture__textutil-1", "fixture__textutil-2"),
		Gold: []verify.Result{
			goldFailure("fixture__textutil-2", core.AMD64, verify.FailureTimeout, ""),
			goldFailure("fixture__calc-1", core.ARM64, verify.FailureTests, runDir),
			goldPass("fixture__calc-1", core.AMD64),
			goldFailure("fixture__calc-2", core.ARM64, verify.FailurePatch, ""),
		},
	}
	cases := o.groupCases(l.Instances, io.Discard)
	if len(cases) != 2 || cases[0].Repo != "fixture/calc" || cases[1].Repo != "fixture/textutil" {
		t.Fatalf("cases %+v, want fixture/calc then fixture/textutil", cases)
	}
	for _, c := range cases {
		o.coverCase(c)
		if c.err != "" || c.result != nil {
			t.Errorf("%s: decided without a rebuild (%q, %+v): its env was rebuilt tonight", c.Name(), c.err, c.result)
		}
	}
	calc, text := cases[0], cases[1]
	if len(calc.Tonight.Failures) != 1 || calc.Tonight.Failures[0].String() != "fixture__calc-1 linux/arm64" ||
		!slices.Equal(calc.Tonight.Failures[0].Tests, sklearnFailing) || calc.Tonight.Failures[0].Error != verify.FailureTests {
		t.Errorf("calc's failures %+v, want calc-1 arm64 with its report's failing tests", calc.Tonight.Failures)
	}
	if !slices.Equal(calc.stepInstances, []string{"fixture__calc-1"}) || !slices.Equal(calc.stepPlatforms, []core.Platform{core.ARM64}) {
		t.Errorf("calc's steps build %v on %v, want calc-1 on arm64", calc.stepInstances, calc.stepPlatforms)
	}
	// Every instance the night builds FROM the arm64 Python env:
	// textutil-1 shares it, the x86-only textutil-2 has none on arm64.
	if want := []string{"fixture__calc-1", "fixture__calc-2", "fixture__textutil-1"}; !slices.Equal(calc.Instances, want) || !slices.Equal(calc.platforms, []core.Platform{core.ARM64}) {
		t.Errorf("calc's repair builds %v on %v, want %v on arm64", calc.Instances, calc.platforms, want)
	}
	if want := []repair.EnvImage{{Platform: core.ARM64, Tonight: py[core.ARM64]}}; !slices.Equal(calc.Envs, want) {
		t.Errorf("calc's envs %+v, want %+v", calc.Envs, want)
	}
	if want := filepath.Join(o.Out, "frozen", "fixture-calc-1.0"); calc.frozen != want {
		t.Errorf("calc's frozen directory %s, want %s", calc.frozen, want)
	}
	if len(text.Tonight.Failures) != 1 || text.Tonight.Failures[0].String() != "fixture__textutil-2 linux/amd64" || text.Tonight.Failures[0].Error != verify.FailureTimeout ||
		len(text.Tonight.Failures[0].Tests) != 0 {
		t.Errorf("textutil's failures %+v, want textutil-2 amd64 timed out", text.Tonight.Failures)
	}
	// textutil's failing env is amd64's: its repair rebuilds every
	// Python instance, on amd64.
	allPy := []string{"fixture__calc-1", "fixture__calc-2", "fixture__textutil-1", "fixture__textutil-2"}
	if !slices.Equal(text.platforms, []core.Platform{core.AMD64}) || !slices.Equal(text.Instances, allPy) {
		t.Errorf("textutil's repair builds %v on %v, want %v on amd64", text.Instances, text.platforms, allPy)
	}

	// A gold result of an id the dataset does not have (a plan of a
	// larger dataset) is skipped, saying so.
	o.Plan = nightPlan(py, ci.ActionBuild, "fixture__gone-1")
	o.Gold = []verify.Result{goldFailure("fixture__gone-1", core.AMD64, verify.FailureTests, "")}
	var log bytes.Buffer
	if cases := o.groupCases(l.Instances, &log); len(cases) != 0 || log.String() != "repair: fixture__gone-1 is not in the dataset: skipped\n" {
		t.Errorf("an id not in the dataset: cases %+v, log %q", cases, log.String())
	}
}

// TestCasesDecidedWithoutRebuild: a failure whose env was reused from an
// earlier night is outside the package lists; one of a night with no env
// stage (an id list) cannot be compared: neither rebuilds anything.
func TestCasesDecidedWithoutRebuild(t *testing.T) {
	py, _ := fixtureEnvKeys(t)
	insts := []core.Instance{{InstanceID: "fixture__calc-1", Repo: "fixture/calc", Version: "1.0"}, {InstanceID: "fixture__textutil-1", Repo: "fixture/textutil", Version: "1.0"}}
	reused := RepairOptions{Plan: nightPlan(py, ci.ActionExisting, "fixture__calc-1"), Gold: []verify.Result{goldFailure("fixture__calc-1", core.AMD64, verify.FailureTests, "")}}
	cases := reused.groupCases(insts, io.Discard)
	if len(cases) != 1 || cases[0].result == nil || cases[0].result.Verdict != repair.VerdictOutside || cases[0].err != "" {
		t.Fatalf("a reused env: cases %+v, want one decided outside", cases)
	}
	if !strings.Contains(cases[0].result.Reason, "not rebuilt tonight") {
		t.Errorf("reason %q", cases[0].result.Reason)
	}
	idList := RepairOptions{Plan: nightPlan(map[core.Platform]string{}, ci.ActionBuild, "fixture__textutil-1"),
		Gold: []verify.Result{goldFailure("fixture__textutil-1", core.ARM64, verify.FailureTests, "")}}
	cases = idList.groupCases(insts, io.Discard)
	if len(cases) != 1 || !strings.Contains(cases[0].err, "the night has no env stage for it (an id list)") {
		t.Fatalf("an id list: cases %+v, want one that cannot be bisected", cases)
	}
}

// TestRepairWithoutRebuilds runs the repair on a night whose regressions
// need no rebuild: calc's env was reused (outside the package lists),
// textutil's night had no env stage. The report says so per case; no
// proposal, no repaired images.
func TestRepairWithoutRebuilds(t *testing.T) {
	py, _ := fixtureEnvKeys(t)
	plan := nightPlan(py, ci.ActionExisting, "fixture__calc-1", "fixture__calc-2")
	ids := nightPlan(map[core.Platform]string{}, ci.ActionBuild, "fixture__textutil-1")
	plan.Instances = append(plan.Instances, ids.Instances...)
	out := filepath.Join(t.TempDir(), "repair")
	var log bytes.Buffer
	o := RepairOptions{
		Build:  BuildOptions{Inputs: fixtureInputs(t), Verify: &GoldCheckOptions{}},
		Plan:   plan,
		Gold:   []verify.Result{goldFailure("fixture__textutil-1", core.AMD64, verify.FailureTests, ""), goldFailure("fixture__calc-2", core.ARM64, verify.FailureTests, ""), goldPass("fixture__calc-1", core.ARM64)},
		Reader: newTestReader(t),
		Night:  "2026-12-02T03:00Z run 42",
		Out:    out,
		Log:    &log,
	}
	rep, err := Repair(context.Background(), o)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), "repair: 2 env(s) broke gold patches that passed last night") {
		t.Errorf("log: %s", log.String())
	}
	if rep.Night != o.Night || rep.Pins != "default" || rep.Proposal != "" || len(rep.Cases) != 2 {
		t.Fatalf("report %+v", rep)
	}
	calc, text := rep.Cases[0], rep.Cases[1]
	if calc.Repo != "fixture/calc" || calc.Result == nil || calc.Result.Verdict != repair.VerdictOutside || calc.Rule != "" || len(calc.Repaired) != 0 {
		t.Errorf("calc: %+v", calc)
	}
	if text.Repo != "fixture/textutil" || text.Result != nil || !strings.Contains(text.Error, "an id list") {
		t.Errorf("textutil: %+v", text)
	}
	raw, err := os.ReadFile(filepath.Join(out, RepairReport))
	if err != nil {
		t.Fatal(err)
	}
	back, err := repair.DecodeReport(raw)
	if err != nil || len(back.Cases) != 2 || back.Cases[0].Result.Verdict != repair.VerdictOutside {
		t.Errorf("report.json read back: %+v, %v", back, err)
	}
	for _, f := range []string{RepairRecords, RepairEnvs} {
		recs, err := core.ReadRecords(filepath.Join(out, f), nil)
		if err != nil || len(recs) != 0 {
			t.Errorf("%s: %d records, %v; want an empty file", f, len(recs), err)
		}
	}
	if md, err := os.ReadFile(filepath.Join(out, RepairMarkdown)); err != nil || !strings.Contains(string(md), "fixture/calc") {
		t.Errorf("report.md: %v\n%s", err, md)
	}
	if _, err := os.Stat(filepath.Join(out, RepairProposal)); !os.IsNotExist(err) {
		t.Errorf("a proposal with no rule: %v", err)
	}
}

// TestRepairRefused: a repair needs gold verification (a step is judged by
// it), a publication reader (last night's documents) and a writable output
// directory.
func TestRepairRefused(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		o    RepairOptions
		want string
	}{
		{RepairOptions{Reader: newTestReader(t), Out: t.TempDir()}, "gold verification options are required"},
		{RepairOptions{Build: BuildOptions{Verify: &GoldCheckOptions{}}, Out: t.TempDir()}, "no publication reader"},
		{RepairOptions{Build: BuildOptions{Verify: &GoldCheckOptions{}}, Reader: newTestReader(t), Out: filepath.Join(file, "repair")}, "repair output"},
		{RepairOptions{Build: BuildOptions{Verify: &GoldCheckOptions{}, Inputs: Inputs{Dataset: filepath.Join(file, "absent.jsonl"), CacheDir: t.TempDir()}}, Reader: newTestReader(t), Out: t.TempDir()}, "absent.jsonl"},
	} {
		if _, err := Repair(context.Background(), tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want one saying %q", err, tc.want)
		}
	}
}

// TestStepOutcome: a step passes when every image of its instances on its
// platforms built and verified; an image a platform does not have (the
// x86-only textutil-2 on arm64) is not asked for; a failed env fails every
// image of its platform with why; a failed gold run gives its failing
// tests; an image that did not build, its build error.
func TestStepOutcome(t *testing.T) {
	runDir := filepath.Join(t.TempDir(), "instances", "verify", "gold", "fixture__calc-1", "arm64")
	upstreamReport(t, runDir)
	img := func(id string, p core.Platform, verified bool, errMsg string) core.Image {
		r := core.Image{Kind: core.KindInstance, InstanceID: id, Platform: p, Status: core.StatusBuilt, Verified: core.Bool(verified),
			Digest: digest.Digest("sha256:" + strings.Repeat("1", 64))}
		if errMsg != "" {
			r.Status, r.Error, r.Digest, r.Verified = core.StatusFailed, errMsg, "", nil
		}
		return r
	}
	ids := []string{"fixture__calc-1", "fixture__textutil-2"}
	all := []core.Image{img("fixture__calc-1", core.AMD64, true, ""), img("fixture__calc-1", core.ARM64, true, ""), img("fixture__textutil-2", core.AMD64, true, "")}
	envRec := core.Image{Kind: core.KindEnv, Key: "sweb.env.fixture.arm64.x:latest", Platform: core.ARM64, Status: core.StatusBuilt}
	planned := map[ci.Key]bool{{InstanceID: "fixture__calc-1", Platform: core.AMD64}: true, {InstanceID: "fixture__calc-1", Platform: core.ARM64}: true,
		{InstanceID: "fixture__textutil-2", Platform: core.AMD64}: true}
	for _, tc := range []struct {
		name     string
		recs     []core.Image
		gold     []verify.Result
		envFail  map[core.Platform]string
		failures []repair.Failure
	}{
		{"all verified", append(slices.Clone(all), envRec), []verify.Result{goldPass("fixture__calc-1", core.AMD64), goldPass("fixture__calc-1", core.ARM64), goldPass("fixture__textutil-2", core.AMD64)}, nil, nil},
		{"gold fails on arm64", []core.Image{all[0], img("fixture__calc-1", core.ARM64, false, ""), all[2]},
			[]verify.Result{goldPass("fixture__calc-1", core.AMD64), goldFailure("fixture__calc-1", core.ARM64, verify.FailureTests, runDir)}, nil,
			[]repair.Failure{{InstanceID: "fixture__calc-1", Platform: core.ARM64, Tests: sklearnFailing, Error: verify.FailureTests}}},
		{"the arm64 env failed", all[:1], nil, map[core.Platform]string{core.ARM64: "env sweb.env.fixture.arm64.x:latest did not build: exit code 1"},
			// textutil-2 is x86-only: no arm64 image planned, so not a failure of the arm64 env.
			[]repair.Failure{{InstanceID: "fixture__calc-1", Platform: core.ARM64, Error: "env sweb.env.fixture.arm64.x:latest did not build: exit code 1"}}},
		{"an image did not build", []core.Image{all[0], img("fixture__calc-1", core.ARM64, false, "process \"/bin/sh -c pip install\" did not complete successfully: exit code: 1"), all[2]}, nil, nil,
			[]repair.Failure{{InstanceID: "fixture__calc-1", Platform: core.ARM64, Error: "process \"/bin/sh -c pip install\" did not complete successfully: exit code: 1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := stepOutcome(ids, core.AllPlatforms(), planned, tc.recs, tc.gold, tc.envFail)
			if out.Pass != (len(tc.failures) == 0) {
				t.Errorf("pass = %v with failures %+v", out.Pass, out.Failures)
			}
			if len(out.Failures) != len(tc.failures) {
				t.Fatalf("failures %+v, want %+v", out.Failures, tc.failures)
			}
			for i, f := range out.Failures {
				w := tc.failures[i]
				if f.InstanceID != w.InstanceID || f.Platform != w.Platform || f.Error != w.Error || !slices.Equal(f.Tests, w.Tests) {
					t.Errorf("failure %d: %+v, want %+v", i, f, w)
				}
			}
		})
	}
}

// TestRepairNames: the names a repair's steps and log lines use.
func TestRepairNames(t *testing.T) {
	for _, tc := range []struct {
		c    repair.Case
		want string
	}{
		{repair.Case{Repo: "fixture/calc", Version: "1.0"}, "fixture-calc-1.0"},
		{repair.Case{Repo: "astropy/astropy", Version: "5.0"}, "astropy-astropy-5.0"},
		{repair.Case{Repo: "scikit-learn/scikit-learn", Version: "0.22"}, "scikit-learn-scikit-learn-0.22"},
	} {
		if got := caseSlug(tc.c); got != tc.want {
			t.Errorf("caseSlug(%s %s) = %q, want %q", tc.c.Repo, tc.c.Version, got, tc.want)
		}
	}
	if got := platformList(core.AllPlatforms()); got != "linux/amd64, linux/arm64" {
		t.Errorf("platformList = %q", got)
	}
	if got := platformList(nil); got != "" {
		t.Errorf("platformList(nil) = %q", got)
	}
	cs := []repair.Change{{Ecosystem: "pypi", Name: "fixdep", From: "1.0", To: "1.1"}, {Ecosystem: "deb", Name: "libssl3", To: "3.0.11-1"}, {Ecosystem: "pypi", Name: "fixaux", From: "1.0"}}
	if got := changeList(cs); got != "pypi/fixdep 1.0 -> 1.1, deb/libssl3 added 3.0.11-1, pypi/fixaux removed 1.0" {
		t.Errorf("changeList = %q", got)
	}
	recs := []core.Image{{InstanceID: "fixture__calc-1", Platform: core.ARM64, Digest: digest.Digest("sha256:" + strings.Repeat("a", 64))}}
	if got := verifiedLabels(recs); len(got) != 1 || got[0] != "fixture__calc-1 linux/arm64 sha256:"+strings.Repeat("a", 64) {
		t.Errorf("verifiedLabels = %v", got)
	}
	a, b := repair.Step{Frozen: true}, repair.Step{Held: cs[:1]}
	if stepID(a) == stepID(b) || stepID(b) != stepID(repair.Step{Held: []repair.Change{cs[0]}}) {
		t.Errorf("step ids: frozen %s, held %s", stepID(a), stepID(b))
	}
}

// TestRepairRecordHelpers: okRecords keeps the successful records pinned by
// digest; targetOf makes one env record a drift target (the key without
// its tag) and refuses a failed or unpushed one; urlPackages are the PyPI
// packages installed from a URL or a directory on either night.
func TestRepairRecordHelpers(t *testing.T) {
	ref := "127.0.0.1:5000/nightly/sweb.env.fixture.x86_64.abc@sha256:" + strings.Repeat("c", 64)
	good := core.Image{Kind: core.KindEnv, Key: "sweb.env.fixture.x86_64.abc:latest", Platform: core.AMD64, Status: core.StatusBuilt, Ref: ref}
	unpushed := good
	unpushed.Ref = "sweb.env.fixture.x86_64.abc:latest"
	failed := good
	failed.Status, failed.Error = core.StatusFailed, "exit code 1"
	if got := okRecords([]core.Image{failed, good, unpushed}); len(got) != 1 || got[0].Ref != ref {
		t.Errorf("okRecords = %+v, want the one pushed success", got)
	}
	tg, err := targetOf(good)
	if err != nil || tg.Kind != "env" || tg.Name != "sweb.env.fixture.x86_64.abc" || tg.Ref != ref || tg.Platform != core.AMD64 {
		t.Errorf("targetOf = %+v, %v", tg, err)
	}
	if _, err := targetOf(failed); err == nil || !strings.Contains(err.Error(), "env sweb.env.fixture.x86_64.abc:latest (linux/amd64): not a successful record") {
		t.Errorf("targetOf(failed): %v", err)
	}
	if _, err := targetOf(unpushed); err == nil || !strings.Contains(err.Error(), "no registry reference pinned by digest") {
		t.Errorf("targetOf(unpushed): %v", err)
	}

	parse := func(freeze string) *sbom.Document {
		ps, err := sbom.Parse(sbom.FormatPipFreeze, []byte(freeze))
		if err != nil {
			t.Fatal(err)
		}
		return &sbom.Document{Packages: ps}
	}
	last := parse("fixdep==1.0\nmylib @ file:///wheels/mylib-1.0-py3-none-any.whl\n# Editable Git install with no remote (calc==1.0.0)\n-e /testbed\n")
	tonight := parse("fixdep==1.1\nmylib==1.1\nother @ https://example.org/other-2.0.tar.gz\n")
	tonight.Packages = append(tonight.Packages, sbom.Package{Ecosystem: sbom.Deb, Name: "libssl3", Version: "3.0.11-1", URL: "http://deb.debian.org/x.deb"})
	got := urlPackages(last, tonight)
	for _, k := range []string{"pypi/mylib", "pypi/other", "pypi/calc"} {
		if !got[k] {
			t.Errorf("urlPackages: %s missing from %v", k, got)
		}
	}
	for _, k := range []string{"pypi/fixdep", "deb/libssl3"} {
		if got[k] {
			t.Errorf("urlPackages: %s is not installed from a URL: %v", k, got)
		}
	}
}

// TestReadGold: tonight's gold results are every verify/summary.json under
// the shards' directories (or named), in name order, with each run
// directory found where the download put it when the summary's path no
// longer exists; a missing path or a bad summary is an error naming it.
func TestReadGold(t *testing.T) {
	root := t.TempDir()
	write := func(rel string, s verify.Summary) string {
		t.Helper()
		p := filepath.Join(root, rel)
		raw, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The arm64 shard ran in /home/runner/work/...; its artifact was
	// downloaded under root/shard-arm64-0 with its run directories.
	moved := filepath.Join(root, "shard-arm64-0", "runs", "verify", "gold", "fixture__calc-1", "arm64")
	if err := os.MkdirAll(moved, 0o755); err != nil {
		t.Fatal(err)
	}
	runnerDir := "/home/runner/work/swebuild/swebuild/runs/verify/gold/fixture__calc-1/arm64"
	write("shard-arm64-0/runs/verify/summary.json", verify.Summary{Results: []verify.Result{
		{InstanceID: "fixture__calc-1", Platform: core.ARM64, Mode: verify.ModeGold, Failure: verify.FailureTests, Dir: runnerDir, Runs: []verify.Attempt{{Run: 1, Dir: runnerDir}}},
	}})
	stays := filepath.Join(root, "local-run")
	if err := os.MkdirAll(stays, 0o755); err != nil {
		t.Fatal(err)
	}
	gone := "/home/runner/work/elsewhere/fixture__calc-2/x86_64"
	write("shard-amd64-0/runs/verify/summary.json", verify.Summary{Results: []verify.Result{
		{InstanceID: "fixture__calc-1", Platform: core.AMD64, Mode: verify.ModeGold, Resolved: true, Dir: stays},
		{InstanceID: "fixture__calc-2", Platform: core.AMD64, Mode: verify.ModeGold, Resolved: true, Dir: gone},
	}})
	// Not a verification summary: not under a verify directory.
	write("shard-amd64-0/runs/summary.json", verify.Summary{Results: []verify.Result{{InstanceID: "x", Platform: core.AMD64, Mode: verify.ModeGold}}})
	named := write("extra/gold.json", verify.Summary{Results: []verify.Result{{InstanceID: "fixture__semver-1", Platform: core.AMD64, Mode: verify.ModeGold, Resolved: true}}})

	got, err := ReadGold([]string{filepath.Join(root, "shard-arm64-0"), filepath.Join(root, "shard-amd64-0"), named})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range got {
		keys = append(keys, r.InstanceID+" "+r.Platform.String())
	}
	want := []string{"fixture__semver-1 linux/amd64", "fixture__calc-1 linux/amd64", "fixture__calc-2 linux/amd64", "fixture__calc-1 linux/arm64"}
	if !slices.Equal(keys, want) {
		t.Fatalf("results %v, want %v (files in name order)", keys, want)
	}
	if got[1].Dir != stays || got[2].Dir != gone {
		t.Errorf("dirs that exist or cannot be found moved: %q, %q", got[1].Dir, got[2].Dir)
	}
	if got[3].Dir != moved || len(got[3].Runs) != 1 || got[3].Runs[0].Dir != moved {
		t.Errorf("the downloaded shard's run directory: %q (runs %+v), want %s", got[3].Dir, got[3].Runs, moved)
	}

	if _, err := ReadGold([]string{filepath.Join(root, "absent")}); err == nil || !strings.Contains(err.Error(), "reading gold results") || !strings.Contains(err.Error(), "absent") {
		t.Errorf("a missing path: %v", err)
	}
	bad := filepath.Join(root, "bad", "verify", "summary.json")
	if err := os.MkdirAll(filepath.Dir(bad), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"results":[{"platform":"linux/amd64","mode":"gold"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadGold([]string{filepath.Join(root, "bad")}); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "results[0]") {
		t.Errorf("a summary without an instance id: %v", err)
	}
}

// envNight is one env image of the fixture's Python env pushed to the
// test registry with its document (calc 1.0 on p, fixdep at version), and
// its env record.
func envNight(t *testing.T, r *publication.Reader, host, key string, p core.Platform, repo, version, when string) core.Image {
	t.Helper()
	img := pushWithDoc(t, r, host+"/nightly/"+strings.TrimSuffix(key, ":latest"), "", envDoc(t, repo, p, "fixdep=="+version))
	return core.Image{Kind: core.KindEnv, Key: key, Platform: p, Ref: img.ref, Digest: digest.Digest(img.digest), Status: core.StatusBuilt, Time: when}
}

// TestDiffCase: a case's changes are the drift between last night's env
// document and tonight's, read from the registry: by the same key, or,
// when last night's build of that key failed (tonight's env script
// differs), last night's env of the same repo, version and platform, the
// latest first. Last night's documents are saved for the frozen step.
func TestDiffCase(t *testing.T) {
	ctx := context.Background()
	reg := regtest.InProcess(t)
	r := newTestReader(t)
	py, js := fixtureEnvKeys(t)
	key := py[core.AMD64]
	tonight := envNight(t, r, reg.Host, key, core.AMD64, "fixture/calc", "1.1", "2026-12-02T03:10:00Z")
	sameKey := envNight(t, r, reg.Host, key, core.AMD64, "fixture/calc", "1.0", "2026-12-01T03:10:00Z")
	oldKey := "sweb.env.fixture.x86_64.0123456789abcdef012345:latest"
	byRepo := envNight(t, r, reg.Host, oldKey, core.AMD64, "fixture/calc", "1.0", "2026-12-01T03:05:00Z")
	semver := envNight(t, r, reg.Host, js[core.AMD64], core.AMD64, "fixture/semver", "9.9", "2026-12-01T03:20:00Z")
	failedSameKey := core.Image{Kind: core.KindEnv, Key: key, Platform: core.AMD64, Status: core.StatusFailed, Error: "exit code 1", Time: "2026-12-01T03:30:00Z"}

	newCase := func(out string) *repairCase {
		return &repairCase{Case: repair.Case{Repo: "fixture/calc", Version: "1.0", Envs: []repair.EnvImage{{Platform: core.AMD64, Tonight: key}}},
			frozen: filepath.Join(out, "frozen", "fixture-calc-1.0")}
	}
	name := strings.TrimSuffix(key, ":latest")
	for _, tc := range []struct {
		name   string
		before []core.Image
		last   core.Image
	}{
		{"the same key", []core.Image{sameKey}, sameKey},
		{"the same repo and version", []core.Image{byRepo, semver, failedSameKey}, byRepo},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			o := RepairOptions{Reader: r, Out: out, EnvsTonight: []core.Image{tonight}, EnvsBefore: tc.before}
			c := newCase(out)
			if err := o.diffCase(ctx, c); err != nil {
				t.Fatal(err)
			}
			want := repair.Change{Ecosystem: "pypi", Name: "fixdep", From: "1.0", To: "1.1", Platforms: []core.Platform{core.AMD64}}
			if len(c.Changes) != 1 || c.Changes[0].String() != want.String() || !slices.Equal(c.Changes[0].Platforms, want.Platforms) || c.Changes[0].URL {
				t.Errorf("changes %+v, want %+v", c.Changes, want)
			}
			if w := "pypi/fixdep 1.0 -> 1.1 (env " + name + " linux/amd64)"; !slices.Equal(c.Drift, []string{w}) {
				t.Errorf("drift %q, want %q", c.Drift, w)
			}
			e := c.Envs[0]
			if e.TonightAt != tonight.Ref || e.LastAt != tc.last.Ref || e.LastNight != strings.TrimSuffix(tc.last.Key, ":latest") {
				t.Errorf("env %+v, want tonight at %s, last night %s at %s", e, tonight.Ref, tc.last.Key, tc.last.Ref)
			}
			saved, _ := filepath.Glob(filepath.Join(c.frozen, "*.cdx.json"))
			if want := filepath.Join(c.frozen, "env."+strings.TrimSuffix(tc.last.Key, ":latest")+".linux-amd64.cdx.json"); len(saved) != 1 || saved[0] != want {
				t.Errorf("saved %v, want %s", saved, want)
			}
		})
	}
	t.Run("no record of tonight", func(t *testing.T) {
		o := RepairOptions{Reader: r, Out: t.TempDir(), EnvsBefore: []core.Image{sameKey}}
		err := o.diffCase(ctx, newCase(o.Out))
		if err == nil || err.Error() != "env "+key+" (linux/amd64): no record of tonight's build" {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("nothing of last night", func(t *testing.T) {
		o := RepairOptions{Reader: r, Out: t.TempDir(), EnvsTonight: []core.Image{tonight}, EnvsBefore: []core.Image{semver, failedSameKey}}
		err := o.diffCase(ctx, newCase(o.Out))
		if err == nil || !strings.Contains(err.Error(), "no environment document of last night's env image and tonight's to compare") {
			t.Errorf("err = %v", err)
		}
	})
	// An image the registry no longer has has no document either.
	t.Run("last night's image gone", func(t *testing.T) {
		gone := sameKey
		gone.Ref = reg.Host + "/nightly/" + name + "@sha256:" + strings.Repeat("0", 64)
		o := RepairOptions{Reader: r, Out: t.TempDir(), EnvsTonight: []core.Image{tonight}, EnvsBefore: []core.Image{gone}}
		err := o.diffCase(ctx, newCase(o.Out))
		if err == nil || !strings.Contains(err.Error(), "no environment document of last night's env image and tonight's to compare") {
			t.Errorf("err = %v", err)
		}
	})
}

// repairNight is a night of the fixture where calc-1's gold failed on
// amd64 after the Python env moved from fixdep 1.0 to 1.1, with last
// night's and tonight's env images in the test registry; steps cannot
// build (the builder refuses progress "fancy"), so everything up to the
// first rebuild runs for real.
func repairNight(t *testing.T) RepairOptions {
	t.Helper()
	reg := regtest.InProcess(t)
	r := newTestReader(t)
	py, _ := fixtureEnvKeys(t)
	key := py[core.AMD64]
	runDir := filepath.Join(t.TempDir(), "verify", "gold", "fixture__calc-1", "x86_64")
	upstreamReport(t, runDir)
	return RepairOptions{
		Build: BuildOptions{Inputs: fixtureInputs(t), Verify: &GoldCheckOptions{}, ContextDirs: []string{fixtureContextDir(t)},
			Builder: builder.Options{Progress: "fancy"}},
		Plan:        nightPlan(py, ci.ActionBuild, "fixture__calc-1", "fixture__calc-2", "fixture__textutil-1", "fixture__textutil-2"),
		Gold:        []verify.Result{goldFailure("fixture__calc-1", core.AMD64, verify.FailureTests, runDir), goldPass("fixture__calc-2", core.AMD64)},
		EnvsTonight: []core.Image{envNight(t, r, reg.Host, key, core.AMD64, "fixture/calc", "1.1", "2026-12-02T03:10:00Z")},
		EnvsBefore:  []core.Image{envNight(t, r, reg.Host, key, core.AMD64, "fixture/calc", "1.0", "2026-12-01T03:10:00Z")},
		Reader:      r,
		Night:       "2026-12-02 run 7",
		Out:         filepath.Join(t.TempDir(), "repair"),
	}
}

// TestRepairStepFails: the case is found, diffed and bisected; its first
// step (last night's captured set) cannot be built, so the case says why
// and nothing is proposed or published.
func TestRepairStepFails(t *testing.T) {
	o := repairNight(t)
	var log bytes.Buffer
	o.Log = &log
	rep, err := Repair(context.Background(), o)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if len(rep.Cases) != 1 {
		t.Fatalf("cases %+v\n%s", rep.Cases, log.String())
	}
	c := rep.Cases[0]
	if c.Repo != "fixture/calc" || len(c.Changes) != 1 || c.Changes[0].String() != "pypi/fixdep 1.0 -> 1.1" || c.Rule != "" || len(c.Repaired) != 0 {
		t.Errorf("case %+v", c)
	}
	if !strings.Contains(c.Error, "env stage on linux/amd64") || !strings.Contains(c.Error, `progress mode "fancy"`) {
		t.Errorf("case error %q, want the step's env stage failure", c.Error)
	}
	for _, w := range []string{
		"repair: fixture/calc 1.0: 1 changed package(s) (pypi/fixdep 1.0 -> 1.1); bisecting on linux/amd64\n",
		"repair: fixture/calc 1.0: step 01: last night's captured set (frozen), fixture__calc-1 on linux/amd64 (pins default)\n",
	} {
		if !strings.Contains(log.String(), w) {
			t.Errorf("log lacks %q:\n%s", w, log.String())
		}
	}
	if st, err := os.Stat(filepath.Join(o.Out, "steps", "fixture-calc-1.0", "01")); err != nil || !st.IsDir() {
		t.Errorf("the step's directory: %v", err)
	}
	if rep.Proposal != "" {
		t.Errorf("proposal %s", rep.Proposal)
	}
}

// TestStepPins: a step holding packages back builds with the default pins
// and a pins file of its own: the hold rule of the case's repo and
// version, the packages at last night's versions on their platforms, its
// reason naming the night and its evidence the step.
func TestStepPins(t *testing.T) {
	o := repairNight(t)
	py, _ := fixtureEnvKeys(t)
	c := &repairCase{Case: repair.Case{Repo: "fixture/calc", Version: "1.0", Envs: []repair.EnvImage{{Platform: core.AMD64, Tonight: py[core.AMD64]}}},
		stepInstances: []string{"fixture__calc-1"}, stepPlatforms: []core.Platform{core.AMD64}}
	var log bytes.Buffer
	so := &stepOracle{o: o, c: c, log: &log, records: map[string][]core.Image{}}
	held := repair.Step{Held: []repair.Change{{Ecosystem: "pypi", Name: "fixdep", From: "1.0", To: "1.1", Platforms: []core.Platform{core.AMD64}}}}
	_, err := so.Try(context.Background(), held)
	if err == nil || !strings.Contains(err.Error(), `progress mode "fancy"`) {
		t.Errorf("err = %v, want the builder's refusal", err)
	}
	path := filepath.Join(o.Out, "steps", "fixture-calc-1.0", "01", "pins.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := pins.DecodeFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Rules) != 1 {
		t.Fatalf("rules %+v", f.Rules)
	}
	h := f.Rules[0].HoldSpec
	if h.ID != "repair-fixture-calc-1.0-fixdep" || h.Repo != "fixture/calc" || h.Version != "1.0" || len(h.Hold) != 1 ||
		h.Hold[0].Ecosystem != "pypi" || h.Hold[0].Name != "fixdep" || h.Hold[0].Version != "1.0" || !slices.Equal(h.Hold[0].Platforms, []core.Platform{core.AMD64}) ||
		h.Reason != "a bisection step of night 2026-12-02 run 7" || h.Evidence != "holding back pypi/fixdep 1.0" {
		t.Errorf("step rule %+v", h)
	}
	if !strings.Contains(log.String(), "(pins default,"+path+")") {
		t.Errorf("log %q, want the step's pins", log.String())
	}
	if _, ok := so.records[stepID(held)]; !ok || so.n != 1 {
		t.Errorf("the step was not recorded (%d tries)", so.n)
	}
}
