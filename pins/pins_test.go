package pins

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/parser"

	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
)

// lineDiff returns the lines only in want (removed) and only in got (added),
// as multisets.
func lineDiff(want, got string) (removed, added []string) {
	count := map[string]int{}
	for _, l := range strings.Split(want, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(got, "\n") {
		count[l]--
	}
	for l, n := range count {
		for ; n > 0; n-- {
			removed = append(removed, l)
		}
		for ; n < 0; n++ {
			added = append(added, l)
		}
	}
	sort.Strings(removed)
	sort.Strings(added)
	return removed, added
}

type fileDiff struct {
	removed, added []string
}

// checker decides whether one file's diff against upstream is what the rule
// declares; it gets the instance's reference dir and arch.
type checker func(t *testing.T, id, arch, file string, d fileDiff)

var files = []string{"Dockerfile.base", "Dockerfile.env", "Dockerfile.instance", "setup_env.sh", "setup_repo.sh", "eval.sh"}

func renderedFile(res *render.Result, name string) string {
	switch name {
	case "Dockerfile.base":
		return res.BaseDockerfile
	case "Dockerfile.env":
		return res.EnvDockerfile
	case "Dockerfile.instance":
		return res.InstanceDockerfile
	case "setup_env.sh":
		return res.SetupEnv
	case "setup_repo.sh":
		return res.SetupRepo
	}
	return res.Eval
}

// changesEnvKey says which rules change an env script (and so the env
// key); the others change Dockerfiles only, which upstream's keys do not
// hash.
var changesEnvKey = map[string]bool{IDSphinxPygments: true, IDArm64EnvYML: true}

// reference is one folder of upstream-generated instances and the records
// they were generated from.
type reference struct {
	name string
	dir  string
	recs map[string]*core.Instance // by instance id
}

// references are the whole shared reference: the 500 Verified instances of
// upstream-v4.1.0 and the 210 of upstream-v4.1.0-multilingual.
func references(t *testing.T) []reference {
	shared := spectest.SharedDir(t)
	verified := spectest.Records(t, shared, "SWE-bench_Verified/test")["SWE-bench_Verified/test"]
	ml := map[string]*core.Instance{}
	for _, recs := range spectest.Records(t, shared, "SWE-bench_Multilingual/test", "SWE-bench_Multimodal/dev") {
		for id, r := range recs {
			ml[id] = r
		}
	}
	mlDir := filepath.Join(shared, "upstream-v4.1.0-multilingual", "instances")
	ents, err := os.ReadDir(mlDir)
	if err != nil {
		t.Fatal(err)
	}
	inRef := map[string]*core.Instance{}
	for _, e := range ents {
		if ml[e.Name()] == nil {
			t.Fatalf("%s: no record", e.Name())
		}
		inRef[e.Name()] = ml[e.Name()]
	}
	return []reference{
		{"verified", filepath.Join(shared, "upstream-v4.1.0", "instances"), verified},
		{"multilingual", mlDir, inRef},
	}
}

// runRule renders every reference instance (Verified and multilingual),
// both arches, with only rule id and hands each non-empty file diff to
// check. It returns how many renders the rule changed, per reference.
func runRule(t *testing.T, id string, check checker) map[string]int {
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	set, err := Only(id)
	if err != nil {
		t.Fatal(err)
	}
	r := &render.Renderer{Tables: tables, Pins: set}
	changed := map[string]int{}
	for _, ref := range references(t) {
		ids := make([]string, 0, len(ref.recs))
		for k := range ref.recs {
			ids = append(ids, k)
		}
		sort.Strings(ids)
		for _, iid := range ids {
			for _, platform := range core.AllPlatforms() {
				arch := platform.Arch()
				res, err := r.Render(context.Background(), ref.recs[iid], platform)
				if err != nil {
					t.Fatalf("%s %s: %v", iid, arch, err)
				}
				if len(res.Pins) > 0 {
					changed[ref.name]++
					if len(res.Pins) != 1 || res.Pins[0] != id {
						t.Errorf("%s %s: pins %v, want [%s]", iid, arch, res.Pins, id)
					}
				}
				anyDiff := false
				for _, f := range files {
					want, err := os.ReadFile(filepath.Join(ref.dir, iid, arch, f))
					if err != nil {
						t.Fatal(err)
					}
					rm, add := lineDiff(string(want), renderedFile(res, f))
					if len(rm)+len(add) == 0 {
						continue
					}
					anyDiff = true
					check(t, iid, arch, f, fileDiff{rm, add})
				}
				if anyDiff != (len(res.Pins) > 0) {
					t.Errorf("%s %s: output differs=%v but pins=%v", iid, arch, anyDiff, res.Pins)
				}
				var m struct {
					Base string `json:"base_image_key"`
					Env  string `json:"env_image_key"`
				}
				raw, _ := os.ReadFile(filepath.Join(ref.dir, iid, arch, "meta.json"))
				if err := json.Unmarshal(raw, &m); err != nil {
					t.Fatal(err)
				}
				if res.BaseKey != m.Base {
					t.Errorf("%s %s: base key changed to %s", iid, arch, res.BaseKey)
				}
				if envChanged := res.EnvKey != m.Env; envChanged != (changesEnvKey[id] && anyDiff) {
					t.Errorf("%s %s: env key changed=%v with rule %s", iid, arch, envChanged, id)
				}
			}
		}
	}
	return changed
}

// instanceKeyLine is the only Dockerfile.instance line allowed to change
// (it names the env key).
func isFromLine(l string) bool { return strings.HasPrefix(l, "FROM --platform=") }

func TestRuleCondaChannelsOnlyChangesThatLine(t *testing.T) {
	want := CondaChannelLines()
	sort.Strings(want)
	n := runRule(t, IDCondaChannels, func(t *testing.T, id, arch, file string, d fileDiff) {
		if file != "Dockerfile.base" {
			t.Errorf("%s %s: %s changed: -%q +%q", id, arch, file, d.removed, d.added)
			return
		}
		if strings.Join(d.removed, "\n") != CondaChannelLine || strings.Join(d.added, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s %s: Dockerfile.base diff -%q +%q", id, arch, d.removed, d.added)
		}
	})
	if n["verified"] != 1000 || n["multilingual"] != 0 {
		t.Errorf("rule changed %v renders, want all 1000 Verified ones and no multilingual one", n)
	}
}

func TestRuleArm64EnvYML(t *testing.T) {
	n := runRule(t, IDArm64EnvYML, func(t *testing.T, id, arch, file string, d fileDiff) {
		if arch != core.ArchARM64 {
			t.Errorf("%s %s: %s changed on x86_64", id, arch, file)
			return
		}
		switch file {
		case "Dockerfile.instance":
			if len(d.removed) != 1 || len(d.added) != 1 || !isFromLine(d.removed[0]) || !isFromLine(d.added[0]) {
				t.Errorf("%s: Dockerfile.instance diff -%q +%q", id, d.removed, d.added)
			}
		case "setup_env.sh":
			// Every removed line is a conda dependency with a build string;
			// every added line is one of them translated.
			allowed := map[string]int{}
			for _, l := range d.removed {
				parts := strings.Split(strings.TrimPrefix(l, "  - "), "=")
				if !strings.HasPrefix(l, "  - ") || len(parts) != 3 {
					t.Errorf("%s: removed line %q is not a conda name=version=build line", id, l)
					continue
				}
				name, drop := arm64Package(parts[0])
				if !drop {
					allowed["  - "+name+"="+parts[1]]++
				}
			}
			for _, l := range d.added {
				if allowed[l] == 0 {
					t.Errorf("%s: added line %q is not a translation of a removed line", id, l)
				}
				allowed[l]--
			}
		default:
			t.Errorf("%s %s: %s changed", id, arch, file)
		}
	})
	if n["verified"] != 500 || n["multilingual"] != 0 {
		t.Errorf("rule changed %v renders, want the 500 Verified arm64 ones", n)
	}
}

func TestRuleSphinxPygments(t *testing.T) {
	// Every bundled sphinx environment.yml already pins pygments==2.18.0, so
	// on Verified the rule must change nothing.
	n := runRule(t, IDSphinxPygments, func(t *testing.T, id, arch, file string, d fileDiff) {
		t.Errorf("%s %s: %s changed: -%q +%q", id, arch, file, d.removed, d.added)
	})
	if n["verified"]+n["multilingual"] != 0 {
		t.Errorf("rule changed %v renders", n)
	}
}

func TestSphinxPygmentsSpecBuiltEnv(t *testing.T) {
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	set, _ := Only(IDSphinxPygments)
	for _, tc := range []struct {
		version string
		in      []string
		want    []string
	}{
		{"7.2", []string{"tox==4.16.0", "tox-current-env==0.0.11", "Jinja2==3.0.3"}, []string{"tox==4.16.0", "tox-current-env==0.0.11", "Jinja2==3.0.3", PygmentsPin}},
		{"3.5", []string{"pygments==2.19.1", "tox"}, []string{"tox", PygmentsPin}},
		{"3.5", nil, []string{PygmentsPin}},
	} {
		rec, err := tables.NewRecipe("sphinx-doc__sphinx-0", "sphinx-doc/sphinx", tc.version, core.AMD64)
		if err != nil {
			t.Fatal(err)
		}
		if rec.EnvYMLCached {
			t.Fatal("fake id has a bundled env")
		}
		rec.Spec.PipPackages = tc.in
		set.Apply(rec)
		if strings.Join(rec.Spec.PipPackages, " ") != strings.Join(tc.want, " ") || len(rec.Pins) != 1 {
			t.Errorf("%v: got %v pins %v, want %v", tc.in, rec.Spec.PipPackages, rec.Pins, tc.want)
		}
	}
	// The tables are untouched.
	s, _ := tables.Lookup("sphinx-doc/sphinx", "7.2")
	for _, p := range s.PipPackages {
		if isPackage(p, "pygments") {
			t.Errorf("spec table was edited: %v", s.PipPackages)
		}
	}
}

func TestPinPipYML(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"deps:\n  - pip:\n      - pygments==2.19.1\n      - six==1", "deps:\n  - pip:\n      - pygments==2.18.0\n      - six==1"},
		{"deps:\n  - pip:\n      - six==1", "deps:\n  - pip:\n      - pygments==2.18.0\n      - six==1"},
		{"deps:\n  - python=3.9", "deps:\n  - python=3.9"},
	} {
		got, _ := pinPipYML(tc.in, "pygments", "2.18.0")
		if got != tc.want {
			t.Errorf("pinPipYML(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestNamed(t *testing.T) {
	none, err := Named("none")
	if err != nil || len(none.Rules()) != 0 {
		t.Fatalf("none: %v %v", none, err)
	}
	def, err := Named("default")
	if err != nil || len(def.Rules()) != len(All()) || len(All()) != 6 {
		t.Fatalf("default: %v", err)
	}
	for _, r := range def.Rules() {
		if r.ID == "" || r.Match == "" || r.Change == "" || r.Reason == "" || r.Evidence == "" {
			t.Errorf("rule %+v lacks a field", r)
		}
	}
	if _, err := Named("bogus"); err == nil {
		t.Error("bogus pin set accepted")
	}
}

func TestTranslateEnvYMLForArm64(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		changed  bool
	}{
		{"name: testbed\ndependencies:\n  - _libgcc_mutex=0.1=main\n  - ld_impl_linux-64=2.40=h12ee557_0\n  - python=3.9.20=he870216_1\n  - pip:\n      - six==1.16.0\nprefix: /x\n",
			"name: testbed\ndependencies:\n  - ld_impl_linux-aarch64=2.40\n  - python=3.9.20\n  - pip:\n      - six==1.16.0\nprefix: /x\n", true},
		{"dependencies:\n  - python=3.9\n  - _libgcc_mutex=0.1=main", "dependencies:\n  - python=3.9", true},
		{"channels:\n  - defaults\n  - conda-forge\n", "channels:\n  - defaults\n  - conda-forge\n", false},
	} {
		got, changed := TranslateEnvYMLForArm64(tc.in)
		if got != tc.want || changed != tc.changed {
			t.Errorf("TranslateEnvYMLForArm64(%q) = %q, %v; want %q, %v", tc.in, got, changed, tc.want, tc.changed)
		}
	}
}

// checkBlock is a checker for the template rules: only the named files
// change, only on arm64, and exactly the rule's old lines are replaced by
// its new lines.
func checkBlock(names []string, old, new []string) checker {
	sortedOld := append([]string(nil), old...)
	sortedNew := append([]string(nil), new...)
	sort.Strings(sortedOld)
	sort.Strings(sortedNew)
	return func(t *testing.T, id, arch, file string, d fileDiff) {
		if arch != core.ArchARM64 {
			t.Errorf("%s %s: %s changed on x86_64", id, arch, file)
			return
		}
		named := false
		for _, n := range names {
			named = named || n == file
		}
		if !named {
			t.Errorf("%s %s: %s changed: -%q +%q", id, arch, file, d.removed, d.added)
			return
		}
		if strings.Join(d.removed, "\n") != strings.Join(sortedOld, "\n") || strings.Join(d.added, "\n") != strings.Join(sortedNew, "\n") {
			t.Errorf("%s %s: %s diff -%q +%q", id, arch, file, d.removed, d.added)
		}
	}
}

// referenceLanguages counts, from the reference's own meta.json files, the
// instances of the multilingual reference whose upstream Dockerfile.base
// or Dockerfile.env holds a line.
func referenceHolding(t *testing.T, line string) int {
	ref := references(t)[1]
	n := 0
	for id := range ref.recs {
		for _, f := range []string{"Dockerfile.base", "Dockerfile.env"} {
			b, err := os.ReadFile(filepath.Join(ref.dir, id, "arm64", f))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), line+"\n") {
				n++
				break
			}
		}
	}
	return n
}

func TestRuleChromeApt(t *testing.T) {
	old, new := ChromeAptLines()
	n := runRule(t, IDChromeApt, checkBlock([]string{"Dockerfile.base"}, old, new))
	// Every Multimodal instance of the reference half (53), nothing else.
	if want := referenceHolding(t, old[0]); n["verified"] != 0 || n["multilingual"] != want || want != 53 {
		t.Errorf("rule changed %v renders, want the %d arm64 renders holding the line (53)", n, want)
	}
}

func TestRulePnpmArm64(t *testing.T) {
	old, new := PnpmLines()
	n := runRule(t, IDPnpmArm64, checkBlock([]string{"Dockerfile.env"}, old, new))
	if want := referenceHolding(t, old[0]); n["verified"] != 0 || n["multilingual"] != want || want != 53 {
		t.Errorf("rule changed %v renders, want the %d arm64 renders holding the line (53)", n, want)
	}
}

func TestRuleMavenForMvnd(t *testing.T) {
	old, new := MvndLines()
	n := runRule(t, IDMavenForMvnd, checkBlock([]string{"Dockerfile.base", "Dockerfile.env"}, old, new))
	// All Java instances of the reference half (24).
	if want := referenceHolding(t, old[0]); n["verified"] != 0 || n["multilingual"] != want || want != 24 {
		t.Errorf("rule changed %v renders, want the %d arm64 renders holding the line (24)", n, want)
	}
}

// TestArm64RulesOnlyTouchArm64: with --pins default, every x86_64 file of
// the multilingual reference is upstream's byte for byte (no default rule
// matches a non-Python x86_64 recipe), and the arm64 Dockerfiles no longer
// fetch the x86-64-only artefacts upstream's arm64 files name.
func TestArm64RulesOnlyTouchArm64(t *testing.T) {
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	set, _ := Named("default")
	r := &render.Renderer{Tables: tables, Pins: set}
	ref := references(t)[1]
	amd64Only := []string{"[arch=amd64]", "pnpm-linux-x64", "linux-amd64.zip"}
	for id, inst := range ref.recs {
		res, err := r.RenderArches(context.Background(), inst, core.AllPlatforms())
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			want, _ := os.ReadFile(filepath.Join(ref.dir, id, "x86_64", f))
			if renderedFile(res[0], f) != string(want) {
				t.Errorf("%s x86_64: %s differs from upstream with --pins default", id, f)
			}
		}
		for _, f := range []string{"Dockerfile.base", "Dockerfile.env"} {
			for _, s := range amd64Only {
				if strings.Contains(renderedFile(res[1], f), s) {
					t.Errorf("%s arm64: %s still holds %q", id, f, s)
				}
			}
		}
	}
}

// TestPinnedDockerfilesParse parses, with BuildKit's own Dockerfile parser,
// every arm64 Dockerfile the default pins change in the multilingual
// reference and checks that it keeps upstream's instruction sequence (the
// rules replace lines inside one RUN; they never add or drop an
// instruction).
func TestPinnedDockerfilesParse(t *testing.T) {
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	set, _ := Named("default")
	r := &render.Renderer{Tables: tables, Pins: set}
	ref := references(t)[1]
	instructions := func(name, text string) []string {
		res, err := parser.Parse(strings.NewReader(text))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var out []string
		for _, n := range res.AST.Children {
			out = append(out, n.Value)
		}
		return out
	}
	checked := 0
	for id, inst := range ref.recs {
		res, err := r.Render(context.Background(), inst, core.ARM64)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Pins) == 0 {
			continue
		}
		for _, f := range []string{"Dockerfile.base", "Dockerfile.env"} {
			want, err := os.ReadFile(filepath.Join(ref.dir, id, "arm64", f))
			if err != nil {
				t.Fatal(err)
			}
			got := renderedFile(res, f)
			if got == string(want) {
				continue
			}
			checked++
			a, b := instructions(id+" upstream "+f, string(want)), instructions(id+" pinned "+f, got)
			if strings.Join(a, " ") != strings.Join(b, " ") {
				t.Errorf("%s %s: instructions %v, upstream %v", id, f, b, a)
			}
		}
	}
	if checked != 53+53+2*24 {
		t.Errorf("checked %d pinned Dockerfiles, want 154 (53 JS base, 53 JS env, 24 Java base and env)", checked)
	}
}
