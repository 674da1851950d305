package pins

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

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

// runRule renders every Verified reference instance, both arches, with only
// rule id and hands each non-empty file diff to check. It returns how many
// renders the rule changed.
func runRule(t *testing.T, id string, check checker) int {
	shared := spectest.SharedDir(t)
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	set, err := Only(id)
	if err != nil {
		t.Fatal(err)
	}
	r := &render.Renderer{Tables: tables, Pins: set}
	recs := spectest.Records(t, shared, "SWE-bench_Verified/test")["SWE-bench_Verified/test"]
	refDir := filepath.Join(shared, "upstream-v4.1.0", "instances")
	ids := make([]string, 0, len(recs))
	for k := range recs {
		ids = append(ids, k)
	}
	sort.Strings(ids)
	changed := 0
	for _, iid := range ids {
		for _, platform := range core.AllPlatforms() {
			arch := platform.Arch()
			res, err := r.Render(context.Background(), recs[iid], platform)
			if err != nil {
				t.Fatalf("%s %s: %v", iid, arch, err)
			}
			if len(res.Pins) > 0 {
				changed++
				if len(res.Pins) != 1 || res.Pins[0] != id {
					t.Errorf("%s %s: pins %v, want [%s]", iid, arch, res.Pins, id)
				}
			}
			anyDiff := false
			for _, f := range files {
				want, err := os.ReadFile(filepath.Join(refDir, iid, arch, f))
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
			raw, _ := os.ReadFile(filepath.Join(refDir, iid, arch, "meta.json"))
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			if res.BaseKey != m.Base {
				t.Errorf("%s %s: base key changed to %s", iid, arch, res.BaseKey)
			}
			if envChanged := res.EnvKey != m.Env; envChanged != (id != IDCondaChannels && anyDiff) {
				t.Errorf("%s %s: env key changed=%v with rule %s", iid, arch, envChanged, id)
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
	if n != 1000 {
		t.Errorf("rule changed %d renders, want all 1000", n)
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
	if n != 500 {
		t.Errorf("rule changed %d renders, want the 500 arm64 ones", n)
	}
}

func TestRuleSphinxPygments(t *testing.T) {
	// Every bundled sphinx environment.yml already pins pygments==2.18.0, so
	// on Verified the rule must change nothing.
	n := runRule(t, IDSphinxPygments, func(t *testing.T, id, arch, file string, d fileDiff) {
		t.Errorf("%s %s: %s changed: -%q +%q", id, arch, file, d.removed, d.added)
	})
	if n != 0 {
		t.Errorf("rule changed %d renders", n)
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
	if err != nil || len(def.Rules()) != 3 {
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
