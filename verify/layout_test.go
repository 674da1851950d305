package verify

import (
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	bkclient "github.com/moby/buildkit/client"
	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests"
)

func TestParseLayoutRef(t *testing.T) {
	dg := "sha256:" + strings.Repeat("ab", 32)
	for _, tc := range []struct {
		ref     string
		dir     string
		ok      bool
		wantErr string
	}{
		{ref: "127.0.0.1:5000/x@" + dg},
		{ref: LayoutRef("/tmp/a@b/layout", dg), dir: "/tmp/a@b/layout", ok: true},
		{ref: "oci-layout:///tmp/l", ok: true, wantErr: "want oci-layout://DIR@sha256:DIGEST"},
		{ref: "oci-layout:///tmp/l@sha256:zz", ok: true, wantErr: "oci-layout:///tmp/l@sha256:zz"},
	} {
		dir, h, ok, err := parseLayoutRef(tc.ref)
		if ok != tc.ok || (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("parseLayoutRef(%q) = %q, %v, %v, %v", tc.ref, dir, h, ok, err)
			continue
		}
		if tc.ok && err == nil && (dir != tc.dir || h.String() != dg) {
			t.Errorf("parseLayoutRef(%q) = %q, %s", tc.ref, dir, h)
		}
	}
}

// TestLayoutImages: instance images are found in a layout by the
// instance-id annotation and platform, through records without a ref, and
// the engine's solve options get the layout's content store and config.
func TestLayoutImages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "layout")
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	imgs := map[core.Platform]v1.Image{}
	for _, p := range core.AllPlatforms() {
		img, err := random.Image(64, 1)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := v1.ParsePlatform(p.String())
		if err != nil {
			t.Fatal(err)
		}
		if err := lp.AppendImage(img, layout.WithPlatform(*pl), layout.WithAnnotations(map[string]string{manifests.AnnotationInstanceID: "a__b-1"})); err != nil {
			t.Fatal(err)
		}
		imgs[p] = img
	}
	base, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(base, layout.WithPlatform(v1.Platform{OS: "linux", Architecture: "amd64"})); err != nil {
		t.Fatal(err)
	}

	images, err := ImagesFromLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	for p, img := range imgs {
		dg, _ := img.Digest()
		ref, err := images("a__b-1", p)
		if err != nil || ref != LayoutRef(dir, dg.String()) {
			t.Errorf("%s: %q, %v; want %s", p, ref, err, LayoutRef(dir, dg.String()))
		}
		var so bkclient.SolveOpt
		gotDir, h, _, err := parseLayoutRef(ref)
		if err != nil {
			t.Fatal(err)
		}
		src, err := openLayoutImage(gotDir, h, &so)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		cfg, _ := img.RawConfigFile()
		if len(so.OCIStores) != 1 || so.OCIStores[src.storeID] == nil || string(src.config) != string(cfg) {
			t.Errorf("%s: solve options %v, store %q, config %d bytes; want the layout's store and the image config", p, so.OCIStores, src.storeID, len(src.config))
		}
	}
	if _, err := images("c__d-1", core.AMD64); err == nil || !strings.Contains(err.Error(), "no instance image of c__d-1") {
		t.Errorf("missing instance: %v", err)
	}
	var so bkclient.SolveOpt
	if _, err := openLayoutImage(dir, v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("0", 64)}, &so); err == nil {
		t.Error("an image the layout does not hold was opened")
	}

	dg, _ := imgs[core.ARM64].Digest()
	recs := []core.Image{
		{Kind: core.KindInstance, InstanceID: "a__b-1", Platform: core.ARM64, Digest: digest.Digest(dg.String()), OCILayout: dir, Status: core.StatusBuilt, SpecKey: "k"},
		{Kind: core.KindInstance, InstanceID: "a__b-1", Platform: core.AMD64, Digest: digest.Digest(dg.String()), Status: core.StatusBuilt, SpecKey: "k"},
	}
	fromRecs := ImagesFromRecords(recs, "md.jsonl")
	if ref, err := fromRecs("a__b-1", core.ARM64); err != nil || ref != LayoutRef(dir, dg.String()) {
		t.Errorf("record with a layout: %q, %v", ref, err)
	}
	if _, err := fromRecs("a__b-1", core.AMD64); err == nil || !strings.Contains(err.Error(), "was not exported") || !strings.Contains(err.Error(), "--output type=oci,dest=DIR") {
		t.Errorf("record with neither ref nor layout: %v", err)
	}
}
