package sbom

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/core"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func find(ps []Package, key string) (Package, bool) {
	for _, p := range ps {
		if p.Key() == key {
			return p, true
		}
	}
	return Package{}, false
}

// The listings in testdata were captured from real images and docs (see
// testdata/README.md); the expected values are read off those files.
func TestParseRealListings(t *testing.T) {
	tests := []struct {
		file, format string
		count        int
		want         []Package
	}{
		{"fixture-py-pip-freeze.txt", FormatPipFreeze, 11, []Package{
			{Ecosystem: PyPI, Name: "calc", Version: "1.0.0", URL: "-e /testbed"},
			{Ecosystem: PyPI, Name: "more-itertools", Version: "8.10.0"},
			{Ecosystem: PyPI, Name: "pluggy", Version: "1.0.0+repack"},
			{Ecosystem: PyPI, Name: "setuptools", Version: "66.1.1"},
		}},
		{"fixture-py-dpkg-query.txt", FormatDpkgQuery, 146, []Package{
			{Ecosystem: Deb, Name: "bash", Version: "5.2.15-2+b13", Arch: "amd64"},
			{Ecosystem: Deb, Name: "libc6", Version: "2.36-9+deb12u14", Arch: "amd64"},
			{Ecosystem: Deb, Name: "adduser", Version: "3.134", Arch: "all"},
		}},
		{"fixture-js-dpkg-query.txt", FormatDpkgQuery, 123, []Package{
			{Ecosystem: Deb, Name: "bsdutils", Version: "1:2.38.1-5+deb12u3", Arch: "amd64"},
		}},
		{"mamba-docs-conda-explicit.txt", FormatCondaExplicit, 7, []Package{
			{Ecosystem: Conda, Name: "_libgcc_mutex", Version: "0.1", Build: "conda_forge", Arch: "linux-64",
				URL:      "https://conda.anaconda.org/conda-forge/linux-64/_libgcc_mutex-0.1-conda_forge.tar.bz2",
				Checksum: "md5:d7c89558ba9fa0495403155b64376d81"},
			{Ecosystem: Conda, Name: "libstdcxx-ng", Version: "9.3.0", Build: "h2ae2ef3_17", Arch: "linux-64",
				URL:      "https://conda.anaconda.org/conda-forge/linux-64/libstdcxx-ng-9.3.0-h2ae2ef3_17.tar.bz2",
				Checksum: "md5:342f3c931d0a3a209ab09a522469d20c"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			ps, err := Parse(tc.format, readTestdata(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(ps) != tc.count {
				t.Errorf("%d packages, want %d", len(ps), tc.count)
			}
			for _, w := range tc.want {
				got, ok := find(ps, w.Key())
				if !ok {
					t.Errorf("%s missing", w.Key())
					continue
				}
				if got != w {
					t.Errorf("%s = %+v, want %+v", w.Key(), got, w)
				}
			}
			if !slices.IsSortedFunc(ps, func(a, b Package) int { return strings.Compare(a.Key(), b.Key()) }) {
				t.Error("not sorted by key")
			}
		})
	}
}

func TestParseForms(t *testing.T) {
	tests := []struct {
		name, format, in string
		want             []Package
	}{
		{"pep503 and ===", FormatPipFreeze, "Flask_Login==0.6.3\nzope.interface===5.0\n", []Package{
			{Ecosystem: PyPI, Name: "flask-login", Version: "0.6.3"},
			{Ecosystem: PyPI, Name: "zope-interface", Version: "5.0"},
		}},
		{"direct reference", FormatPipFreeze, "calc @ file:///testbed\n", []Package{
			{Ecosystem: PyPI, Name: "calc", URL: "calc @ file:///testbed"},
		}},
		{"editable egg", FormatPipFreeze, "-e git+https://github.com/a/b@0123#egg=My_Pkg\n", []Package{
			{Ecosystem: PyPI, Name: "my-pkg", URL: "-e git+https://github.com/a/b@0123#egg=My_Pkg"},
		}},
		{"editable no vcs", FormatPipFreeze, "# Editable install with no version control (Foo.Bar==2.1)\n-e /src\n", []Package{
			{Ecosystem: PyPI, Name: "foo-bar", Version: "2.1", URL: "-e /src"},
		}},
		{"conda .conda without md5", FormatCondaExplicit, "@EXPLICIT\nhttps://repo.anaconda.com/pkgs/main/noarch/tzdata-2020f-h52ac0ba_0.conda\n", []Package{
			{Ecosystem: Conda, Name: "tzdata", Version: "2020f", Build: "h52ac0ba_0", Arch: "noarch",
				URL: "https://repo.anaconda.com/pkgs/main/noarch/tzdata-2020f-h52ac0ba_0.conda"},
		}},
		{"dpkg not installed skipped", FormatDpkgQuery, "a\t1.0\tamd64\nb\t\t\n", []Package{
			{Ecosystem: Deb, Name: "a", Version: "1.0", Arch: "amd64"},
		}},
		{"empty", FormatDpkgQuery, "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.format, []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		format, in, want string
	}{
		{FormatPipFreeze, "attrs==22.2.0\nnot a requirement\n", `line 2 "not a requirement"`},
		{FormatPipFreeze, "-e /testbed\n", `line 1 "-e /testbed": an editable install whose package name`},
		{FormatPipFreeze, "x==\n", `line 1 "x=="`},
		{FormatCondaExplicit, "@EXPLICIT\nhttps://x/linux-64/foo.whl\n", `line 2 "https://x/linux-64/foo.whl"`},
		{FormatCondaExplicit, "https://x/linux-64/a-1-b.conda#zz\n", `"zz" is not an md5`},
		{FormatDpkgQuery, "a\t1\tamd64\nb 2 amd64\n", `line 2 "b 2 amd64": want 3 tab-separated fields`},
		{"rpm", "", `unknown listing format "rpm"`},
	}
	for _, tc := range tests {
		_, err := Parse(tc.format, []byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s, %q) = %v, want an error containing %q", tc.format, tc.in, err, tc.want)
		}
	}
}

func fixtureDocument(t *testing.T) *Document {
	t.Helper()
	var all []Package
	for _, l := range []Listing{
		{Format: FormatPipFreeze, Command: "pip freeze --all", Output: readTestdata(t, "fixture-py-pip-freeze.txt")},
		{Format: FormatDpkgQuery, Command: "dpkg-query", Output: readTestdata(t, "fixture-py-dpkg-query.txt")},
		{Format: FormatCondaExplicit, Command: "conda list", Output: readTestdata(t, "mamba-docs-conda-explicit.txt")},
	} {
		ps, err := l.Packages()
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ps...)
	}
	Sort(all)
	return &Document{
		Subject: "sha256:" + strings.Repeat("ab", 32), Kind: "env", Image: "sweb.env.fixture.x86_64.0123456789abcdef",
		Platform: core.AMD64, Repo: "fixture/calc", Version: "1.0",
		InstanceIDs: []string{"fixture__calc-1", "fixture__calc-2"}, SpecKey: "k-e74586a6fac4", Packages: all,
	}
}

func TestCycloneDXRoundTrip(t *testing.T) {
	d := fixtureDocument(t)
	raw, err := d.CycloneDX()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, d) {
		t.Errorf("round trip differs:\n got %+v\nwant %+v", back, d)
	}
	// Deterministic: same bytes again, and from shuffled packages.
	d2 := *d
	d2.Packages = slices.Clone(d.Packages)
	slices.Reverse(d2.Packages)
	raw2, err := d2.CycloneDX()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, raw2) {
		t.Error("CycloneDX bytes depend on the package order")
	}
	// A different subject gives a different serial number.
	d3 := *d
	d3.Subject = "sha256:" + strings.Repeat("cd", 32)
	raw3, _ := d3.CycloneDX()
	var a, b struct{ SerialNumber string }
	_ = json.Unmarshal(raw, &a)
	_ = json.Unmarshal(raw3, &b)
	if a.SerialNumber == "" || a.SerialNumber == b.SerialNumber {
		t.Errorf("serial numbers %q, %q", a.SerialNumber, b.SerialNumber)
	}
}

// The document's shape, as the CycloneDX 1.6 spec and the purl spec define
// it (expected purls written from the purl spec's rules: type, namespace
// debian for deb, qualifiers sorted by key and percent-encoded).
func TestCycloneDXShape(t *testing.T) {
	raw, err := fixtureDocument(t).CycloneDX()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		BOMFormat    string `json:"bomFormat"`
		SpecVersion  string `json:"specVersion"`
		SerialNumber string `json:"serialNumber"`
		Metadata     struct {
			Timestamp string `json:"timestamp"`
			Component struct {
				Type, Name, Version string
			} `json:"component"`
			Properties []struct{ Name, Value string } `json:"properties"`
		} `json:"metadata"`
		Components []struct {
			Name, Version, Purl string
			Hashes              []struct {
				Alg     string `json:"alg"`
				Content string `json:"content"`
			} `json:"hashes"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.BOMFormat != "CycloneDX" || doc.SpecVersion != "1.6" || doc.Metadata.Timestamp != "" {
		t.Errorf("bomFormat %q specVersion %q timestamp %q", doc.BOMFormat, doc.SpecVersion, doc.Metadata.Timestamp)
	}
	if !strings.HasPrefix(doc.SerialNumber, "urn:uuid:") || len(doc.SerialNumber) != len("urn:uuid:")+36 {
		t.Errorf("serialNumber %q", doc.SerialNumber)
	}
	if c := doc.Metadata.Component; c.Type != "container" || c.Name != "sweb.env.fixture.x86_64.0123456789abcdef" {
		t.Errorf("metadata component %+v", c)
	}
	props := map[string][]string{}
	for _, p := range doc.Metadata.Properties {
		props[p.Name] = append(props[p.Name], p.Value)
	}
	if got := props["swebuild:instance_id"]; !reflect.DeepEqual(got, []string{"fixture__calc-1", "fixture__calc-2"}) {
		t.Errorf("instance ids %v", got)
	}
	if got := props["swebuild:platform"]; !reflect.DeepEqual(got, []string{"linux/amd64"}) {
		t.Errorf("platform %v", got)
	}
	purls := map[string]bool{}
	for _, c := range doc.Components {
		purls[c.Purl] = true
		if c.Name == "_libgcc_mutex" && (len(c.Hashes) != 1 || c.Hashes[0].Alg != "MD5" || c.Hashes[0].Content != "d7c89558ba9fa0495403155b64376d81") {
			t.Errorf("_libgcc_mutex hashes %+v", c.Hashes)
		}
	}
	if len(doc.Components) != 11+146+7 {
		t.Errorf("%d components, want %d", len(doc.Components), 11+146+7)
	}
	for _, want := range []string{
		"pkg:pypi/more-itertools@8.10.0",
		"pkg:pypi/calc@1.0.0",
		"pkg:deb/debian/adduser@3.134?arch=all",
		"pkg:deb/debian/apt@2.6.1?arch=amd64",
		"pkg:conda/_libgcc_mutex@0.1?build=conda_forge&channel=https:%2F%2Fconda.anaconda.org%2Fconda-forge&subdir=linux-64&type=tar.bz2",
	} {
		if !purls[want] {
			t.Errorf("no component with purl %s", want)
		}
	}
}

// A CycloneDX document made by other tools: cyclonedx-go's own valid-bom
// example (an npm component only: no package we read), and a syft-style
// image SBOM.
func TestDecodeForeign(t *testing.T) {
	d, err := Decode(readTestdata(t, "cyclonedx-go-valid-bom.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Packages) != 0 || d.Kind != "" {
		t.Errorf("got %+v", d)
	}
	foreign := `{"bomFormat":"CycloneDX","specVersion":"1.5","version":1,
 "metadata":{"component":{"type":"container","name":"python:3.11","version":"sha256:` + strings.Repeat("0f", 32) + `"}},
 "components":[
  {"type":"library","name":"Flask_Login","version":"0.6.3","purl":"pkg:pypi/Flask_Login@0.6.3"},
  {"type":"library","name":"libc6","version":"2.36-9+deb12u4","purl":"pkg:deb/debian/libc6@2.36-9%2Bdeb12u4?arch=amd64&distro=debian-12",
   "hashes":[{"alg":"SHA-256","content":"AB"}]},
  {"type":"file","name":"/etc/passwd"}]}`
	d, err = Decode([]byte(foreign))
	if err != nil {
		t.Fatal(err)
	}
	want := &Document{Image: "python:3.11", Subject: "sha256:" + strings.Repeat("0f", 32), Packages: []Package{
		{Ecosystem: Deb, Name: "libc6", Version: "2.36-9+deb12u4", Arch: "amd64", Checksum: "sha256:ab"},
		{Ecosystem: PyPI, Name: "flask-login", Version: "0.6.3"},
	}}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("got %+v\nwant %+v", d, want)
	}
	if _, err := Decode([]byte(`{"spdxVersion":"SPDX-2.3"}`)); err == nil {
		t.Error("an SPDX document decoded as CycloneDX")
	}
}
