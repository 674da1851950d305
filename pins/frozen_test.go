package pins

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/sbom"
)

// captured is a calc env's document: the fixture image's real pip freeze
// (the sbom package's test data) plus fixdep 1.0.
func captured(t *testing.T, p core.Platform, ids ...string) *sbom.Document {
	t.Helper()
	raw, err := os.ReadFile("../sbom/testdata/fixture-py-pip-freeze.txt")
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := sbom.Parse(sbom.FormatPipFreeze, append(raw, "fixdep==1.0\nFix_Helper==2.0\n"...))
	if err != nil {
		t.Fatal(err)
	}
	return &sbom.Document{Kind: "env", Image: "sweb.env.fixture." + p.Arch() + ".x", Platform: p,
		Repo: "fixture/calc", Version: "1.0", InstanceIDs: ids, Packages: pkgs}
}

func TestFrozenRule(t *testing.T) {
	docs := []*sbom.Document{captured(t, core.AMD64, "fixture__calc-1", "fixture__calc-2"), captured(t, core.ARM64)}
	rule, err := Frozen(docs)
	if err != nil {
		t.Fatal(err)
	}
	set := (&Set{}).With(rule)
	recipe := func(id, repo string, p core.Platform, pip ...string) *spec.Recipe {
		return &spec.Recipe{InstanceID: id, Repo: repo, Version: "1.0", Platform: p, Spec: spec.Spec{PipPackages: pip}}
	}
	constraints := "-c /dev/stdin <<'SWEBUILD_FROZEN'\nattrs==22.2.0\nfix-helper==2.0\nfixdep==1.0\niniconfig==1.1.1\nmore-itertools==8.10.0\n" +
		"packaging==23.0\npip==23.0.1\npluggy==1.0.0+repack\npy==1.11.0\npytest==7.2.1\nsetuptools==66.1.1\nwheel==0.38.4\nSWEBUILD_FROZEN"
	for _, c := range []struct {
		name string
		rec  *spec.Recipe
		want []string // nil: unchanged
	}{
		{"by instance id", recipe("fixture__calc-1", "other/repo", core.AMD64, "fixdep", "fix_helper>=1", "--pre", "unknown"),
			[]string{"fixdep==1.0", "fix-helper==2.0", "--pre", "unknown", constraints}},
		{"by repo and version", recipe("fixture__calc-9", "fixture/calc", core.ARM64, "fixdep"), []string{"fixdep==1.0", constraints}},
		{"other platform", recipe("fixture__calc-1", "other/repo", core.ARM64, "fixdep"), nil},
		{"no pip line", recipe("fixture__calc-1", "fixture/calc", core.AMD64), nil},
		{"no document", recipe("fixture__textutil-1", "fixture/textutil", core.AMD64, "fixdep"), nil},
	} {
		before := append([]string(nil), c.rec.Spec.PipPackages...)
		set.Apply(c.rec)
		if c.want == nil {
			if !reflect.DeepEqual(c.rec.Spec.PipPackages, before) && !(len(before) == 0 && c.rec.Spec.PipPackages == nil) || len(c.rec.Pins) != 0 {
				t.Errorf("%s: changed to %q (pins %v)", c.name, c.rec.Spec.PipPackages, c.rec.Pins)
			}
			continue
		}
		if !reflect.DeepEqual(c.rec.Spec.PipPackages, c.want) {
			t.Errorf("%s: pip_packages =\n%q\nwant\n%q", c.name, c.rec.Spec.PipPackages, c.want)
		}
		if !reflect.DeepEqual(c.rec.Pins, []string{IDFrozen}) {
			t.Errorf("%s: pins = %v", c.name, c.rec.Pins)
		}
	}
	if _, err := Frozen([]*sbom.Document{{Kind: "instance"}}); err == nil {
		t.Error("Frozen with no env document: no error")
	}
}

func TestReadFrozenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadFrozen(dir); err == nil || !strings.Contains(err.Error(), "no environment documents") {
		t.Errorf("empty dir: %v", err)
	}
	bad := filepath.Join(dir, "env.x.linux-amd64.cdx.json")
	if err := os.WriteFile(bad, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFrozen(dir); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("a broken document: %v, want its path named", err)
	}
}
