package manifests

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/swebuild/swebuild/core"
)

// TestBuildIndexAttestations lays an image and its attestation out in the
// index as BuildKit v0.34.2 did in the index it pushed for one linux/amd64
// image with attest:provenance=mode=max (testdata/buildkit-index-amd64.json,
// from builder's TestProvenancePushed on the stack): same descriptors for
// the image and the attestation, attestations after the images. Without
// attestations the bytes do not change.
func TestBuildIndexAttestations(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "buildkit-index-amd64.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bk, err := v1.ParseIndexManifest(f)
	if err != nil {
		t.Fatal(err)
	}
	img, att := bk.Manifests[0], bk.Manifests[1]
	arm := Child{Platform: core.ARM64, Digest: "sha256:" + string(bytes.Repeat([]byte("1"), 64)), Size: 500, MediaType: types.OCIManifestSchema1,
		Attestation: &Attestation{Digest: "sha256:" + string(bytes.Repeat([]byte("2"), 64)), Size: 800}}
	amd := Child{Platform: core.AMD64, Digest: img.Digest.String(), Size: img.Size, MediaType: img.MediaType,
		Attestation: &Attestation{Digest: att.Digest.String(), Size: att.Size}}
	idx, err := BuildIndex(IndexInfo{InstanceID: "a__b-1"}, []Child{arm, amd})
	if err != nil {
		t.Fatal(err)
	}
	got, err := v1.ParseIndexManifest(bytes.NewReader(idx.Raw))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Manifests) != 4 {
		t.Fatalf("%d descriptors, want 4", len(got.Manifests))
	}
	if !reflect.DeepEqual(got.Manifests[0], img) {
		t.Errorf("image descriptor\n%+v\nwant BuildKit's\n%+v", got.Manifests[0], img)
	}
	if !reflect.DeepEqual(got.Manifests[2], att) {
		t.Errorf("attestation descriptor\n%+v\nwant BuildKit's\n%+v", got.Manifests[2], att)
	}
	if a := got.Manifests[3]; a.Annotations[AnnotationReferenceDigest] != arm.Digest || a.Digest.String() != arm.Attestation.Digest || got.Manifests[1].Digest.String() != arm.Digest {
		t.Errorf("arm64 order or reference: %+v", got.Manifests)
	}

	plainA, plainB := amd, arm
	plainA.Attestation, plainB.Attestation = nil, nil
	with, _ := BuildIndex(IndexInfo{InstanceID: "a__b-1"}, []Child{plainA, plainB})
	if bytes.Contains(with.Raw, []byte("attestation")) {
		t.Error("an index without attestations mentions them")
	}
	if _, err := BuildIndex(IndexInfo{InstanceID: "a__b-1"}, []Child{{Platform: core.AMD64, Digest: img.Digest.String(), Size: 1, Attestation: &Attestation{Digest: "sha256:x"}}}); err == nil {
		t.Error("a bad attestation descriptor was accepted")
	}
}
