package imagediff

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/swebuild/swebuild/core"
)

// writeNamed appends img to the layout under name.
func writeNamed(t *testing.T, p layout.Path, img v1.Image, name string) {
	t.Helper()
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": name})); err != nil {
		t.Fatal(err)
	}
}

// TestDiffVerdict: Diff of two images of one layout that differ in one file
// of their only layer (so their configs differ in that layer's diff_id),
// then of an image with itself: the report, its text and JSON, and Err's
// count of what differs.
func TestDiffVerdict(t *testing.T) {
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	writeNamed(t, p, image(t, "A=1", layer(t, file{name: "f", body: "x"}, file{name: "g", body: "same"})), "a")
	writeNamed(t, p, image(t, "A=1", layer(t, file{name: "f", body: "yy"}, file{name: "g", body: "same"})), "b")
	ctx := context.Background()
	a, b := Source{Ref: "oci:" + dir + ":a"}, Source{Ref: "oci:" + dir + ":b"}

	r, err := Diff(ctx, a, b)
	if err != nil {
		t.Fatal(err)
	}
	if r.Identical || len(r.Files) != 1 || r.Files[0].Path != "f" {
		t.Fatalf("report: identical %v, files %+v; want one differing file f", r.Identical, r.Files)
	}
	if err := r.Err(); err == nil || err.Error() != "the images differ: 1 file(s) in 1 layer(s), 1 config field(s)" {
		t.Errorf("Err() = %v", err)
	}
	var text, js bytes.Buffer
	if err := r.Write(&text, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"A oci:" + dir + ":a\n", "config differs in 1 field(s):\n  rootfs.diff_ids[0]: ", "layers: 0 of 1 identical\n", "files that differ: 1\n"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	if err := r.Write(&js, true); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("the JSON report does not decode: %v\n%s", err, js.String())
	}
	if back.Identical || len(back.Files) != 1 || back.A.Manifest != r.A.Manifest || back.B.Manifest != r.B.Manifest {
		t.Errorf("JSON report round trip: %+v", back)
	}

	same, err := Diff(ctx, a, a)
	if err != nil {
		t.Fatal(err)
	}
	if !same.Identical || same.Err() != nil {
		t.Errorf("an image against itself: identical %v, Err %v", same.Identical, same.Err())
	}
	text.Reset()
	if err := same.Write(&text, false); err != nil || !strings.Contains(text.String(), "identical: the same image manifest (1 layers)") {
		t.Errorf("text of identical images (%v):\n%s", err, text.String())
	}

	// An image that cannot be opened is named as A or B.
	missing := Source{Ref: "oci:" + dir + ":nope"}
	if _, err := Diff(ctx, missing, b); err == nil || !strings.HasPrefix(err.Error(), "A: ") {
		t.Errorf("A missing: %v", err)
	}
	if _, err := Diff(ctx, a, missing); err == nil || !strings.HasPrefix(err.Error(), "B: ") {
		t.Errorf("B missing: %v", err)
	}
	if _, err := Open(ctx, Source{Ref: "127.0.0.1:5000/x:latest"}); err == nil || !strings.Contains(err.Error(), `"127.0.0.1:5000/x:latest": no registry reader`) {
		t.Errorf("a registry reference without a reader: %v", err)
	}
}

// TestOpenLayoutIndex: a layout entry that is a multi-arch index (as
// publish writes one per instance): the platform picks its image, an
// attestation manifest never counts, and without a platform the choice is
// refused.
func TestOpenLayoutIndex(t *testing.T) {
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	amd := image(t, "ARCH=amd64", layer(t, file{name: "f", body: "amd64"}))
	arm := image(t, "ARCH=arm64", layer(t, file{name: "f", body: "arm64"}))
	att := image(t, "ATT=1", layer(t, file{name: "att", body: "{}"}))
	amdD, _ := amd.Digest()
	armD, _ := arm.Digest()
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: att, Descriptor: v1.Descriptor{
			Platform:    &v1.Platform{OS: "unknown", Architecture: "unknown"},
			Annotations: map[string]string{"vnd.docker.reference.type": "attestation-manifest", "vnd.docker.reference.digest": amdD.String()},
		}},
	)
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "sweb.eval.x:latest"})); err != nil {
		t.Fatal(err)
	}
	ref := "oci:" + dir + ":sweb.eval.x:latest"
	for _, c := range []struct {
		platform core.Platform
		want     v1.Hash
	}{{core.AMD64, amdD}, {core.ARM64, armD}} {
		img, err := Open(context.Background(), Source{Ref: ref, Platform: c.platform})
		if err != nil {
			t.Errorf("%s: %v", c.platform, err)
			continue
		}
		if d, _ := img.Digest(); d != c.want {
			t.Errorf("%s: image %s, want %s", c.platform, d, c.want)
		}
	}
	if _, err := Open(context.Background(), Source{Ref: ref}); err == nil || !strings.Contains(err.Error(), "the index holds 2 image manifests; pick one with a platform") {
		t.Errorf("no platform for a two-platform index: %v", err)
	}
}
