package pins

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
)

func calcRecipe(p core.Platform, pip ...string) *spec.Recipe {
	return &spec.Recipe{InstanceID: "fixture__calc-1", Repo: "fixture/calc", Version: "1.0", Platform: p,
		Spec: spec.Spec{PipPackages: pip}}
}

// TestHoldRule: a hold rule adds its packages as constraints to the pip
// line of the envs of its repo and version (on its platforms), merges them
// into constraints already there, pins an environment.yml's pip section,
// and leaves everything else alone.
func TestHoldRule(t *testing.T) {
	fixdep := Hold{Ecosystem: "pypi", Name: "fixdep", Version: "1.0"}
	amd64Only := Hold{Ecosystem: "pypi", Name: "fixaux", Version: "2.0", Platforms: []core.Platform{core.AMD64}}
	for _, tc := range []struct {
		name    string
		holds   []Hold
		rec     *spec.Recipe
		changed bool
		pip     []string
		yml     string
	}{
		{name: "pip line gets a constraint", holds: []Hold{fixdep}, rec: calcRecipe(core.AMD64, "fixdep", "fixaux"), changed: true,
			pip: []string{"fixdep", "fixaux", "-c /dev/stdin <<'SWEBUILD_HOLD'\nfixdep==1.0\nSWEBUILD_HOLD"}},
		{name: "two packages, sorted", holds: []Hold{fixdep, {Ecosystem: "pypi", Name: "Aux_Pkg", Version: "0.9"}}, rec: calcRecipe(core.ARM64, "fixdep"), changed: true,
			pip: []string{"fixdep", "-c /dev/stdin <<'SWEBUILD_HOLD'\nAux_Pkg==0.9\nfixdep==1.0\nSWEBUILD_HOLD"}},
		{name: "another platform's hold only", holds: []Hold{amd64Only}, rec: calcRecipe(core.ARM64, "fixdep"), pip: []string{"fixdep"}},
		{name: "its platform", holds: []Hold{amd64Only}, rec: calcRecipe(core.AMD64, "fixdep"), changed: true,
			pip: []string{"fixdep", "-c /dev/stdin <<'SWEBUILD_HOLD'\nfixaux==2.0\nSWEBUILD_HOLD"}},
		{name: "another repo", holds: []Hold{fixdep}, rec: &spec.Recipe{Repo: "fixture/textutil", Version: "1.0", Platform: core.AMD64,
			Spec: spec.Spec{PipPackages: []string{"fixdep"}}}, pip: []string{"fixdep"}},
		{name: "another version", holds: []Hold{fixdep}, rec: &spec.Recipe{Repo: "fixture/calc", Version: "2.0", Platform: core.AMD64,
			Spec: spec.Spec{PipPackages: []string{"fixdep"}}}, pip: []string{"fixdep"}},
		{name: "no pip line", holds: []Hold{fixdep}, rec: calcRecipe(core.AMD64)},
		{name: "merged into the frozen rule's constraints", holds: []Hold{fixdep},
			rec:     calcRecipe(core.AMD64, "fixdep==1.1", "-c /dev/stdin <<'SWEBUILD_FROZEN'\nfixdep==1.1\npip==23.0.1\nSWEBUILD_FROZEN"),
			changed: true, pip: []string{"fixdep==1.1", "-c /dev/stdin <<'SWEBUILD_FROZEN'\nfixdep==1.0\npip==23.0.1\nSWEBUILD_FROZEN"}},
		{name: "environment.yml pip section", holds: []Hold{fixdep},
			rec: &spec.Recipe{Repo: "fixture/calc", Version: "1.0", Platform: core.AMD64, EnvYMLCached: true,
				EnvYML: "name: testbed\ndependencies:\n  - python=3.9\n  - pip:\n    - fixdep==1.1\n    - other==2\n"},
			changed: true, yml: "name: testbed\ndependencies:\n  - python=3.9\n  - pip:\n    - fixdep==1.0\n    - other==2\n"},
		{name: "environment.yml without a pip section", holds: []Hold{fixdep},
			rec: &spec.Recipe{Repo: "fixture/calc", Version: "1.0", Platform: core.AMD64, EnvYMLCached: true,
				EnvYML: "name: testbed\ndependencies:\n  - python=3.9\n"}, yml: "name: testbed\ndependencies:\n  - python=3.9\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := HoldRule(HoldSpec{ID: "repair-calc-fixdep", Repo: "fixture/calc", Version: "1.0", Hold: tc.holds, Reason: "r", Evidence: "e"})
			if err != nil {
				t.Fatal(err)
			}
			before := slices.Clone(tc.rec.Spec.PipPackages)
			shared := tc.rec.Spec.PipPackages
			s := (&Set{}).With(r)
			s.Apply(tc.rec)
			if got := slices.Contains(tc.rec.Pins, r.ID); got != tc.changed {
				t.Errorf("pins %q: changed = %v, want %v", tc.rec.Pins, got, tc.changed)
			}
			if !slices.Equal(tc.rec.Spec.PipPackages, tc.pip) {
				t.Errorf("pip packages %q\nwant %q", tc.rec.Spec.PipPackages, tc.pip)
			}
			if !slices.Equal(shared, before) {
				t.Errorf("the recipe's former pip list was written to: %q", shared)
			}
			if tc.rec.EnvYMLCached && tc.rec.EnvYML != tc.yml {
				t.Errorf("environment.yml %q\nwant %q", tc.rec.EnvYML, tc.yml)
			}
		})
	}
}

func TestHoldSpecValidate(t *testing.T) {
	good := func() HoldSpec {
		return HoldSpec{ID: "repair-x", Repo: "a/b", Version: "1.0", Hold: []Hold{{Ecosystem: "pypi", Name: "fixdep", Version: "1.0"}}}
	}
	for _, tc := range []struct {
		name string
		edit func(*HoldSpec)
		err  string
	}{
		{"good", func(*HoldSpec) {}, ""},
		{"id with a space", func(s *HoldSpec) { s.ID = "repair x" }, `id: "repair x"`},
		{"built-in id", func(s *HoldSpec) { s.ID = IDSphinxPygments }, "is a built-in rule's id"},
		{"frozen id", func(s *HoldSpec) { s.ID = IDFrozen }, "is a built-in rule's id"},
		{"no repo", func(s *HoldSpec) { s.Repo = "" }, "repo: missing"},
		{"no version", func(s *HoldSpec) { s.Version = "" }, "version: missing"},
		{"nothing held", func(s *HoldSpec) { s.Hold = nil }, "hold: no package held"},
		{"conda", func(s *HoldSpec) { s.Hold[0].Ecosystem = "conda" }, "hold[0].ecosystem"},
		{"shell in the version", func(s *HoldSpec) { s.Hold[0].Version = "1.0\nrm -rf /" }, "hold[0].version"},
		{"shell in the name", func(s *HoldSpec) { s.Hold[0].Name = "fixdep;id" }, "hold[0].name"},
		{"heredoc end in the name", func(s *HoldSpec) { s.Hold[0].Name = "SWEBUILD HOLD" }, "hold[0].name"},
		{"held twice", func(s *HoldSpec) {
			s.Hold = append(s.Hold, Hold{Ecosystem: "pypi", Name: "FixDep", Version: "2", Platforms: []core.Platform{core.ARM64}})
		}, "hold[1]: FixDep held twice on linux/arm64"},
		{"once per platform", func(s *HoldSpec) {
			s.Hold[0].Platforms = []core.Platform{core.AMD64}
			s.Hold = append(s.Hold, Hold{Ecosystem: "pypi", Name: "fixdep", Version: "2", Platforms: []core.Platform{core.ARM64}})
		}, ""},
		{"a platform twice", func(s *HoldSpec) { s.Hold[0].Platforms = []core.Platform{core.ARM64, core.ARM64} }, "hold[0].platforms[1]"},
	} {
		s := good()
		tc.edit(&s)
		err := s.Validate()
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: Validate() = %v, want %q", tc.name, err, tc.err)
		}
	}
}

const goodFile = `{
  "schema": "swebuild.pins/v1",
  "rules": [
    {
      "id": "repair-fixture-calc-1.0-fixdep",
      "repo": "fixture/calc",
      "version": "1.0",
      "hold": [
        {"ecosystem": "pypi", "name": "fixdep", "version": "1.0", "platforms": ["linux/amd64", "linux/arm64"]}
      ],
      "reason": "fixdep 1.1 breaks calc's tests",
      "evidence": "night 2026-12-03: 4 images failed gold",
      "record": {"night": "2026-12-03T02:17:00Z"}
    }
  ]
}
`

// TestReadPinsFile: a good file reads back to the same bytes; a bad one is
// an error naming the file, the line and the field.
func TestReadPinsFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", goodFile)
	f, rules, err := ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 1 || rules[0].ID != "repair-fixture-calc-1.0-fixdep" || rules[0].Evidence != "night 2026-12-03: 4 images failed gold" {
		t.Errorf("rules = %+v", rules)
	}
	if !strings.Contains(rules[0].Change, "pypi/fixdep==1.0 (linux/amd64, linux/arm64)") {
		t.Errorf("change = %q", rules[0].Change)
	}
	enc, err := f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	f2, err := DecodeFile(enc)
	if err != nil {
		t.Fatal(err)
	}
	var rec bytes.Buffer
	if err := json.Compact(&rec, f2.Rules[0].Record); err != nil {
		t.Fatal(err)
	}
	if enc2, _ := f2.Encode(); string(enc2) != string(enc) || rec.String() != `{"night":"2026-12-03T02:17:00Z"}` {
		t.Errorf("round trip differs:\n%s\n%s", enc, enc2)
	}

	for _, tc := range []struct {
		name, body, err string
	}{
		{"syntax", strings.Replace(goodFile, `"version": "1.0",`, `"version": "1.0"`, 1), "line 8, column 8: invalid character"},
		{"unknown field", strings.Replace(goodFile, `"reason"`, `"reasons"`, 1), `unknown field "reasons"`},
		{"wrong type", strings.Replace(goodFile, `"version": "1.0",`, `"version": 1.0,`, 1), "line 7, column 21: rules.version: a JSON number where a string goes"},
		{"schema", strings.Replace(goodFile, "swebuild.pins/v1", "swebuild.pins/v2", 1), `schema: "swebuild.pins/v2"`},
		{"bad version", strings.Replace(goodFile, `"version": "1.0", "platforms"`, `"version": "1.0$(id)", "platforms"`, 1), "line 4: rules[0].hold[0].version"},
		{"bad platform", strings.Replace(goodFile, `"linux/arm64"]`, `"linux/s390x"]`, 1), "linux/s390x"},
		{"duplicate id", strings.Replace(goodFile, "  ]\n}", `    ,{"id": "repair-fixture-calc-1.0-fixdep", "repo": "a", "version": "1",
      "hold": [{"ecosystem": "pypi", "name": "x", "version": "1"}], "reason": "", "evidence": ""}
  ]
}`, 1), "line 15: rules[1].id"},
		{"no rules", `{"schema": "swebuild.pins/v1", "rules": []}`, "rules: none"},
		{"two values", goodFile + "{}", "more than one JSON value"},
	} {
		p := write(strings.ReplaceAll(tc.name, " ", "-")+".json", tc.body)
		_, _, err := ReadFile(p)
		if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: ReadFile = %v\nwant the file named and %q", tc.name, err, tc.err)
		}
	}
	if _, _, err := ReadFile(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("ReadFile(dir) = %v", err)
	}
}

// TestParsePinsFile: --pins default,FILE adds the file's rules after the
// selected ones; String gives the value back.
func TestParsePinsFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "proposal.json")
	if err := os.WriteFile(p, []byte(goodFile), 0o644); err != nil {
		t.Fatal(err)
	}
	var allIDs []string
	for _, r := range All() {
		allIDs = append(allIDs, r.ID)
	}
	withFile := append(slices.Clone(allIDs), "repair-fixture-calc-1.0-fixdep")
	for _, tc := range []struct {
		value string
		rules []string
		str   string
		err   string
	}{
		{value: "default," + p, rules: withFile, str: "default," + p},
		{value: p + ",default", rules: withFile, str: "default," + p},
		{value: "none," + p, rules: []string{"repair-fixture-calc-1.0-fixdep"}, str: "none," + p},
		{value: "default,-" + IDChromeApt + "," + p, rules: append(slices.DeleteFunc(slices.Clone(allIDs), func(id string) bool { return id == IDChromeApt }), "repair-fixture-calc-1.0-fixdep"),
			str: "default,-" + IDChromeApt + "," + p},
		{value: "default,-" + p, err: "a pins file is added, not dropped"},
		{value: "default," + p + "," + p, err: "listed twice"},
		{value: "default," + filepath.Join(dir, "missing.json"), err: "missing.json: no such file"},
	} {
		s, err := Parse(tc.value)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) = %v, want %q", tc.value, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.value, err)
			continue
		}
		var got []string
		for _, r := range s.Rules() {
			got = append(got, r.ID)
		}
		if !slices.Equal(got, tc.rules) || s.String() != tc.str {
			t.Errorf("Parse(%q) = %q %q, want %q %q", tc.value, got, s.String(), tc.rules, tc.str)
		}
		if back, err := Parse(s.String()); err != nil || back.String() != s.String() {
			t.Errorf("Parse(%q).String() does not parse back: %v", tc.value, err)
		}
	}
}
