package sbom

import (
	"reflect"
	"strings"
	"testing"
)

// Components of another tool's document (purl spec examples): a conda
// purl's subdir and build qualifiers, a distribution reference as the URL,
// md5 preferred among several hashes, a version taken from the component
// when the purl has none, components of other types skipped.
func TestDecodeForeignComponents(t *testing.T) {
	const sha1 = "da39a3ee5e6b4b0d3255bfef95601890afd80709" // sha1 of nothing
	const md5 = "d41d8cd98f00b204e9800998ecf8427e"
	doc := `{"bomFormat":"CycloneDX","specVersion":"1.6","version":1,
 "metadata":{"component":{"type":"container","name":"img","version":"v1"},
  "properties":[{"name":"swebuild:instance_id","value":"a__b-1"},{"name":"swebuild:instance_id","value":"a__b-2"},{"name":"other:thing","value":"x"}]},
 "components":[
  {"type":"library","name":"absl-py","purl":"pkg:conda/absl-py@0.4.1?build=py36h06a4308_0&channel=main&subdir=linux-64&type=tar.bz2",
   "externalReferences":[{"type":"website","url":"https://abseil.io"},{"type":"distribution","url":"https://repo.anaconda.com/pkgs/main/linux-64/absl-py-0.4.1-py36h06a4308_0.tar.bz2"}],
   "hashes":[{"alg":"SHA-1","content":"` + strings.ToUpper(sha1) + `"},{"alg":"MD5","content":"` + md5 + `"}]},
  {"type":"library","name":"curl","version":"7.50.3-1","purl":"pkg:deb/debian/curl?arch=i386&distro=jessie"},
  {"type":"library","name":"left-pad","version":"1.3.0","purl":"pkg:npm/left-pad@1.3.0"},
  {"type":"library","name":"no-purl","version":"1"}]}`
	d, err := Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := &Document{Image: "img", InstanceIDs: []string{"a__b-1", "a__b-2"}, Packages: []Package{
		{Ecosystem: Conda, Name: "absl-py", Version: "0.4.1", Arch: "linux-64", Build: "py36h06a4308_0",
			URL: "https://repo.anaconda.com/pkgs/main/linux-64/absl-py-0.4.1-py36h06a4308_0.tar.bz2", Checksum: "md5:" + md5},
		{Ecosystem: Deb, Name: "curl", Version: "7.50.3-1", Arch: "i386"},
	}}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("got  %+v\nwant %+v", d, want)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"not JSON", `{`, "decoding a CycloneDX document"},
		{"another format", `{"bomFormat":"SPDX"}`, `bomFormat is "SPDX", want "CycloneDX"`},
		{"bad purl", `{"bomFormat":"CycloneDX","specVersion":"1.6","components":[{"type":"library","name":"x","purl":"pypi/x@1"}]}`,
			`component 0 (x): reading purl "pypi/x@1"`},
		{"bad platform property", `{"bomFormat":"CycloneDX","specVersion":"1.6","metadata":{"properties":[{"name":"swebuild:platform","value":"linux"}]}}`,
			"property swebuild:platform"},
	} {
		if _, err := Decode([]byte(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestCycloneDXRefusesWhatItCannotWrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Package
		want string
	}{
		{"no ecosystem", Package{Name: "x", Version: "1"}, "encoding the SBOM of img: a package with no ecosystem or name"},
		{"unknown checksum", Package{Ecosystem: Deb, Name: "libc6", Version: "1", Checksum: "crc32:00"},
			`encoding the SBOM of img: package deb/libc6: unknown checksum algorithm "crc32"`},
	} {
		d := &Document{Image: "img", Packages: []Package{tc.p}}
		if _, err := d.CycloneDX(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestListingErrorsNameTheCommand(t *testing.T) {
	l := Listing{Format: FormatDpkgQuery, Command: "dpkg-query -W", Output: []byte("libc6\t2.36-9\tamd64\nbroken line\n")}
	_, err := l.Packages()
	if err == nil || !strings.Contains(err.Error(), `reading the output of "dpkg-query -W": dpkg-query listing: line 2 "broken line"`) {
		t.Errorf("Listing.Packages: %v", err)
	}
	if _, err := Parse("rpm-qa", nil); err == nil || err.Error() != `unknown listing format "rpm-qa" (want one of pip-freeze, conda-explicit, dpkg-query)` {
		t.Errorf("Parse of an unknown format: %v", err)
	}
	ps, err := (Listing{Format: FormatDpkgQuery, Output: []byte("zlib1g\t1:1.2.13.dfsg-1\tamd64\r\nlibc6\t2.36-9\tamd64\r\n")}).Packages()
	if err != nil || len(ps) != 2 || ps[0].Name != "libc6" || ps[1].Version != "1:1.2.13.dfsg-1" {
		t.Errorf("CRLF listing: %+v, %v; want libc6 then zlib1g, versions whole", ps, err)
	}
}

func TestSortOrder(t *testing.T) {
	ps := []Package{
		{Ecosystem: Conda, Name: "x", Version: "1", Build: "b"},
		{Ecosystem: Conda, Name: "x", Version: "1", Build: "a"},
		{Ecosystem: Deb, Name: "x", Version: "1", Arch: "i386"},
		{Ecosystem: Deb, Name: "x", Version: "1", Arch: "amd64"},
		{Ecosystem: PyPI, Name: "x", Version: "1", URL: "b"},
		{Ecosystem: PyPI, Name: "x", Version: "1", URL: "a"},
		{Ecosystem: Conda, Name: "x", Version: "0"},
	}
	Sort(ps)
	var got []string
	for _, p := range ps {
		got = append(got, p.Ecosystem+" "+p.Version+" "+p.Arch+p.Build+p.URL)
	}
	want := []string{"conda 0 ", "conda 1 a", "conda 1 b", "deb 1 amd64", "deb 1 i386", "pypi 1 a", "pypi 1 b"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("Sort: %q\nwant %q", got, want)
	}
}
