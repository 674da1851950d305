package ci

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/pins"
	"github.com/swebuild/swebuild/repair"
)

// scenarioRun is what scripts/nightly-local.sh --scenario left: its
// scenario.env, night 2's run directory and the state.
type scenarioRun struct {
	env           map[string]string
	night2, state string
	report        *repair.Report
	merge         MergeReport
	ledger        []core.Image
	output        string
}

// runScenario runs scripts/nightly-local.sh --scenario name on the stack
// into a temporary directory and reads what it left.
func runScenario(t *testing.T, name string) scenarioRun {
	t.Helper()
	if testing.Short() {
		t.Skip("thorough tier: two nights of the fixture on the stack (not under -short)")
	}
	stacktest.Require(t)
	stacktest.Rootfs(t)
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "nightly-local.sh"), "--scenario", name)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "SCENARIO_DIR="+dir)
	begin := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("nightly-local.sh --scenario %s (%v):\n%s", name, time.Since(begin).Round(time.Second), tail(string(out), 6000))
	if err != nil {
		t.Fatalf("nightly-local.sh --scenario %s: %v", name, err)
	}
	runs, _ := filepath.Glob(filepath.Join(dir, name+"-*", "scenario.env"))
	if len(runs) != 1 {
		t.Fatalf("scenario.env files %v, want one", runs)
	}
	s := scenarioRun{env: readEnvFile(t, runs[0]), output: string(out)}
	s.night2, s.state = s.env["night2_run"], s.env["state"]
	raw, err := os.ReadFile(filepath.Join(s.night2, "repair", "report.json"))
	if err != nil {
		t.Fatalf("night 2's repair report: %v\nnight 2 log:\n%s", err, tailFile(filepath.Join(filepath.Dir(runs[0]), "night2.log")))
	}
	if s.report, err = repair.DecodeReport(raw); err != nil {
		t.Fatal(err)
	}
	if s.merge, err = ReadReport(filepath.Join(s.night2, "merge.json")); err != nil {
		t.Fatal(err)
	}
	if s.ledger, err = ReadLedger(context.Background(), filepath.Join(s.state, "ledger.jsonl"), nil); err != nil {
		t.Fatal(err)
	}
	return s
}

func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			out[k] = v
		}
	}
	return out
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func tailFile(path string) string {
	b, _ := os.ReadFile(path)
	return tail(string(b), 4000)
}

func outcome(r MergeReport, id string) string {
	for _, o := range r.Outcomes {
		if o.InstanceID == id {
			return o.Status
		}
	}
	return ""
}

func heldNames(s repair.Step) string {
	if s.Frozen {
		return "frozen"
	}
	var n []string
	for _, c := range s.Held {
		n = append(n, c.Name)
	}
	return strings.Join(n, ",")
}

// TestNightlyScenarioBreakingDependency is issue 30's scenario, run as
// documented: scripts/nightly-local.sh --scenario breaking-dependency. Night
// 1 publishes the fixture with calc's env on fixaux, fixdep, fixfmt, fixlog
// 1.0; night 2, after 1.1 of each (fixdep 1.1 breaks calc's tests), rebuilds
// calc's env, its gold patches fail, and the repair names pypi/fixdep 1.0 ->
// 1.1 in 5 env rebuilds (last night's set; the first half of the sorted
// changes applied, then the first; fixdep alone; fixdep held back), verifies
// and publishes the 4 calc images built with fixdep held back, and writes
// the proposal; with the proposal applied (--pins default,FILE) the next
// night's plan builds nothing: every image at the spec key the repaired
// night published.
func TestNightlyScenarioBreakingDependency(t *testing.T) {
	s := runScenario(t, "breaking-dependency")
	if s.env["night1_exit"] != "0" || s.env["night2_exit"] != "0" {
		t.Errorf("night exits %s, %s; want both 0 (night 2 repaired)", s.env["night1_exit"], s.env["night2_exit"])
	}
	if len(s.report.Cases) != 1 {
		t.Fatalf("repair cases %+v, want calc's env only", s.report.Cases)
	}
	c := s.report.Cases[0]
	if c.Name() != "fixture/calc 1.0" || c.Error != "" || c.Result == nil {
		t.Fatalf("case %s: error %q, result %v", c.Name(), c.Error, c.Result)
	}
	r := c.Result
	if r.Verdict != repair.VerdictCulprit || len(r.Culprits) != 1 || r.Culprits[0].String() != "pypi/fixdep 1.0 -> 1.1" {
		t.Errorf("verdict %s culprits %v (%s), want pypi/fixdep 1.0 -> 1.1", r.Verdict, r.Culprits, r.Reason)
	}
	var held []string
	var passes []bool
	for _, st := range r.Steps {
		held = append(held, heldNames(st.Step))
		passes = append(passes, st.Outcome.Pass)
	}
	if want := []string{"frozen", "fixfmt,fixlog", "fixdep,fixfmt,fixlog", "fixaux,fixfmt,fixlog", "fixdep"}; r.Rebuilds != 5 || !slices.Equal(held, want) ||
		!slices.Equal(passes, []bool{true, false, true, false, true}) {
		t.Errorf("%d env rebuilds, held %q passing %v; want 5, %q, pass fail pass fail pass", r.Rebuilds, held, passes, want)
	}
	if len(c.Changes) != 4 || len(c.Drift) != 4 {
		t.Errorf("changes %v drift %q: want fixaux, fixdep, fixfmt, fixlog 1.0 -> 1.1", c.Changes, c.Drift)
	}
	if len(c.Tonight.Failures) != 4 {
		t.Errorf("tonight's failures %+v, want calc-1 and calc-2 on both platforms", c.Tonight.Failures)
	}
	for _, f := range c.Tonight.Failures {
		if len(f.Tests) == 0 {
			t.Errorf("tonight's failure %s names no failing test", f)
		}
	}
	rule := "repair-fixture-calc-1.0-fixdep"
	repaired := map[Key]core.Image{}
	for _, im := range c.Repaired {
		if !im.IsVerified() || !slices.Contains(im.Pins, rule) || im.Ref == "" {
			t.Errorf("repaired image %s %s: verified %v, pins %v, ref %q", im.InstanceID, im.Platform, im.IsVerified(), im.Pins, im.Ref)
		}
		repaired[KeyOf(im)] = im
	}
	if c.Rule != rule || len(repaired) != 4 {
		t.Errorf("rule %q, %d images repaired; want %s and 4", c.Rule, len(repaired), rule)
	}

	// The proposal, as --pins takes it.
	prop := s.env["proposal"]
	f, rules, err := pins.ReadFile(prop)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 1 || rules[0].ID != rule || len(f.Rules[0].Hold) != 1 || f.Rules[0].Hold[0].String() != "pypi/fixdep==1.0 (linux/amd64, linux/arm64)" {
		t.Errorf("proposal rules %+v", f.Rules)
	}
	var ev repair.Evidence
	if err := json.Unmarshal(f.Rules[0].Record, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Night == "" || len(ev.Instances) != 4 || len(ev.Changes) != 1 || len(ev.Drift) != 4 || ev.Rebuilds != 5 || len(ev.Verified) != 4 {
		t.Errorf("evidence %+v", ev)
	}

	// Night 2 published the repaired images: the merge indexed calc from
	// the repair's records, the ledger's last word on them is those
	// digests.
	for _, id := range []string{"fixture__calc-1", "fixture__calc-2"} {
		if st := outcome(s.merge, id); st != StatusIndexed {
			t.Errorf("night 2 merge: %s %s, want indexed", id, st)
		}
	}
	// semver's images stayed as night 1 left them. textutil shares calc's
	// profile, whose env Dockerfile COPYs the wheels directory: night 2's
	// wheels make its env (and instances) other images, rebuilt and
	// published with the cause "spec"; none of its packages changed.
	if st := outcome(s.merge, "fixture__semver-1"); st != StatusUnchanged {
		t.Errorf("night 2 merge: fixture__semver-1 %s, want unchanged", st)
	}
	if st := outcome(s.merge, "fixture__textutil-1"); st != StatusIndexed {
		t.Errorf("night 2 merge: fixture__textutil-1 %s, want indexed (its env's wheels directory changed)", st)
	}
	latest := Latest(s.ledger)
	for k, im := range repaired {
		if p := latest[k]; p.Digest != im.Digest || p.Status != core.StatusPublished || !slices.Contains(p.Pins, rule) {
			t.Errorf("published %s %s: digest %s pins %v, want the repaired %s with the rule", k.InstanceID, k.Platform, p.Digest, p.Pins, im.Digest)
		}
	}

	// The drift report says why calc's digests changed.
	md, err := os.ReadFile(filepath.Join(s.night2, "drift.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "**Digests changed: 9** (4 repair, 5 spec).") || strings.Contains(string(md), "unrecorded") ||
		!strings.Contains(string(md), "+"+rule) {
		t.Errorf("night 2 drift report:\n%s", md)
	}
	summary, err := os.ReadFile(filepath.Join(s.night2, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(summary), "### Repair") || !strings.Contains(string(summary), "**repaired**: pypi/fixdep 1.0 -> 1.1 breaks the gold patches") {
		t.Errorf("night 2 summary:\n%s", summary)
	}

	// Applying the proposal: nothing to build, every image at the spec
	// key night 2 published (ci matrix skips an image only at its spec
	// key), calc's at the repaired digests.
	if s.env["applied_to_build"] != "0" || s.env["applied_envs_to_build"] != "0" {
		t.Errorf("with the proposal applied: %s images and %s envs to build, want 0", s.env["applied_to_build"], s.env["applied_envs_to_build"])
	}
	applied, err := ReadPlan(filepath.Join(filepath.Dir(s.state), "applied-plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range applied.Instances {
		for _, tg := range in.Targets {
			if im, ok := repaired[Key{in.InstanceID, tg.Platform}]; ok && (tg.Action != ActionExisting || tg.Digest != im.Digest.String() || tg.SpecKey != im.SpecKey) {
				t.Errorf("applied plan: %s %s %s %s (key %s), want the repaired %s at %s", in.InstanceID, tg.Platform, tg.Action, tg.Digest, tg.SpecKey, im.Digest, im.SpecKey)
			}
		}
	}
	t.Logf("night 1 %s s, night 2 %s s (the repair %.0f s, %d env rebuilds), repository %s, proposal %s",
		s.env["night1_seconds"], s.env["night2_seconds"], s.report.Seconds, r.Rebuilds, s.env["repository"], prop)
}

// TestNightlyScenarioBreakingTogether: night 2's fixdep 1.1 and fixaux 1.1
// break calc's tests only together. The repair says no single package
// explains it, names the two, writes no proposal, and the night keeps last
// night's calc images (regressed, not published).
func TestNightlyScenarioBreakingTogether(t *testing.T) {
	s := runScenario(t, "breaking-together")
	if s.env["night1_exit"] != "0" || s.env["night2_exit"] == "0" {
		t.Errorf("night exits %s, %s; want 0 then a failure (calc regressed)", s.env["night1_exit"], s.env["night2_exit"])
	}
	if len(s.report.Cases) != 1 || s.report.Cases[0].Result == nil {
		t.Fatalf("repair cases %+v", s.report.Cases)
	}
	c := s.report.Cases[0]
	r := c.Result
	var together []string
	for _, ch := range r.Together {
		together = append(together, ch.String())
	}
	if r.Verdict != repair.VerdictInteraction || !slices.Equal(together, []string{"pypi/fixaux 1.0 -> 1.1", "pypi/fixdep 1.0 -> 1.1"}) ||
		!strings.Contains(r.Reason, "no single package explains it") {
		t.Errorf("verdict %s together %q (%s)", r.Verdict, together, r.Reason)
	}
	var held []string
	for _, st := range r.Steps {
		held = append(held, heldNames(st.Step))
	}
	if want := []string{"frozen", "fixfmt,fixlog", "fixdep,fixfmt,fixlog", "fixaux,fixfmt,fixlog"}; r.Rebuilds != 4 || !slices.Equal(held, want) {
		t.Errorf("%d env rebuilds, held %q; want 4, %q", r.Rebuilds, held, want)
	}
	if s.report.Proposal != "" || s.env["proposal"] != "" || len(c.Repaired) != 0 || c.Rule != "" {
		t.Errorf("a proposal or repaired images for an interaction: %q %v", s.report.Proposal, c.Repaired)
	}
	for _, id := range []string{"fixture__calc-1", "fixture__calc-2"} {
		if st := outcome(s.merge, id); st != StatusRegressed {
			t.Errorf("night 2 merge: %s %s, want regressed", id, st)
		}
	}
	// Last night's images kept: no calc image was published on night 2.
	n2, err := time.Parse("run-20060102T150405Z", filepath.Base(s.night2))
	if err != nil {
		t.Fatal(err)
	}
	published := 0
	for _, im := range s.ledger {
		if !strings.HasPrefix(im.InstanceID, "fixture__calc-") || im.Status != core.StatusPublished {
			continue
		}
		published++
		if when, err := time.Parse(time.RFC3339Nano, im.Time); err != nil || !when.Before(n2) {
			t.Errorf("calc published on night 2 (%s): %s %s %s", im.Time, im.InstanceID, im.Platform, im.Digest)
		}
	}
	if published == 0 {
		t.Error("no calc image published on night 1")
	}
	t.Logf("night 1 %s s, night 2 %s s (the repair %.0f s, %d env rebuilds): %s", s.env["night1_seconds"], s.env["night2_seconds"], s.report.Seconds, r.Rebuilds, r.Reason)
}
