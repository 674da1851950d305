package drift

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/publication"
	"github.com/swebuild/swebuild/registry"
	"github.com/swebuild/swebuild/sbom"
)

// TestCheckLimits: tonight's calc-1 image was rebuilt from the same spec
// key and rules and resolved fixdep 1.1 instead of 1.0: one distinct
// change on one image, and one image changed with nothing recorded. Each
// limit fails only when the report is over it (-1: no limit), and both
// failures are said together.
func TestCheckLimits(t *testing.T) {
	in := &Inputs{SpecKey: "sha256:" + strings.Repeat("5", 64)}
	img := func(dg, fixdep string) Image {
		return Image{Kind: KindInstance, Name: "fixture__calc-1", Platform: core.AMD64,
			Ref: "r/sweb.eval.x86_64.fixture_1776_calc-1@sha256:" + strings.Repeat(dg, 64), Inputs: in,
			Doc: doc(t, "instance", "fixture__calc-1", core.AMD64, listing(t, "fixdep=="+fixdep))}
	}
	rep, err := Compare("last night", []Image{img("a", "1.0")}, "tonight", []Image{img("b", "1.1")})
	if err != nil {
		t.Fatal(err)
	}
	over := "1 distinct package changes on 1 images, more than the 0 allowed"
	silent := "1 image(s) changed digest with nothing recorded (same spec key and pin rules, other packages), more than the 0 allowed: instance fixture__calc-1 linux/amd64"
	for _, tc := range []struct {
		maxDrift, maxUnrecorded int
		want                    string
	}{
		{-1, -1, ""},
		{1, 1, ""},
		{0, -1, over},
		{-1, 0, silent},
		{1, 0, silent},
		{0, 0, over + "; " + silent},
	} {
		err := rep.CheckLimits(tc.maxDrift, tc.maxUnrecorded)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckLimits(%d, %d) = %v, want nil", tc.maxDrift, tc.maxUnrecorded, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("CheckLimits(%d, %d) = %v\nwant %s", tc.maxDrift, tc.maxUnrecorded, err, tc.want)
		}
	}

	same, err := Compare("a", []Image{img("a", "1.0")}, "b", []Image{img("a", "1.0")})
	if err != nil {
		t.Fatal(err)
	}
	if err := same.CheckLimits(0, 0); err != nil {
		t.Errorf("an unchanged image over zero limits: %v", err)
	}
}

// TestTargetsFromPublication: the present per-arch images of a prefix-named
// publication become targets pinned to the digest found (the tag dropped,
// a registry port kept); missing ones are counted; an image the registry
// refused fails naming it.
func TestTargetsFromPublication(t *testing.T) {
	d1 := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("1", 64)}
	d2 := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("2", 64)}
	found := func(n string, dg v1.Hash) publication.Found {
		return publication.Found{Name: n, Present: true, Descriptor: v1.Descriptor{Digest: dg}}
	}
	insts := []publication.Instance{
		{ID: "fixture__calc-1", Images: []publication.Image{
			{Platform: core.AMD64, Found: found("127.0.0.1:5000/nightly/sweb.eval.x86_64.fixture_1776_calc-1:latest", d1)},
			{Platform: core.ARM64, Found: found("127.0.0.1:5000/nightly/sweb.eval.arm64.fixture_1776_calc-1", d2)},
		}},
		{ID: "fixture__textutil-2", Images: []publication.Image{
			{Platform: core.AMD64, Found: publication.Found{Name: "127.0.0.1:5000/nightly/sweb.eval.x86_64.fixture_1776_textutil-2:latest"}},
		}},
	}
	got, missing, err := TargetsFromPublication(insts)
	if err != nil {
		t.Fatal(err)
	}
	want := []Target{
		{Kind: KindInstance, Name: "fixture__calc-1", Platform: core.AMD64, Ref: "127.0.0.1:5000/nightly/sweb.eval.x86_64.fixture_1776_calc-1@sha256:" + d1.Hex},
		{Kind: KindInstance, Name: "fixture__calc-1", Platform: core.ARM64, Ref: "127.0.0.1:5000/nightly/sweb.eval.arm64.fixture_1776_calc-1@sha256:" + d2.Hex},
	}
	if missing != 1 || len(got) != len(want) {
		t.Fatalf("targets %+v, missing %d; want %+v and 1 missing", got, missing, want)
	}
	for i := range want {
		if got[i].Kind != want[i].Kind || got[i].Name != want[i].Name || got[i].Platform != want[i].Platform || got[i].Ref != want[i].Ref {
			t.Errorf("target %d = %+v, want %+v", i, got[i], want[i])
		}
	}

	refused := errors.New("403 Forbidden")
	insts[1].Images[0].Problem = refused
	_, _, err = TargetsFromPublication(insts)
	if !errors.Is(err, refused) || !strings.HasPrefix(err.Error(), "127.0.0.1:5000/nightly/sweb.eval.x86_64.fixture_1776_textutil-2:latest: ") {
		t.Errorf("a refused image: err = %v", err)
	}
}

// TestFetchSeveralDocuments: an image pushed twice may carry two documents
// (two artifacts); listing the same packages they are one document, with
// different packages the fetch fails naming the image.
func TestFetchSeveralDocuments(t *testing.T) {
	reg := regtest.InProcess(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := registry.New(registry.Options{MaxRPS: -1, Keychain: regtest.Anonymous()})
	if err != nil {
		t.Fatal(err)
	}
	refs := &attest.Referrers{Client: client, Settle: 10 * time.Millisecond}
	repo, err := name.NewRepository(reg.Host+"/pub/sweb.env.fixture.x86_64.calc", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	attach := func(subject v1.Descriptor, d *sbom.Document) {
		t.Helper()
		raw, err := d.CycloneDX()
		if err != nil {
			t.Fatal(err)
		}
		a, err := attest.NewArtifact(subject, sbom.MediaType, sbom.MediaType, raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := refs.Attach(ctx, repo, a); err != nil {
			t.Fatal(err)
		}
	}
	document := func(subject v1.Descriptor, instances []string, pkgs []sbom.Package) *sbom.Document {
		return &sbom.Document{Subject: subject.Digest.String(), Kind: "env", Image: "sweb.env.fixture.x86_64.calc", Platform: core.AMD64,
			Repo: "fixture/calc", Version: "1.0", InstanceIDs: instances, Packages: pkgs}
	}
	agree, differ := regtest.PushRandomImage(t, repo, 256, 1), regtest.PushRandomImage(t, repo, 256, 1)
	// Two documents of one image, the packages listed in another order.
	pkgs := listing(t, "fixdep==1.0")
	reversed := make([]sbom.Package, len(pkgs))
	for i, p := range pkgs {
		reversed[len(pkgs)-1-i] = p
	}
	attach(agree, document(agree, []string{"fixture__calc-1"}, pkgs))
	attach(agree, document(agree, []string{"fixture__calc-1", "fixture__calc-2"}, reversed))
	attach(differ, document(differ, []string{"fixture__calc-1"}, listing(t, "fixdep==1.0")))
	attach(differ, document(differ, []string{"fixture__calc-1"}, listing(t, "fixdep==1.1")))

	target := func(d v1.Descriptor, n string) Target {
		return Target{Kind: KindEnv, Name: n, Platform: core.AMD64, Ref: repo.Digest(d.Digest.String()).String()}
	}
	f := &Fetcher{Reader: publication.New(client), Jobs: 1}
	got, err := f.Fetch(ctx, []Target{target(agree, "agree")})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Doc == nil || len(got[0].Doc.Packages) != len(pkgs) || got[0].Doc.Subject != agree.Digest.String() {
		t.Fatalf("two agreeing documents: %+v", got[0].Doc)
	}
	_, err = f.Fetch(ctx, []Target{target(agree, "agree"), target(differ, "differ")})
	if err == nil || !strings.Contains(err.Error(), "env differ linux/amd64") || !strings.Contains(err.Error(), "several documents with different packages are attached") {
		t.Errorf("two differing documents: err = %v", err)
	}

	bad := target(agree, "agree")
	bad.SBOM = "sha256:short"
	if _, err := f.Fetch(ctx, []Target{bad}); err == nil || !strings.Contains(err.Error(), `the record's sbom "sha256:short"`) {
		t.Errorf("a record naming a malformed sbom digest: err = %v", err)
	}
	byTag := Target{Kind: KindEnv, Name: "tag", Platform: core.AMD64, Ref: repo.Tag("latest").String()}
	if _, err := f.Fetch(ctx, []Target{byTag}); err == nil || !strings.Contains(err.Error(), "is not pinned by digest") {
		t.Errorf("a target by tag: err = %v", err)
	}
}
