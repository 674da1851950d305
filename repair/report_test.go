package repair

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/pins"
)

func calcCase() Case {
	return Case{Repo: "fixture/calc", Version: "1.0", Instances: []string{"fixture__calc-1", "fixture__calc-2"},
		Changes: []Change{pypi("fixaux"), pypi("fixdep"), pypi("fixfmt"), pypi("fixlog")},
		Drift:   []string{"pypi/fixaux 1.0 -> 1.1 (env sweb.env.fixture.x86_64.a linux/amd64, env sweb.env.fixture.arm64.b linux/arm64)"},
		Tonight: Outcome{Failures: []Failure{
			{InstanceID: "fixture__calc-1", Platform: core.AMD64, Tests: []string{"tests/test_calc.py::test_add", "tests/test_calc.py::test_div"}},
			{InstanceID: "fixture__calc-1", Platform: core.ARM64, Tests: []string{"tests/test_calc.py::test_add"}},
		}}}
}

// TestProposal: a culprit verdict becomes a pins file rule holding the
// culprit at last night's version on its platforms, with its evidence; the
// file reads back through pins.ReadFile and its rule pins calc's env.
func TestProposal(t *testing.T) {
	c := calcCase()
	o := &fakeOracle{breakers: [][]string{{"fixdep"}}}
	r, err := Bisect(context.Background(), c.Changes, c.Tonight, o)
	if err != nil {
		t.Fatal(err)
	}
	fr, err := Proposal("2026-12-03T02:17:00Z", c, r, []string{"fixture__calc-1 linux/amd64 sha256:aa"})
	if err != nil {
		t.Fatal(err)
	}
	if fr.ID != "repair-fixture-calc-1.0-fixdep" || fr.Repo != "fixture/calc" || fr.Version != "1.0" || len(fr.Hold) != 1 ||
		fr.Hold[0].String() != "pypi/fixdep==1.0 (linux/amd64, linux/arm64)" {
		t.Errorf("rule %+v", fr.HoldSpec)
	}
	for _, want := range []string{"pypi/fixdep 1.0 -> 1.1 broke the gold patches of fixture__calc-1 linux/amd64, fixture__calc-1 linux/arm64 (night 2026-12-03T02:17:00Z)"} {
		if !strings.Contains(fr.Reason, want) {
			t.Errorf("reason %q lacks %q", fr.Reason, want)
		}
	}
	for _, want := range []string{"2 image(s) failed gold (3 failing test result(s))", "bisected in 5 env rebuild(s) of 4 changed package(s)",
		"1. last night's captured set (frozen): gold passes", "4. holding back pypi/fixaux 1.0, pypi/fixfmt 1.0, pypi/fixlog 1.0: gold fails (1 image(s))",
		"1 image(s) verified"} {
		if !strings.Contains(fr.Evidence, want) {
			t.Errorf("evidence %q lacks %q", fr.Evidence, want)
		}
	}
	var ev Evidence
	if err := json.Unmarshal(fr.Record, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Night != "2026-12-03T02:17:00Z" || ev.Rebuilds != 5 || len(ev.Instances) != 2 || len(ev.Instances[0].Tests) != 2 ||
		len(ev.Changes) != 1 || ev.Changes[0] != "pypi/fixdep 1.0 -> 1.1" || len(ev.Drift) != 1 || len(ev.Steps) != 5 {
		t.Errorf("evidence record %+v", ev)
	}

	// The file as the night writes it, read back as --pins takes it.
	raw, err := pins.File{Schema: pins.FileSchema, Rules: []pins.FileRule{fr}}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "proposal.json")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := pins.Parse("default," + path)
	if err != nil {
		t.Fatal(err)
	}
	rec := &spec.Recipe{Repo: "fixture/calc", Version: "1.0", Platform: core.ARM64, Spec: spec.Spec{PipPackages: []string{"fixdep"}}}
	set.Apply(rec)
	if got := strings.Join(rec.Spec.PipPackages, " "); got != "fixdep -c /dev/stdin <<'SWEBUILD_HOLD'\nfixdep==1.0\nSWEBUILD_HOLD" || !strings.Contains(strings.Join(rec.Pins, ","), fr.ID) {
		t.Errorf("the proposal applied: pins %q pip %q", rec.Pins, got)
	}

	// No proposal without a culprit.
	o = &fakeOracle{breakers: [][]string{{"fixaux", "fixdep"}}}
	r, err = Bisect(context.Background(), c.Changes, c.Tonight, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Proposal("n", c, r, nil); err == nil || !strings.Contains(err.Error(), "fixture/calc 1.0: no single package repair") {
		t.Errorf("interaction proposal: %v", err)
	}
}

func TestRuleID(t *testing.T) {
	for _, tc := range []struct {
		repo, version string
		names         []string
		want          string
	}{
		{"fixture/calc", "1.0", []string{"fixdep"}, "repair-fixture-calc-1.0-fixdep"},
		{"scikit-learn/scikit-learn", "0.22", []string{"numpy", "Scipy"}, "repair-scikit-learn-scikit-learn-0.22-numpy-scipy"},
		{"Django_Proj/x", "4.0", []string{"typing_extensions"}, "repair-django-proj-x-4.0-typing-extensions"},
	} {
		var cs []Change
		for _, n := range tc.names {
			cs = append(cs, pypi(n))
		}
		got := RuleID(tc.repo, tc.version, cs)
		if got != tc.want {
			t.Errorf("RuleID(%s %s %v) = %q, want %q", tc.repo, tc.version, tc.names, got, tc.want)
		}
		if err := (pins.HoldSpec{ID: got, Repo: tc.repo, Version: tc.version, Hold: []pins.Hold{{Ecosystem: "pypi", Name: "a", Version: "1"}}}).Validate(); err != nil {
			t.Errorf("RuleID %q is not a valid rule id: %v", got, err)
		}
	}
}

// TestWriteMarkdown: the job summary names the verdict, the package and
// version, the rebuilds, each step, and the proposal; an interaction says
// last night's images are kept.
func TestWriteMarkdown(t *testing.T) {
	c := calcCase()
	r1, err := Bisect(context.Background(), c.Changes, c.Tonight, &fakeOracle{breakers: [][]string{{"fixdep"}}})
	if err != nil {
		t.Fatal(err)
	}
	c2 := c
	c2.Repo = "fixture/other"
	r2, err := Bisect(context.Background(), c.Changes, c.Tonight, &fakeOracle{breakers: [][]string{{"fixaux", "fixdep"}}})
	if err != nil {
		t.Fatal(err)
	}
	rep := &Report{Schema: Schema, Night: "n1", Pins: "default", Proposal: "repair/proposal.json", Seconds: 91,
		Cases: []CaseReport{{Case: c, Result: r1, Rule: "repair-fixture-calc-1.0-fixdep", Repaired: make([]core.Image, 4)},
			{Case: c2, Result: r2}, {Case: c2, Error: "rebuild 1: buildkit gone"}}}
	var b strings.Builder
	if err := WriteMarkdown(&b, rep); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"3 env(s) broke gold patches that passed last night; the repair took 1.5 min.",
		"#### fixture/calc 1.0",
		"- failed tonight: `fixture__calc-1 linux/amd64` (2 failing tests), `fixture__calc-1 linux/arm64` (1 failing tests)",
		"- **repaired**: pypi/fixdep 1.0 -> 1.1 breaks the gold patches; held back, every gold patch passes; rule `repair-fixture-calc-1.0-fixdep`, 4 image(s) verified with it and published",
		"- 5 env rebuild(s) of 4 changed package(s) (4 a hold can pin), 50 s",
		"| 2 | holding back pypi/fixfmt 1.0, pypi/fixlog 1.0 | gold fails (1 image(s)) |",
		"- **interaction**: no single package explains it: pypi/fixaux 1.0 -> 1.1 and pypi/fixdep 1.0 -> 1.1 break the gold patches only together (each alone passes); last night's images are kept",
		"- **no result**: rebuild 1: buildkit gone; last night's images are kept",
		"Proposed pins: `repair/proposal.json` (apply with `--pins default,repair/proposal.json`",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	raw, err := rep.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeReport(raw)
	if err != nil {
		t.Fatal(err)
	}
	if raw2, _ := back.Encode(); string(raw2) != string(raw) {
		t.Error("report JSON does not round-trip")
	}
	if _, err := DecodeReport([]byte(`{"schema":"x"}`)); err == nil {
		t.Error("a report of another schema decoded")
	}
}
