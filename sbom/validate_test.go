package sbom

import (
	"errors"
	"os"
	"testing"
)

// Every package of the real listings in testdata (pip freeze and dpkg-query
// in the fixture images, the conda explicit example of mamba's guide) is
// within its grammar.
func TestRealListingsValidate(t *testing.T) {
	for _, l := range []struct{ file, format string }{
		{"testdata/fixture-py-pip-freeze.txt", FormatPipFreeze},
		{"testdata/fixture-py-dpkg-query.txt", FormatDpkgQuery},
		{"testdata/fixture-js-dpkg-query.txt", FormatDpkgQuery},
		{"testdata/mamba-docs-conda-explicit.txt", FormatCondaExplicit},
	} {
		raw, err := os.ReadFile(l.file)
		if err != nil {
			t.Fatal(err)
		}
		pkgs, err := Parse(l.format, raw)
		if err != nil {
			t.Fatal(err)
		}
		if len(pkgs) == 0 {
			t.Fatalf("%s: no packages", l.file)
		}
		d := &Document{Packages: pkgs}
		if err := d.Validate(); err != nil {
			t.Errorf("%s: %v", l.file, err)
		}
	}
}

// Versions in and out of PEP 440 (its own examples: every spelling it
// normalises is accepted) and of Debian policy 5.6.12.
func TestVersionGrammars(t *testing.T) {
	for _, tc := range []struct {
		eco, version string
		ok           bool
	}{
		{PyPI, "1.0", true}, {PyPI, "1.0.dev456", true}, {PyPI, "1.0a1", true}, {PyPI, "1.0b2.post345.dev456", true},
		{PyPI, "1.0rc1", true}, {PyPI, "1.0c1", true}, {PyPI, "1.0.post456.dev34", true}, {PyPI, "1!1.0", true},
		{PyPI, "2012.10", true}, {PyPI, "1.0+ubuntu-1", true}, {PyPI, "1.0.0+repack", true}, {PyPI, "v1.0", true},
		{PyPI, "1.0-1", true}, {PyPI, "1.0_alpha-2", true}, {PyPI, "1.1RC1", true},
		{PyPI, "1.0 ", false}, {PyPI, "1..0", false}, {PyPI, "latest", false}, {PyPI, "1.0;x", false}, {PyPI, "1.0+", false},
		{Deb, "1:2.38.1-5+deb12u1", true}, {Deb, "2.36-9+deb12u7", true}, {Deb, "0.0~git20230101-1", true}, {Deb, "20230311", true},
		{Deb, "a1.0", false}, {Deb, "1.0 1", false}, {Deb, "1.0_1", false}, {Deb, "", false},
	} {
		p := Package{Ecosystem: tc.eco, Name: "pkg", Version: tc.version}
		err := p.Validate()
		var fe *FieldError
		if tc.ok != (err == nil) || (err != nil && (!errors.As(err, &fe) || fe.Field != "version")) {
			t.Errorf("%s version %q: %v; want ok=%v", tc.eco, tc.version, err, tc.ok)
		}
	}
}
