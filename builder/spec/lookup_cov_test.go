package spec_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
)

// TestTableLookups: Known, Branch and LogParser on facts of upstream
// v4.1.0's tables (swebench/harness/constants: MAP_REPO_VERSION_TO_SPECS,
// REPO_BASE_COMMIT_BRANCH) and of the fixture's spec profile
// (testdata/fixture/specs.json; its task repo's task.yaml files name the same
// parsers).
func TestTableLookups(t *testing.T) {
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := tables.LoadExtra(filepath.Join("..", "..", "testdata", "fixture", "specs.json")); err != nil {
		t.Fatal(err)
	}
	known := []struct {
		repo, version string
		want          bool
	}{
		{"django/django", "3.0", true},
		{"sympy/sympy", "1.7", true},
		{"astropy/astropy", "4.3", true},
		{"django/django", "99.9", false},
		{"nobody/nothing", "1.0", false},
		{"fixture/calc", "1.0", true},
		{"fixture/calc", "2.0", false},
	}
	for _, c := range known {
		if got := tables.Known(c.repo, c.version); got != c.want {
			t.Errorf("Known(%s, %s) = %v, want %v", c.repo, c.version, got, c.want)
		}
	}
	branches := []struct{ repo, commit, want string }{
		{"sympy/sympy", "cffd4e0f86fefd4802349a9f9b19ed70934ea354", "1.7"},
		{"sympy/sympy", "0000000000000000000000000000000000000000", ""},
		{"django/django", "cffd4e0f86fefd4802349a9f9b19ed70934ea354", ""},
	}
	for _, c := range branches {
		if got := tables.Branch(c.repo, c.commit); got != c.want {
			t.Errorf("Branch(%s, %s) = %q, want %q", c.repo, c.commit[:8], got, c.want)
		}
	}
	parsers := map[string]string{
		"fixture/calc": "parse_log_pytest", "fixture/textutil": "parse_log_pytest", "fixture/semver": "parse_log_tap",
		"django/django": "", // upstream's repos: their parser is grading's MAP_REPO_TO_PARSER, not a profile's
	}
	for repo, want := range parsers {
		if got := tables.LogParser(repo); got != want {
			t.Errorf("LogParser(%s) = %q, want %q", repo, got, want)
		}
	}
}

// TestSpecCloneIsDeep: pins edit a clone; the tables' spec keeps its values.
func TestSpecCloneIsDeep(t *testing.T) {
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	orig, err := tables.Lookup("sphinx-doc/sphinx", "7.1")
	if err != nil {
		t.Fatal(err)
	}
	if len(orig.PreInstall) == 0 || orig.Install == nil {
		t.Fatalf("sphinx 7.1 has pre_install and install upstream; got %+v", orig)
	}
	before := slices.Clone(orig.PreInstall)
	c := orig.Clone()
	c.PreInstall[0] = "edited"
	c.PreInstall = append(c.PreInstall, "more")
	*c.Install = "edited"
	again, err := tables.Lookup("sphinx-doc/sphinx", "7.1")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.PreInstall, before) || *again.Install == "edited" {
		t.Errorf("editing a clone changed the tables: pre_install %q, install %q", again.PreInstall, *again.Install)
	}
	if !strings.Contains(strings.Join(before, "\n"), "tox.ini") {
		t.Errorf("sphinx 7.1's pre_install edits tox.ini upstream; got %q", before)
	}
}

// TestLiftX86Rules: Automattic/wp-calypso 0.8 (Node 0.8, no arm64 build of
// Node before v4) is x86-only by a rule; lifting the rule (--pins
// default,-ID) makes it buildable on arm64, and an unknown rule id is refused.
func TestLiftX86Rules(t *testing.T) {
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	inst := &core.Instance{Repo: "Automattic/wp-calypso", Version: "0.8", InstanceID: "Automattic__wp-calypso-1"}
	if got := tables.X86OnlyRule(inst); got != spec.RuleNodeWithoutArm64 {
		t.Fatalf("wp-calypso 0.8: x86-only rule %q, want %q", got, spec.RuleNodeWithoutArm64)
	}
	err = tables.LiftX86Rules("no-such-rule")
	if err == nil || !strings.Contains(err.Error(), `"no-such-rule"`) {
		t.Fatalf("lifting an unknown rule: %v, want an error naming it", err)
	}
	if err := tables.LiftX86Rules(spec.RuleNodeWithoutArm64); err != nil {
		t.Fatal(err)
	}
	if got := tables.X86OnlyRule(inst); got != "" {
		t.Errorf("after lifting %s: x86-only rule %q, want none", spec.RuleNodeWithoutArm64, got)
	}
}
