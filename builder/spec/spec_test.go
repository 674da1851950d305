package spec_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
)

func readIDs(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(raw), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// TestPlatformsFullTestSplit feeds the 2,294 SWE-bench test ids to the
// platform decision and checks the 1,798 arm64-native / 496 x86-only split,
// id for id.
func TestPlatformsFullTestSplit(t *testing.T) {
	shared := spectest.SharedDir(t)
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	all := readIDs(t, filepath.Join(shared, "SWE-bench_test.instance_ids.txt"))
	wantArm := map[string]bool{}
	for _, id := range readIDs(t, filepath.Join(shared, "SWE-bench_test.arm64-native.instance_ids.txt")) {
		wantArm[id] = true
	}
	wantX86 := map[string]bool{}
	for _, id := range readIDs(t, filepath.Join(shared, "SWE-bench_test.x86_64-only.instance_ids.txt")) {
		wantX86[id] = true
	}
	arm, x86 := 0, 0
	for _, id := range all {
		// The full test split is Python: the decision is by id (USE_X86);
		// the id-only form (no version) must agree.
		ps := tables.PlatformsByID(nil)(id)
		switch {
		case len(ps) == 2 && ps[0] == core.AMD64 && ps[1] == core.ARM64:
			arm++
			if !wantArm[id] {
				t.Errorf("%s: gets arm64, but is not in the arm64-native list", id)
			}
		case len(ps) == 1 && ps[0] == core.AMD64:
			x86++
			if !wantX86[id] {
				t.Errorf("%s: x86-only, but not in the x86_64-only list", id)
			}
		default:
			t.Errorf("%s: platforms %v", id, ps)
		}
	}
	if len(all) != 2294 || arm != 1798 || x86 != 496 {
		t.Errorf("ids %d: arm64-native %d, x86-only %d; want 2294: 1798/496", len(all), arm, x86)
	}
}

func TestPlatformOverride(t *testing.T) {
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	id := tables.UseX86[0]
	inst := &core.Instance{InstanceID: id, Repo: spec.RepoFromID(id)}
	if d := tables.Decide(inst); len(d.Platforms) != 1 || d.Rule != spec.RuleUseX86 {
		t.Fatalf("%s in USE_X86 but decided %+v", id, d)
	}
	tables.OverridePlatforms(id, []core.Platform{core.ARM64, core.AMD64})
	if d := tables.Decide(inst); !reflect.DeepEqual(d.Platforms, core.AllPlatforms()) || d.Rule != "" {
		t.Errorf("override ignored for %s: %+v", id, d)
	}
	calc := &core.Instance{InstanceID: "fixture__calc-1"}
	tables.OverridePlatforms(calc.InstanceID, []core.Platform{core.AMD64})
	if d := tables.Decide(calc); !tables.X86Only(calc) || d.Rule != spec.RuleOverride {
		t.Errorf("x86-only override ignored: %+v", d)
	}
	// A fresh Load has no overrides.
	t2, _ := spec.Load()
	if !t2.X86Only(inst) {
		t.Error("override leaked into another Tables")
	}
}

func TestLookupErrors(t *testing.T) {
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tables.Lookup("django/django", "3.0"); err != nil {
		t.Error(err)
	}
	for _, tc := range [][2]string{{"nope/nope", "1.0"}, {"django/django", "0.0"}, {"redis/redis", "7.0"}, {"redis/redis", ""}} {
		if _, err := tables.Lookup(tc[0], tc[1]); err == nil {
			t.Errorf("Lookup(%s, %s) succeeded", tc[0], tc[1])
		}
	}
	if vs, ok := tables.Versions("django/django"); !ok || len(vs) == 0 {
		t.Error("no django versions")
	}
	if len(tables.UseX86) != 496 {
		t.Errorf("USE_X86 has %d ids", len(tables.UseX86))
	}
	if _, ok := tables.CachedEnvYML("django__django-11099"); !ok {
		t.Error("no bundled env for django__django-11099")
	}
	if _, ok := tables.CachedEnvYML("../specs"); ok {
		t.Error("path escape accepted")
	}
}

// TestEmbeddedMatchesReference: the embedded tables equal a fresh
// transcription of specs.json and upstream-v5/specs-final*.json (go generate
// is up to date).
func TestEmbeddedMatchesReference(t *testing.T) {
	shared := spectest.SharedDir(t)
	if _, err := os.Stat(filepath.Join(shared, "upstream-v4.1.0", "specs.json")); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	out, err := exec.Command("go", "run", "./internal/gen", "-shared", shared, "-out", tmp).CombinedOutput()
	if err != nil {
		t.Fatalf("go run ./internal/gen: %v\n%s", err, out)
	}
	want, err := os.ReadFile(filepath.Join(tmp, "specs.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("data", "specs.json"))
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != string(got) {
		t.Error("data/specs.json is stale: run go generate ./builder/spec")
	}
	gen, _ := os.ReadDir(filepath.Join(tmp, "specs"))
	have, _ := os.ReadDir(filepath.Join("data", "specs"))
	if len(gen) != 66 || len(have) != len(gen) {
		t.Errorf("%d generated repo spec files, %d in data/specs; want 66", len(gen), len(have))
	}
	for _, e := range gen {
		a, _ := os.ReadFile(filepath.Join(tmp, "specs", e.Name()))
		b, err := os.ReadFile(filepath.Join("data", "specs", e.Name()))
		if err != nil || string(a) != string(b) {
			t.Errorf("data/specs/%s is stale or missing: run go generate ./builder/spec", e.Name())
		}
	}
	// The final tables: specs.json and only the repos that differ from
	// v4.1.0's (NOTES §4: gson, druid, lucene, tokio, axum).
	for _, name := range []string{"specs.json", "specs/apache__druid.json", "specs/apache__lucene.json",
		"specs/google__gson.json", "specs/tokio-rs__axum.json", "specs/tokio-rs__tokio.json"} {
		a, err := os.ReadFile(filepath.Join(tmp, "final", name))
		if err != nil {
			t.Errorf("generated final/%s: %v", name, err)
		}
		b, err := os.ReadFile(filepath.Join("data", "final", name))
		if err != nil || string(a) != string(b) {
			t.Errorf("data/final/%s is stale or missing: run go generate ./builder/spec", name)
		}
	}
	if gen, _ := os.ReadDir(filepath.Join(tmp, "final", "specs")); len(gen) != 5 {
		t.Errorf("%d generated final repo files, want 5", len(gen))
	}
	if have, _ := os.ReadDir(filepath.Join("data", "final", "specs")); len(have) != 5 {
		t.Errorf("%d final repo files in data/final/specs, want 5", len(have))
	}
	ents, _ := os.ReadDir(filepath.Join(tmp, "envcache"))
	if len(ents) != 500 {
		t.Errorf("%d generated env files", len(ents))
	}
	for _, e := range ents {
		a, _ := os.ReadFile(filepath.Join(tmp, "envcache", e.Name()))
		b, err := os.ReadFile(filepath.Join("data", "envcache", e.Name()))
		if err != nil || string(a) != string(b) {
			t.Errorf("data/envcache/%s is stale or missing", e.Name())
		}
	}
}

// TestX86RulesOverTables decides every non-Python repo-version of the
// tables and compares with the rules' written conditions evaluated here on
// the shared reference's specs-multilingual.json: node_version below 4
// (Automattic/wp-calypso 0.8) and puppeteer's download (15 processing/p5.js
// versions). Without a version (an id-only caller) a repo with any
// x86-only version is x86-only.
func TestX86RulesOverTables(t *testing.T) {
	shared := spectest.SharedDir(t)
	raw, err := os.ReadFile(filepath.Join(shared, "upstream-v4.1.0-multilingual", "specs-multilingual.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Specs map[string]map[string]struct {
			DockerSpecs map[string]any `json:"docker_specs"`
			PreInstall  []string       `json:"pre_install"`
			Install     []string       `json:"install"`
			Build       []string       `json:"build"`
		} `json:"MAP_REPO_VERSION_TO_SPECS"`
		Ext map[string]string `json:"MAP_REPO_TO_EXT"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for repo, versions := range ref.Specs {
		for v, s := range versions {
			want := ""
			if nv, ok := s.DockerSpecs["node_version"].(string); ok && ref.Ext[repo] == "js" {
				if n, err := strconv.Atoi(strings.Split(nv, ".")[0]); err == nil && n < 4 {
					want = spec.RuleNodeWithoutArm64
				}
			}
			for _, c := range append(append(append([]string(nil), s.PreInstall...), s.Install...), s.Build...) {
				if want == "" && strings.Contains(c, "node_modules/puppeteer/install.js") {
					want = spec.RulePuppeteerChromium
				}
			}
			d := tables.Decide(&core.Instance{InstanceID: "x__y-1", Repo: repo, Version: v})
			if d.Rule != want || len(d.Platforms) != map[bool]int{true: 2, false: 1}[want == ""] {
				t.Errorf("%s %s: decided %+v, want rule %q", repo, v, d, want)
			}
			if want != "" {
				count[repo+" "+want]++
			}
		}
	}
	wantCount := map[string]int{"Automattic/wp-calypso " + spec.RuleNodeWithoutArm64: 1, "processing/p5.js " + spec.RulePuppeteerChromium: 15}
	if !reflect.DeepEqual(count, wantCount) {
		t.Errorf("x86-only repo-versions %v, want %v", count, wantCount)
	}
	byID := tables.PlatformsByID(nil)
	for id, want := range map[string]int{"processing__p5.js-9999": 1, "Automattic__wp-calypso-1": 1, "vuejs__core-1": 2, "django__django-11099": 2, "django__django-10097": 1} {
		if got := byID(id); len(got) != want {
			t.Errorf("id-only %s: %v, want %d platform(s)", id, got, want)
		}
	}
	for _, r := range spec.X86Rules() {
		if r.ID == "" || r.Match == "" || r.Reason == "" || !strings.Contains(r.Evidence, "https://") {
			t.Errorf("rule %+v lacks a field or an evidence URL", r)
		}
	}
}

// TestEveryRepoDecodes: the tables decode each repo lazily; every one of
// them must decode and give every version (66 repos, 689 repo-versions in
// v4.1.0: 20 Python with 300, 46 others with 389).
func TestEveryRepoDecodes(t *testing.T) {
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	repos, versions, other := 0, 0, 0
	for _, repo := range tables.Repos() {
		vs, ok := tables.Versions(repo)
		if !ok || len(vs) == 0 {
			t.Errorf("%s: no versions", repo)
		}
		for _, v := range vs {
			if _, err := tables.Lookup(repo, v); err != nil {
				t.Errorf("%s %s: %v", repo, v, err)
			}
		}
		repos++
		versions += len(vs)
		if tables.Language(repo) != spec.LangPython {
			other += len(vs)
		}
	}
	if repos != 66 || versions != 689 || other != 389 {
		t.Errorf("%d repos, %d repo-versions (%d non-Python); want 66, 689, 389", repos, versions, other)
	}
}

// TestLoadVersion: the final tables differ from v4.1.0's where
// upstream-v5/specs-changes.json says (a Rust Cargo.lock pin, Java's
// sequential tests, the C base template) and nowhere else checked here;
// an unknown version is an error naming the ones there are.
func TestLoadVersion(t *testing.T) {
	old, err := spec.LoadVersion("")
	if err != nil {
		t.Fatal(err)
	}
	final, err := spec.LoadVersion(spec.VersionFinal)
	if err != nil {
		t.Fatal(err)
	}
	if old.Version != spec.VersionV410 || final.Version != spec.VersionFinal {
		t.Errorf("versions %q, %q", old.Version, final.Version)
	}
	for _, tc := range []struct {
		repo, version string
		field         func(spec.Spec) string
		oldHas        string
		finalHas      string
	}{
		{"tokio-rs/tokio", "6724", func(s spec.Spec) string { return strings.Join(s.PreInstall, "\n") }, "", "cat > Cargo.lock <<'EOF_CARGO_LOCK'"},
		{"tokio-rs/tokio", "6724", func(s spec.Spec) string { return s.DockerSpecs.Repr() }, "'1.81'", "'1.83'"},
		{"google/gson", "2158", func(s spec.Spec) string { return strings.Join(s.TestCmds, "\n") }, "mvnd test -B -T 1C", "mvnd test -B -pl"},
		{"django/django", "3.0", func(s spec.Spec) string { return s.TestCmd }, "runtests.py", "runtests.py"},
	} {
		o, err := old.Lookup(tc.repo, tc.version)
		if err != nil {
			t.Fatal(err)
		}
		f, err := final.Lookup(tc.repo, tc.version)
		if err != nil {
			t.Fatal(err)
		}
		if got := tc.field(o); tc.oldHas != "" && !strings.Contains(got, tc.oldHas) || tc.oldHas == "" && got != "" {
			t.Errorf("%s %s v4.1.0: %.80q, want %q", tc.repo, tc.version, got, tc.oldHas)
		}
		if got := tc.field(f); !strings.Contains(got, tc.finalHas) {
			t.Errorf("%s %s final: %.80q, want %q", tc.repo, tc.version, got, tc.finalHas)
		}
	}
	if !strings.Contains(final.BaseTemplates["c"], "libffi-dev") || strings.Contains(old.BaseTemplates["c"], "libffi-dev") {
		t.Error("the C base template: libffi-dev should be in the final one only")
	}
	if _, err := spec.LoadVersion("5.0"); err == nil || !strings.Contains(err.Error(), "4.1.0 or final") {
		t.Errorf("unknown version: %v", err)
	}
}
