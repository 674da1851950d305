package drift

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/sbom"
)

// listing parses the pip freeze --all captured from a fixture image
// (the sbom package's test data) and the extra lines, as the capture does.
func listing(t *testing.T, extra ...string) []sbom.Package {
	t.Helper()
	raw, err := os.ReadFile("../sbom/testdata/fixture-py-pip-freeze.txt")
	if err != nil {
		t.Fatal(err)
	}
	out := append(raw, []byte(strings.Join(extra, "\n")+"\n")...)
	ps, err := sbom.Parse(sbom.FormatPipFreeze, out)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// doc makes an image's document and passes it through its CycloneDX form,
// as the registry holds it.
func doc(t *testing.T, kind, img string, p core.Platform, pkgs []sbom.Package) *sbom.Document {
	t.Helper()
	d := &sbom.Document{Subject: "sha256:" + strings.Repeat("a", 64), Kind: kind, Image: img, Platform: p,
		Repo: "fixture/" + strings.SplitN(strings.TrimPrefix(img, "fixture__"), "-", 2)[0], Version: "1.0", Packages: pkgs}
	raw, err := d.CycloneDX()
	if err != nil {
		t.Fatal(err)
	}
	back, err := sbom.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// fixtureSet is the fixture's env and instance images with calc's images
// carrying fixdep at calcFixdep.
func fixtureSet(t *testing.T, calcFixdep string) []Image {
	t.Helper()
	var set []Image
	for _, p := range []core.Platform{core.AMD64, core.ARM64} {
		for _, env := range []string{"calc", "textutil"} {
			pkgs := listing(t)
			if env == "calc" {
				pkgs = listing(t, "fixdep=="+calcFixdep)
			}
			name := "sweb.env.fixture." + p.Arch() + "." + env + "0000"
			d := doc(t, "env", "fixture__"+env, p, pkgs)
			set = append(set, Image{Kind: KindEnv, Name: name, Platform: p, Ref: "r/" + name, Doc: d})
		}
		for _, id := range []string{"fixture__calc-1", "fixture__calc-2", "fixture__textutil-1", "fixture__textutil-2"} {
			if id == "fixture__textutil-2" && p == core.ARM64 {
				continue // x86-only
			}
			pkgs := listing(t)
			if strings.Contains(id, "calc") {
				pkgs = listing(t, "fixdep=="+calcFixdep)
			}
			set = append(set, Image{Kind: KindInstance, Name: id, Platform: p, Ref: "r/" + id, Doc: doc(t, "instance", id, p, pkgs)})
		}
	}
	return set
}

func TestCompareOneChangeOnCalcImages(t *testing.T) {
	a, b := fixtureSet(t, "1.0"), fixtureSet(t, "1.1")
	rep, err := Compare("A", a, "B", b)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Groups) != 1 {
		t.Fatalf("groups = %+v, want exactly one", rep.Groups)
	}
	g := rep.Groups[0]
	if g.String() != "pypi/fixdep 1.0 -> 1.1" {
		t.Errorf("change = %q", g.String())
	}
	want := []string{
		"env sweb.env.fixture.arm64.calc0000 linux/arm64", "env sweb.env.fixture.x86_64.calc0000 linux/amd64",
		"instance fixture__calc-1 linux/amd64", "instance fixture__calc-1 linux/arm64",
		"instance fixture__calc-2 linux/amd64", "instance fixture__calc-2 linux/arm64",
	}
	if !reflect.DeepEqual(g.Images, want) {
		t.Errorf("images = %q\nwant %q", g.Images, want)
	}
	for _, im := range rep.Images {
		calc := strings.Contains(im.Name, "calc")
		if calc && im.Status != StatusDrift || !calc && im.Status != StatusUnchanged || !calc && len(im.Changes) != 0 {
			t.Errorf("%s: status %s, changes %v", im.Label(), im.Status, im.Changes)
		}
	}
	s := rep.Summary
	if s.Images != 11 || s.Drifted != 6 || s.Unchanged != 5 || s.Changes != 1 || s.ImageChanges != 6 {
		t.Errorf("summary = %+v", s)
	}
	if over, msg := rep.Exceeds(0); !over || !strings.Contains(msg, "1 distinct package changes on 6 images") {
		t.Errorf("Exceeds(0) = %v %q", over, msg)
	}
	if over, _ := rep.Exceeds(1); over {
		t.Error("Exceeds(1) = true for one change")
	}
	// The same set against itself: no drift at all.
	same, err := Compare("A", a, "A", fixtureSet(t, "1.0"))
	if err != nil {
		t.Fatal(err)
	}
	if same.Summary.Unchanged != 11 || len(same.Groups) != 0 {
		t.Errorf("A vs A: %+v", same.Summary)
	}
}

func TestCompareStatuses(t *testing.T) {
	a, b := fixtureSet(t, "1.0"), fixtureSet(t, "1.0")
	// calc-1 amd64 has no document in B; textutil-1 arm64 none in either;
	// calc-2 arm64 is only in A; an extra image only in B.
	for i := range b {
		switch b[i].Label() {
		case "instance fixture__calc-1 linux/amd64", "instance fixture__textutil-1 linux/arm64":
			b[i].Doc = nil
		}
		if b[i].Label() == "instance fixture__calc-1 linux/amd64" {
			b[i].Why = "pip freeze --all: exit 1"
		}
	}
	for i := range a {
		if a[i].Label() == "instance fixture__textutil-1 linux/arm64" {
			a[i].Doc = nil
		}
	}
	b = slices.DeleteFunc(b, func(im Image) bool { return im.Label() == "instance fixture__calc-2 linux/arm64" })
	b = append(b, Image{Kind: KindInstance, Name: "fixture__new-1", Platform: core.AMD64})
	rep, err := Compare("A", a, "B", b)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, im := range rep.Images {
		if im.Status != StatusUnchanged {
			got[im.Label()] = im.Status + "/" + im.Missing
		}
	}
	want := map[string]string{
		"instance fixture__calc-1 linux/amd64":     "no-document/b",
		"instance fixture__textutil-1 linux/arm64": "no-document/both",
		"instance fixture__calc-2 linux/arm64":     "only-in-a/",
		"instance fixture__new-1 linux/amd64":      "only-in-b/",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("statuses = %v\nwant %v", got, want)
	}
	if s := rep.Summary; s.NoDocument != 2 || s.OnlyA != 1 || s.OnlyB != 1 || s.Changes != 0 {
		t.Errorf("summary = %+v", s)
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, rep); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"- instance fixture__calc-1 linux/amd64: none in B (pip freeze --all: exit 1)\n",
		"- instance fixture__textutil-1 linux/arm64: none in A and B\n",
		"- instance fixture__calc-2 linux/arm64: only in A\n",
	} {
		if !strings.Contains(md.String(), line) {
			t.Errorf("Markdown lacks %q:\n%s", line, md.String())
		}
	}
	if _, err := Compare("A", append(a, a[0]), "B", b); err == nil || !strings.Contains(err.Error(), "listed twice") {
		t.Errorf("a duplicate image: err = %v", err)
	}
}

func TestDiffKinds(t *testing.T) {
	old := []sbom.Package{
		{Ecosystem: sbom.PyPI, Name: "gone", Version: "1"},
		{Ecosystem: sbom.PyPI, Name: "same", Version: "2"},
		{Ecosystem: sbom.Conda, Name: "openssl", Version: "3.0.13", Build: "h7f8727e_0", URL: "https://repo.anaconda.com/pkgs/main/linux-64/openssl-3.0.13-h7f8727e_0.conda"},
		{Ecosystem: sbom.Deb, Name: "libc6", Version: "2.36-9", Arch: "amd64"},
		{Ecosystem: sbom.Deb, Name: "libc6", Version: "2.36-9", Arch: "i386"},
	}
	new := []sbom.Package{
		{Ecosystem: sbom.PyPI, Name: "same", Version: "2"},
		{Ecosystem: sbom.PyPI, Name: "new", Version: "0.1"},
		{Ecosystem: sbom.Conda, Name: "openssl", Version: "3.0.13", Build: "h7f8727e_1", URL: "https://repo.anaconda.com/pkgs/main/linux-64/openssl-3.0.13-h7f8727e_1.conda"},
		{Ecosystem: sbom.Deb, Name: "libc6", Version: "2.36-9", Arch: "amd64"},
	}
	var got []string
	for _, c := range Diff(old, new) {
		got = append(got, c.Kind+": "+c.String())
	}
	want := []string{
		"changed: conda/openssl openssl-3.0.13-h7f8727e_0.conda -> openssl-3.0.13-h7f8727e_1.conda",
		"changed: deb/libc6 2.36-9:amd64,2.36-9:i386 -> 2.36-9:amd64",
		"removed: pypi/gone removed 1",
		"added: pypi/new added 0.1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Diff =\n%q\nwant\n%q", got, want)
	}
}

// A frozen rebuild's env image has a key of its own: it is paired with
// A's by its document's repo, version and platform.
func TestCompareEnvPairedByRepo(t *testing.T) {
	a := fixtureSet(t, "1.0")
	b := fixtureSet(t, "1.0")
	for i := range b {
		if b[i].Kind == KindEnv && strings.Contains(b[i].Name, "calc") {
			b[i].Name = strings.Replace(b[i].Name, "calc0000", "frozen99", 1)
		}
	}
	rep, err := Compare("A", a, "frozen", b)
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Summary; s.Images != 11 || s.Unchanged != 11 || s.OnlyA+s.OnlyB != 0 {
		t.Fatalf("summary = %+v", s)
	}
	n := 0
	for _, im := range rep.Images {
		if im.NameB != "" {
			n++
			if !strings.Contains(im.NameB, "frozen99") {
				t.Errorf("%s paired with %s", im.Label(), im.NameB)
			}
		}
	}
	if n != 2 {
		t.Errorf("%d env images paired by repo, want 2", n)
	}
}

func TestFormats(t *testing.T) {
	rep, err := Compare("127.0.0.1:5000/a", fixtureSet(t, "1.0"), "127.0.0.1:5000/b", fixtureSet(t, "1.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range Formats {
		var one, two bytes.Buffer
		if err := Write(&one, rep, f); err != nil {
			t.Fatal(err)
		}
		if err := Write(&two, rep, f); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(one.Bytes(), two.Bytes()) {
			t.Errorf("%s: two writes differ", f)
		}
		out := one.String()
		switch f {
		case "json":
			var back Report
			dec := json.NewDecoder(&one)
			dec.DisallowUnknownFields()
			if err := dec.Decode(&back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(&back, rep) {
				t.Errorf("JSON round trip differs")
			}
			if back.Schema != "swebuild.drift/v1" {
				t.Errorf("schema = %q", back.Schema)
			}
		case "md":
			row := "| `pypi/fixdep` | 1.0 | 1.1 | 6: env sweb.env.fixture.arm64.calc0000 linux/arm64, "
			if !strings.Contains(out, row) {
				t.Errorf("Markdown lacks the change row %q:\n%s", row, out)
			}
			if strings.Contains(out, "textutil") {
				t.Errorf("Markdown lists an unchanged image:\n%s", out)
			}
			if !strings.Contains(out, "11 images compared: 5 unchanged, 6 with drift") {
				t.Errorf("Markdown counts:\n%s", out)
			}
		case "html":
			doc, err := html.Parse(strings.NewReader(out))
			if err != nil {
				t.Fatal(err)
			}
			var rows int
			var external []string
			var walk func(*html.Node)
			walk = func(n *html.Node) {
				if n.Type == html.ElementNode {
					if n.Data == "tr" {
						rows++
					}
					if n.Data == "script" || n.Data == "link" || n.Data == "img" {
						external = append(external, n.Data)
					}
					for _, a := range n.Attr {
						if a.Key == "src" || a.Key == "href" {
							external = append(external, a.Key+"="+a.Val)
						}
					}
				}
				for c := n.FirstChild; c != nil; c = c.NextSibling {
					walk(c)
				}
			}
			walk(doc)
			if len(external) > 0 {
				t.Errorf("HTML is not self-contained: %v", external)
			}
			// header + 1 change; header + 11 images.
			if rows != 2+12 {
				t.Errorf("HTML has %d table rows, want 14", rows)
			}
		}
	}
}

// A long report is cut in Markdown (the job summary's 1 MiB cap), never
// in JSON.
func TestMarkdownBounds(t *testing.T) {
	var a, b []Image
	for i := 0; i < 30; i++ {
		var pa, pb []sbom.Package
		for k := 0; k < 130; k++ {
			name := strings.Repeat("p", 1+k%5) + string(rune('a'+k%26)) + strings.Repeat("x", k/26)
			pa = append(pa, sbom.Package{Ecosystem: sbom.PyPI, Name: name, Version: "1"})
			pb = append(pb, sbom.Package{Ecosystem: sbom.PyPI, Name: name, Version: "2"})
		}
		id := "x__y-" + strings.Repeat("1", i+1)
		a = append(a, Image{Kind: KindInstance, Name: id, Platform: core.AMD64, Doc: &sbom.Document{Packages: pa}})
		b = append(b, Image{Kind: KindInstance, Name: id, Platform: core.AMD64, Doc: &sbom.Document{Packages: pb}})
	}
	rep, err := Compare("A", a, "B", b)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Groups) != 130 || len(rep.Groups[0].Images) != 30 {
		t.Fatalf("%d groups of %d images", len(rep.Groups), len(rep.Groups[0].Images))
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, rep); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	if n := strings.Count(out, " and 10 more |"); n != 100 {
		t.Errorf("%d rows cut at 20 images, want 100", n)
	}
	if !strings.Contains(out, "| … | | | 30 more changes |") {
		t.Errorf("no row saying 30 more changes")
	}
}
