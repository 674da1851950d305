// Package pyindex makes pure-Python wheels and the fixture's package
// index scenarios: a directory of wheels that pip reads with --find-links
// and no index (PIP_NO_INDEX), made by the tests and the nightly's
// rehearsal themselves, so a "release" of a dependency is a new wheel in
// the directory.
package pyindex

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Package is one release of a pure-Python distribution.
type Package struct {
	Name, Version string
	// Files are the wheel's files besides its .dist-info (path ->
	// content); empty: NAME/__init__.py with __version__.
	Files map[string]string
	// EntryPoints is the entry_points.txt content, if any (a pytest
	// plugin: "[pytest11]\nNAME = NAME.plugin\n").
	EntryPoints string
}

// FileName is the wheel's file name: NAME-VERSION-py3-none-any.whl.
func (p Package) FileName() string { return p.Name + "-" + p.Version + "-py3-none-any.whl" }

// wheelTime dates every file of a wheel, so the same package gives the same
// bytes.
var wheelTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// Wheel returns the wheel of p: a zip holding its files, METADATA, WHEEL,
// entry_points.txt when set, and RECORD with every other file's sha256 and
// size, as pip reads it.
func Wheel(p Package) ([]byte, error) {
	info := p.Name + "-" + p.Version + ".dist-info/"
	files := map[string]string{}
	for k, v := range p.Files {
		files[k] = v
	}
	if len(files) == 0 {
		files[p.Name+"/__init__.py"] = fmt.Sprintf("__version__ = %q\n", p.Version)
	}
	files[info+"METADATA"] = "Metadata-Version: 2.1\nName: " + p.Name + "\nVersion: " + p.Version + "\n"
	files[info+"WHEEL"] = "Wheel-Version: 1.0\nGenerator: swebuild-pyindex\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
	if p.EntryPoints != "" {
		files[info+"entry_points.txt"] = p.EntryPoints
	}
	names := slices.Sorted(maps.Keys(files))
	var record strings.Builder
	for _, n := range names {
		sum := sha256.Sum256([]byte(files[n]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", n, base64.RawURLEncoding.EncodeToString(sum[:]), len(files[n]))
	}
	record.WriteString(info + "RECORD,,\n")
	files[info+"RECORD"] = record.String()
	names = append(names, info+"RECORD")
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range names {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: n, Method: zip.Deflate, Modified: wheelTime})
		if err != nil {
			return nil, fmt.Errorf("wheel %s: %w", p.FileName(), err)
		}
		if _, err := w.Write([]byte(files[n])); err != nil {
			return nil, fmt.Errorf("wheel %s: %w", p.FileName(), err)
		}
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("wheel %s: %w", p.FileName(), err)
	}
	return buf.Bytes(), nil
}

// WriteIndex writes the wheel of every package into dir (made if needed).
func WriteIndex(dir string, pkgs []Package) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("package index: %w", err)
	}
	for _, p := range pkgs {
		b, err := Wheel(p)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, p.FileName()), b, 0o644); err != nil {
			return fmt.Errorf("package index: %w", err)
		}
	}
	return nil
}

// Scenario is a fixture index over two nights: calc's env installs
// Requires (unpinned) from it; night 1's index holds the first releases,
// night 2's adds the new ones (an index keeps old releases).
type Scenario struct {
	Name string
	// What says what night 2's release does.
	What     string
	Requires []string
	Night1   []Package
	Release  []Package
}

// Night returns the index of night n (1 or 2).
func (s Scenario) Night(n int) []Package {
	if n == 1 {
		return s.Night1
	}
	return append(slices.Clone(s.Night1), s.Release...)
}

func plain(name, version string) Package { return Package{Name: name, Version: version} }

// plugin is a release carrying a pytest plugin (loaded by the pytest11
// entry point into every pytest run of the env) with the given
// pytest_runtest_setup body.
func plugin(name, version, body string) Package {
	return Package{Name: name, Version: version,
		Files: map[string]string{
			name + "/__init__.py": fmt.Sprintf("__version__ = %q\n", version),
			name + "/plugin.py":   "\"\"\"" + name + " " + version + "'s pytest plugin (entry point pytest11).\"\"\"\n\n\ndef pytest_runtest_setup(item):\n" + body,
		},
		EntryPoints: "[pytest11]\n" + name + " = " + name + ".plugin\n"}
}

// ScenarioNames are the scenarios Lookup knows.
var ScenarioNames = []string{"breaking-dependency", "breaking-together"}

// Lookup returns a scenario by name:
//
//   - breaking-dependency: calc's env installs fixaux, fixdep, fixfmt and
//     fixlog (1.0 on night 1); night 2 releases 1.1 of each: fixdep 1.1
//     ships a pytest plugin that fails every test it is loaded into, the
//     other three are harmless.
//   - breaking-together: the same four; night 2's fixdep 1.1 plugin fails a
//     test only when fixaux's API is 2, which fixaux 1.1 brings: each
//     release alone is harmless, the two together break calc's tests.
func Lookup(name string) (Scenario, error) {
	requires := []string{"fixaux", "fixdep", "fixfmt", "fixlog"}
	night1 := []Package{
		{Name: "fixaux", Version: "1.0", Files: map[string]string{"fixaux/__init__.py": "__version__ = \"1.0\"\nAPI = 1\n"}},
		plain("fixdep", "1.0"), plain("fixfmt", "1.0"), plain("fixlog", "1.0"),
	}
	aux11 := Package{Name: "fixaux", Version: "1.1", Files: map[string]string{"fixaux/__init__.py": "__version__ = \"1.1\"\nAPI = 2\n"}}
	switch name {
	case "breaking-dependency":
		return Scenario{Name: name, Requires: requires, Night1: night1,
			What: "fixdep 1.1 breaks calc's tests (its pytest plugin fails every test); fixaux, fixfmt and fixlog 1.1 are harmless",
			Release: []Package{aux11,
				plugin("fixdep", "1.1", "    raise RuntimeError(\"fixdep 1.1: its pytest plugin fails \" + item.nodeid)\n"),
				plain("fixfmt", "1.1"), plain("fixlog", "1.1")}}, nil
	case "breaking-together":
		return Scenario{Name: name, Requires: requires, Night1: night1,
			What: "fixdep 1.1 and fixaux 1.1 break calc's tests only together (fixdep 1.1's plugin fails a test when fixaux's API is 2); fixfmt and fixlog 1.1 are harmless",
			Release: []Package{aux11,
				plugin("fixdep", "1.1", "    import fixaux\n    if getattr(fixaux, \"API\", 1) >= 2:\n        raise RuntimeError(\"fixdep 1.1 with fixaux API 2 fails \" + item.nodeid)\n"),
				plain("fixfmt", "1.1"), plain("fixlog", "1.1")}}, nil
	}
	return Scenario{}, fmt.Errorf("unknown scenario %q (want one of %s)", name, strings.Join(ScenarioNames, ", "))
}

// Specs returns the fixture's specs file (testdata/fixture/specs.json)
// with calc's env installing requires unpinned from the index: the Python
// profile's env image gets the wheels directory of its build context (the
// profile's context.env: ["wheels"]) and pip reads only it (PIP_NO_INDEX,
// PIP_FIND_LINKS=/wheels).
func Specs(fixture []byte, requires []string) ([]byte, error) {
	var specs map[string]any
	if err := json.Unmarshal(fixture, &specs); err != nil {
		return nil, fmt.Errorf("fixture specs: %w", err)
	}
	prof, ok := specs["profile"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("fixture specs: no profile")
	}
	env, _ := prof["env_dockerfile"].(string)
	from, rest, ok := strings.Cut(env, "\n")
	if !ok || !strings.HasPrefix(from, "FROM ") {
		return nil, fmt.Errorf("fixture specs: profile.env_dockerfile starts %q, not FROM", from)
	}
	prof["env_dockerfile"] = from + "\nCOPY wheels /wheels\nENV PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheels\n" + rest
	ctx, ok := prof["context"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("fixture specs: profile.context missing")
	}
	ctx["env"] = []string{"wheels"}
	calc, ok := lookup(specs, "specs", "fixture/calc", "1.0")
	if !ok {
		return nil, fmt.Errorf("fixture specs: no specs.fixture/calc.1.0")
	}
	calc["pip_packages"] = requires
	b, err := json.MarshalIndent(specs, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func lookup(m map[string]any, path ...string) (map[string]any, bool) {
	for _, p := range path {
		next, ok := m[p].(map[string]any)
		if !ok {
			return nil, false
		}
		m = next
	}
	return m, true
}
