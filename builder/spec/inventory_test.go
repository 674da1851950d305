package spec_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/sbom"
)

// TestInventory: the listing commands per repo. The fixture's profiles name
// theirs (specs.json); upstream Python repos list the testbed conda env and
// pip's view of it; upstream repos of other languages list Debian packages;
// an unknown repo lists nothing.
func TestInventory(t *testing.T) {
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := tables.LoadExtra(filepath.Join(stacktest.FixtureDir(t), "specs.json")); err != nil {
		t.Fatal(err)
	}
	formats := func(repo string) []string {
		var out []string
		for _, c := range tables.Inventory(repo) {
			out = append(out, c.Format)
		}
		return out
	}
	nonPy := ""
	for _, r := range tables.Repos() {
		if tables.Language(r) != "py" {
			nonPy = r
			break
		}
	}
	for _, tc := range []struct {
		repo string
		want []string
	}{
		{"fixture/calc", []string{sbom.FormatPipFreeze, sbom.FormatDpkgQuery}},
		{"fixture/semver", []string{sbom.FormatDpkgQuery}},
		{"astropy/astropy", []string{sbom.FormatCondaExplicit, sbom.FormatPipFreeze}},
		{"django/django", []string{sbom.FormatCondaExplicit, sbom.FormatPipFreeze}},
		{nonPy, []string{sbom.FormatDpkgQuery}},
		{"no/such-repo", nil},
	} {
		if got := formats(tc.repo); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: listing formats %v, want %v", tc.repo, got, tc.want)
		}
	}
	if nonPy == "" {
		t.Error("no upstream repo of another language than Python")
	}
	for _, c := range tables.Inventory("django/django") {
		if !strings.HasPrefix(c.Run, "source /opt/miniconda3/bin/activate && conda activate testbed && ") {
			t.Errorf("django: %q does not run in the testbed env", c.Run)
		}
	}
}

// TestInventoryErrors: a bad listing command in a specs file names the file
// and the field.
func TestInventoryErrors(t *testing.T) {
	base := `"name": "p", "base_dockerfile": "FROM scratch", "env_dockerfile": "FROM x", "instance_dockerfile": "FROM y", "clone_url": "/m/{name}.git", "activate": []`
	for _, tc := range []struct{ file, want string }{
		{`{"profile": {` + base + `, "inventory": [{"format": "rpm", "run": "rpm -qa"}]}, "specs": {"o/r": {"1": {"test_cmd": "t"}}}}`,
			`profile.inventory[0].format: "rpm" is not one of pip-freeze, conda-explicit, dpkg-query`},
		{`{"profiles": [{"profile": {` + base + `, "inventory": [{"format": "dpkg-query", "run": "dpkg-query -W"}, {"format": "pip-freeze", "run": " "}]}, "specs": {"o/r": {"1": {"test_cmd": "t"}}}}]}`,
			`profiles[0].profile.inventory[1].run: missing`},
		{`{"profile": {` + base + `, "inventory": [{"format": "dpkg-query", "command": "dpkg-query -W"}]}, "specs": {"o/r": {"1": {"test_cmd": "t"}}}}`,
			`unknown field "command"`},
	} {
		p := filepath.Join(t.TempDir(), "specs.json")
		if err := os.WriteFile(p, []byte(tc.file), 0o644); err != nil {
			t.Fatal(err)
		}
		tables, err := spec.Load()
		if err != nil {
			t.Fatal(err)
		}
		err = tables.LoadExtra(p)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("LoadExtra: %v, want an error naming %s and %q", err, p, tc.want)
		}
	}
}
