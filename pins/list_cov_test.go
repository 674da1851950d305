package pins

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
)

// countInstances are real instances of the reference datasets
// (../shared/swebench-reference/datasets), one per case the rules tell
// apart, and one whose repo the tables do not know.
var countInstances = []core.Instance{
	// SWE-bench_Lite test, sphinx 5.0, no bundled environment.yml (spec-built
	// env): Pygments pinned on both arches; the Python base holds the conda
	// channel line on both.
	{InstanceID: "sphinx-doc__sphinx-10325", Repo: "sphinx-doc/sphinx", Version: "5.0"},
	// SWE-bench_Verified, django 3.0: conda line on both, and its bundled
	// environment.yml (data/envcache) lists _libgcc_mutex=0.1=main, which
	// the arm64 rule drops: arm64 only.
	{InstanceID: "django__django-11099", Repo: "django/django", Version: "3.0"},
	// SWE-bench_Multimodal dev, p5.js 1.0 (JavaScript, no variant): the JS
	// base's Chrome apt source and the JS env's pnpm download on arm64;
	// its install runs node_modules/puppeteer/install.js: x86-only.
	{InstanceID: "processing__p5.js-4561", Repo: "processing/p5.js", Version: "1.0"},
	// SWE-bench_Multilingual test, gson (Java): mvnd download on arm64.
	{InstanceID: "google__gson-1014", Repo: "google/gson", Version: "1014"},
	// Not in the tables.
	{InstanceID: "nobody__nothing-1", Repo: "nobody/nothing", Version: "1.0"},
}

// TestCount: how many instances each rule touches, worked out by hand
// from upstream v4.1.0's spec tables and templates (specs.json under
// ../shared/swebench-reference/upstream-v4.1.0) for countInstances.
func TestCount(t *testing.T) {
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	counts, unresolved := Count(tables, countInstances)
	if unresolved != 1 {
		t.Errorf("unresolved = %d, want 1 (nobody/nothing)", unresolved)
	}
	type want struct{ instances, amd64, arm64 int }
	wantPins := map[string]want{
		IDSphinxPygments: {1, 1, 1},
		IDCondaChannels:  {2, 2, 2},
		IDArm64EnvYML:    {1, 0, 1},
		IDChromeApt:      {1, 0, 1},
		IDPnpmArm64:      {1, 0, 1},
		IDMavenForMvnd:   {1, 0, 1},
	}
	wantX86 := map[string]int{spec.RuleNodeWithoutArm64: 0, spec.RulePuppeteerChromium: 1}
	order := []string{IDSphinxPygments, IDCondaChannels, IDArm64EnvYML, IDChromeApt, IDPnpmArm64, IDMavenForMvnd,
		spec.RuleNodeWithoutArm64, spec.RulePuppeteerChromium}
	if len(counts) != len(order) {
		t.Fatalf("%d counts, want %d: %+v", len(counts), len(order), counts)
	}
	for i, c := range counts {
		if c.Rule != order[i] {
			t.Errorf("counts[%d] is %s, want %s", i, c.Rule, order[i])
			continue
		}
		if w, ok := wantPins[c.Rule]; ok {
			if c.Instances != w.instances || len(c.ByPlatform) != 2 || c.ByPlatform["linux/amd64"] != w.amd64 || c.ByPlatform["linux/arm64"] != w.arm64 {
				t.Errorf("%s: %d instances %v, want %d (amd64 %d, arm64 %d)", c.Rule, c.Instances, c.ByPlatform, w.instances, w.amd64, w.arm64)
			}
			continue
		}
		if c.Instances != wantX86[c.Rule] || c.ByPlatform != nil {
			t.Errorf("%s: %d instances %v, want %d and no per-platform counts", c.Rule, c.Instances, c.ByPlatform, wantX86[c.Rule])
		}
	}
}

// TestListText: `swebuild pins list` says how to turn each rule off (a
// built-in one by id, a file's by leaving the file out), how to lift an
// x86-only rule, and the instances each touches per dataset.
func TestListText(t *testing.T) {
	hold, err := HoldRule(HoldSpec{ID: "repair-fixture-calc-1.0-fixdep", Repo: "fixture/calc", Version: "1.0",
		Hold: []Hold{{Ecosystem: "pypi", Name: "fixdep", Version: "1.0"}}, Reason: "fixdep 1.1 breaks calc", Evidence: "night 2026-12-03"})
	if err != nil {
		t.Fatal(err)
	}
	counts := []DatasetCounts{{Dataset: "SWE-bench_Lite", Instances: 300, Unresolved: 2, Touched: []Touched{
		{Rule: IDSphinxPygments, Instances: 16, ByPlatform: map[string]int{"linux/amd64": 16, "linux/arm64": 15}},
		{Rule: spec.RulePuppeteerChromium, Instances: 3},
	}}}
	l := NewList([]Rule{hold}, counts)
	var b bytes.Buffer
	l.WriteText(&b)
	out := b.String()
	for _, want := range []string{
		"id:       " + IDSphinxPygments + "\nmatch:    repo sphinx-doc/sphinx, every version, both arches\n",
		"turn off: --pins default,-" + IDSphinxPygments + "\ntouches:  SWE-bench_Lite: 16 of 300 instances (x86_64 16, arm64 15)\n",
		"turn off: --pins default,-" + IDMavenForMvnd + "\n",
		"id:       repair-fixture-calc-1.0-fixdep\n",
		"reason:   fixdep 1.1 breaks calc\nevidence: night 2026-12-03\nturn off: a pins file's rule: leave the file out of --pins (on with --pins default,FILE)\n",
		"\nx86-only rules (instances matching one get no linux/arm64 image; USE_X86 and a --specs file's x86_only list come first):\n",
		"id:       " + spec.RulePuppeteerChromium + "\n",
		"lift:     --pins default,-" + spec.RulePuppeteerChromium + " (plans and builds their linux/arm64 images, to try them)\ntouches:  SWE-bench_Lite: 3 of 300 instances\n",
		"\narm64 rules for flat Dockerfiles (",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("pins list text lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "touches:"); n != 2 {
		t.Errorf("%d touches lines, want 2 (the rules counted)", n)
	}
	if strings.Contains(out, "turn off: --pins default,-repair-") {
		t.Error("a file's rule is offered as a built-in one to turn off")
	}
	// Each pin rule, x86-only rule and flat rule is listed once.
	for _, r := range l.Pins {
		if n := strings.Count(out, "id:       "+r.ID+"\n"); n != 1 {
			t.Errorf("pin rule %s listed %d times", r.ID, n)
		}
	}
	for _, r := range l.Flat {
		if !strings.Contains(out, "id:       "+r.ID) {
			t.Errorf("flat rule %s not listed", r.ID)
		}
	}
}

// TestListJSON: the JSON form holds the rules (built-in, then the file's),
// the x86-only and flat rules and the counts under their names.
func TestListJSON(t *testing.T) {
	hold, err := HoldRule(HoldSpec{ID: "repair-x-1-y", Repo: "x/x", Version: "1", Hold: []Hold{{Ecosystem: "pypi", Name: "y", Version: "2"}}, Reason: "r", Evidence: "e"})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := NewList([]Rule{hold}, []DatasetCounts{{Dataset: "d", Instances: 5, Touched: []Touched{{Rule: IDCondaChannels, Instances: 5}}}}).WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Pins []struct {
			ID string `json:"id"`
		} `json:"pins"`
		X86Only []struct {
			ID string `json:"id"`
		} `json:"x86_only_rules"`
		Flat []struct {
			ID      string `json:"id"`
			X86Only bool   `json:"x86_only"`
		} `json:"flat_arm64_rules"`
		Counts []DatasetCounts `json:"counts"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v:\n%s", err, b.String())
	}
	var ids []string
	for _, p := range got.Pins {
		ids = append(ids, p.ID)
	}
	want := []string{IDSphinxPygments, IDCondaChannels, IDArm64EnvYML, IDChromeApt, IDPnpmArm64, IDMavenForMvnd, "repair-x-1-y"}
	if strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Errorf("pins = %v, want %v", ids, want)
	}
	if len(got.X86Only) != 2 || got.X86Only[0].ID != spec.RuleNodeWithoutArm64 || got.X86Only[1].ID != spec.RulePuppeteerChromium {
		t.Errorf("x86_only_rules = %+v", got.X86Only)
	}
	if len(got.Flat) == 0 {
		t.Error("no flat_arm64_rules")
	}
	if len(got.Counts) != 1 || got.Counts[0].Dataset != "d" || got.Counts[0].Touched[0].Rule != IDCondaChannels || got.Counts[0].Touched[0].ByPlatform != nil {
		t.Errorf("counts = %+v", got.Counts)
	}
	if !strings.HasPrefix(b.String(), "{\n  \"pins\": [\n") {
		t.Errorf("not indented JSON: %.40q", b.String())
	}
}
