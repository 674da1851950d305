package pyindex

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

// TestWheel: a wheel holds its files, METADATA, WHEEL, entry_points.txt
// and a RECORD whose hashes and sizes are those of the files (what pip
// checks on install); the same package gives the same bytes.
func TestWheel(t *testing.T) {
	sc, err := Lookup("breaking-dependency")
	if err != nil {
		t.Fatal(err)
	}
	var p Package
	for _, r := range sc.Release {
		if r.Name == "fixdep" {
			p = r
		}
	}
	b, err := Wheel(p)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Wheel(p)
	if !bytes.Equal(b, again) {
		t.Error("the same package gave other bytes")
	}
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		c, _ := io.ReadAll(rc)
		files[f.Name] = string(c)
	}
	info := "fixdep-1.1.dist-info/"
	for _, n := range []string{"fixdep/__init__.py", "fixdep/plugin.py", info + "METADATA", info + "WHEEL", info + "entry_points.txt", info + "RECORD"} {
		if _, ok := files[n]; !ok {
			t.Errorf("wheel lacks %s", n)
		}
	}
	if files[info+"entry_points.txt"] != "[pytest11]\nfixdep = fixdep.plugin\n" || !strings.Contains(files["fixdep/plugin.py"], "def pytest_runtest_setup(item):\n    raise RuntimeError(") {
		t.Errorf("plugin: %q %q", files[info+"entry_points.txt"], files["fixdep/plugin.py"])
	}
	lines := strings.Split(strings.TrimSpace(files[info+"RECORD"]), "\n")
	if len(lines) != len(files) {
		t.Errorf("RECORD lists %d files, the wheel has %d", len(lines), len(files))
	}
	for _, l := range lines {
		parts := strings.Split(l, ",")
		if parts[0] == info+"RECORD" {
			continue
		}
		sum := sha256.Sum256([]byte(files[parts[0]]))
		if want := fmt.Sprintf("%s,sha256=%s,%d", parts[0], base64.RawURLEncoding.EncodeToString(sum[:]), len(files[parts[0]])); l != want {
			t.Errorf("RECORD line %q, want %q", l, want)
		}
	}
	if p.FileName() != "fixdep-1.1-py3-none-any.whl" {
		t.Errorf("file name %s", p.FileName())
	}
}

// TestScenarios: night 2's index keeps night 1's releases and adds one new
// version of each required package; the specs make calc's env install them
// from the context's wheels directory with no index.
func TestScenarios(t *testing.T) {
	raw, err := os.ReadFile("../../testdata/fixture/specs.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range ScenarioNames {
		sc, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(sc.Night(1)) != len(sc.Requires) || len(sc.Night(2)) != 2*len(sc.Requires) {
			t.Errorf("%s: nights of %d and %d wheels", name, len(sc.Night(1)), len(sc.Night(2)))
		}
		b, err := Specs(raw, sc.Requires)
		if err != nil {
			t.Fatal(err)
		}
		var specs map[string]any
		if err := json.Unmarshal(b, &specs); err != nil {
			t.Fatal(err)
		}
		prof := specs["profile"].(map[string]any)
		if env := prof["env_dockerfile"].(string); !strings.Contains(env, "\nCOPY wheels /wheels\nENV PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheels\n") {
			t.Errorf("env dockerfile %q", env)
		}
		calc, _ := lookup(specs, "specs", "fixture/calc", "1.0")
		if got := fmt.Sprint(calc["pip_packages"]); got != "[fixaux fixdep fixfmt fixlog]" {
			t.Errorf("calc pip_packages %s", got)
		}
		if textutil, _ := lookup(specs, "specs", "fixture/textutil", "1.0"); textutil["pip_packages"] != nil {
			t.Error("textutil's spec changed")
		}
	}
	if _, err := Lookup("nope"); err == nil || !strings.Contains(err.Error(), "breaking-dependency, breaking-together") {
		t.Errorf("unknown scenario: %v", err)
	}
}
