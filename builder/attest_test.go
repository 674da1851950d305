package builder

import (
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/swebuild/swebuild/core"
)

// TestAttestedImage reads the index BuildKit v0.34.2 pushed for a linux/amd64
// node with attest:provenance=mode=max (testdata/attest, from
// TestProvenancePushed on the stack) and edited forms of it.
func TestAttestedImage(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "attest", "buildkit-index-amd64.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	real, err := v1.ParseIndexManifest(f)
	if err != nil {
		t.Fatal(err)
	}
	const img = "sha256:d76248d9166f8e6c0dc514e7bf731256cd34c919265c093016f79e732b9a2e3c"
	const att = "sha256:eb33a9c722ca36be995480e6fc022eaae4e0dd4871be0de5be40678cae1670d2"
	noAtt := *real
	noAtt.Manifests = real.Manifests[:1]
	otherRef := *real
	otherRef.Manifests = append([]v1.Descriptor{real.Manifests[0]}, real.Manifests[1])
	otherRef.Manifests[1].Annotations = map[string]string{AnnotationReferenceType: ReferenceTypeAttestation, AnnotationReferenceDigest: "sha256:0000000000000000000000000000000000000000000000000000000000000000"}
	twice := *real
	twice.Manifests = append([]v1.Descriptor{real.Manifests[0]}, real.Manifests...)
	for _, tc := range []struct {
		name     string
		im       *v1.IndexManifest
		p        core.Platform
		img, att string
		err      string
	}{
		{"buildkit", real, core.AMD64, img, att, ""},
		{"no attestation", &noAtt, core.AMD64, img, "", ""},
		{"attestation of another image", &otherRef, core.AMD64, img, "", ""},
		{"other platform", real, core.ARM64, "", "", "no image manifest for linux/arm64"},
		{"two images", &twice, core.AMD64, "", "", "two image manifests for linux/amd64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotImg, gotAtt, err := attestedImage(tc.im, tc.p)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			a := ""
			if gotAtt != nil {
				a = gotAtt.Digest.String()
				if gotAtt.Size <= 0 {
					t.Errorf("attestation size %d", gotAtt.Size)
				}
			}
			if gotImg.String() != tc.img || a != tc.att {
				t.Errorf("got %s, %q; want %s, %q", gotImg, a, tc.img, tc.att)
			}
		})
	}
}
