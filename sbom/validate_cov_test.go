package sbom

import (
	"errors"
	"strings"
	"testing"
)

// Fields outside their ecosystem's grammar (PEP 508 names, conda's
// NAME-VERSION-BUILD file names and subdirs, Debian policy 5.6.1 and
// 5.6.12, checksums ALG:HEX): each refused as a *FieldError naming the
// field, with the package quoted in the message.
func TestValidateFieldErrors(t *testing.T) {
	const md5 = "d41d8cd98f00b204e9800998ecf8427e" // md5 of nothing
	conda := func(mod func(*Package)) Package {
		p := Package{Ecosystem: Conda, Name: "libgcc-ng", Version: "13.2.0", Build: "h807b86a_5", Arch: "linux-64",
			URL: "https://conda.anaconda.org/conda-forge/linux-64/libgcc-ng-13.2.0-h807b86a_5.conda"}
		if mod != nil {
			mod(&p)
		}
		return p
	}
	cases := []struct {
		name  string
		p     Package
		field string // "" when valid
		msg   string
	}{
		{"pypi ok", Package{Ecosystem: PyPI, Name: "zope.interface", Version: "6.0"}, "", ""},
		{"pypi no version", Package{Ecosystem: PyPI, Name: "calc", URL: "-e /testbed"}, "", ""},
		{"pypi name with a space", Package{Ecosystem: PyPI, Name: "bad name", Version: "1.0"}, "name", "not a PEP 508 distribution name"},
		{"pypi name ending in a dot", Package{Ecosystem: PyPI, Name: "name.", Version: "1.0"}, "name", "not a PEP 508 distribution name"},
		{"pypi source with a newline", Package{Ecosystem: PyPI, Name: "calc", URL: "calc @ file:///x\nrm -rf /"}, "url", "a control character in pip's source"},
		{"conda ok", conda(nil), "", ""},
		{"conda .tar.bz2 ok", conda(func(p *Package) { p.URL = strings.TrimSuffix(p.URL, ".conda") + ".tar.bz2" }), "", ""},
		{"conda checksum ok", conda(func(p *Package) { p.Checksum = "md5:" + md5 }), "", ""},
		{"conda upper-case name", conda(func(p *Package) { p.Name = "LibGCC" }), "name", "not a conda package name"},
		{"conda version with a dash", conda(func(p *Package) { p.Version = "13-2" }), "version", "not a conda version"},
		{"conda build with a bang", conda(func(p *Package) { p.Build = "h80!" }), "build", "not a conda build string"},
		{"conda subdir with a slash", conda(func(p *Package) { p.Arch = "linux/64" }), "arch", "not a conda subdir"},
		{"conda URL with a query", conda(func(p *Package) { p.URL += "?x=1" }), "url", "not an http(s) or file URL of plain characters"},
		{"conda URL over ftp", conda(func(p *Package) { p.URL = strings.Replace(p.URL, "https", "ftp", 1) }), "url", "not an http(s) or file URL"},
		{"conda URL of a wheel", conda(func(p *Package) { p.URL = strings.TrimSuffix(p.URL, ".conda") + ".whl" }), "url", "its file name does not end in .conda or .tar.bz2"},
		{"conda URL of another build", conda(func(p *Package) { p.Build = "h807b86a_6" }), "url", "its file name is libgcc-ng-13.2.0-h807b86a_5.conda, not the package's libgcc-ng-13.2.0-h807b86a_6"},
		{"conda URL in another subdir", conda(func(p *Package) { p.Arch = "linux-aarch64" }), "url", "its directory is not the package's subdir linux-aarch64"},
		{"deb ok", Package{Ecosystem: Deb, Name: "libc6", Version: "2.36-9+deb12u7", Arch: "amd64"}, "", ""},
		{"deb one-letter name", Package{Ecosystem: Deb, Name: "a", Version: "1.0"}, "name", "not a Debian package name"},
		{"deb upper-case name", Package{Ecosystem: Deb, Name: "LibC6", Version: "1.0"}, "name", "not a Debian package name"},
		{"deb arch with a space", Package{Ecosystem: Deb, Name: "libc6", Version: "1.0", Arch: "amd 64"}, "arch", "not a Debian architecture"},
		{"npm", Package{Ecosystem: "npm", Name: "left-pad", Version: "1.3.0"}, "ecosystem", "not pypi, conda or deb"},
		{"sha256 checksum of md5's length", Package{Ecosystem: Deb, Name: "libc6", Version: "1.0", Checksum: "sha256:" + md5}, "checksum", "not md5, sha1, sha256 or sha512 as ALG:HEX"},
		{"upper-case hex", Package{Ecosystem: Deb, Name: "libc6", Version: "1.0", Checksum: "md5:" + strings.ToUpper(md5)}, "checksum", "not md5"},
		{"unknown algorithm", Package{Ecosystem: Deb, Name: "libc6", Version: "1.0", Checksum: "crc32:00000000"}, "checksum", "not md5"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate(%+v): %v", tc.p, err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Msg, tc.msg) {
				t.Fatalf("Validate(%+v) = %v; want a %s error %q", tc.p, err, tc.field, tc.msg)
			}
			if fe.Package != tc.p.Key() {
				t.Errorf("FieldError.Package = %q, want %q", fe.Package, tc.p.Key())
			}
		})
	}
}

func TestFieldErrorMessage(t *testing.T) {
	err := (Package{Ecosystem: PyPI, Name: `x"$(id)`, Version: "1.0"}).Validate()
	want := `package pypi/"x\"$(id)": name "x\"$(id)": not a PEP 508 distribution name`
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	d := &Document{Packages: []Package{
		{Ecosystem: Deb, Name: "libc6", Version: "2.36-9"},
		{Ecosystem: Deb, Name: "zlib1g", Version: "1:1.2.13.dfsg-1\n"},
	}}
	err = d.Validate()
	want = `package deb/"zlib1g": version "1:1.2.13.dfsg-1\n": not a Debian version ([epoch:]upstream[-revision])`
	if err == nil || err.Error() != want {
		t.Errorf("Document.Validate: %v\nwant %s", err, want)
	}
}
