package publish

import (
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/sbom"
)

// TestRecordsFromLayout: instance entries become built records with the
// layout; base/env entries are left out; an entry without a spec key is an
// error naming index.json, the entry and the field; the image's referrer
// entries fill its attestation, SBOM and verification statement.
func TestRecordsFromLayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "layout")
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	add := func(p string, ann map[string]string) v1.Hash {
		img, err := random.Image(32, 1)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := v1.ParsePlatform(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := lp.AppendImage(img, layout.WithPlatform(*pl), layout.WithAnnotations(ann)); err != nil {
			t.Fatal(err)
		}
		h, _ := img.Digest()
		return h
	}
	add("linux/amd64", map[string]string{ociRefName: "sweb.base.py.x86_64:latest"})
	good := add("linux/arm64", map[string]string{ociRefName: "sweb.eval.arm64.a__b-1:latest", manifests.AnnotationInstanceID: "a__b-1",
		manifests.AnnotationSpecKey: "sha256:k", manifests.AnnotationBaseCommit: "abc"})
	add("linux/amd64", map[string]string{ociRefName: "sweb.eval.x86_64.a__b-1:latest", manifests.AnnotationInstanceID: "a__b-1"})
	// The image's referrers as the builder names them (and one of another
	// image, and an image entry naming the digest, both ignored).
	att, _ := v1.NewHash("sha256:" + strings.Repeat("a", 64))
	doc, _ := v1.NewHash("sha256:" + strings.Repeat("b", 64))
	other, _ := v1.NewHash("sha256:" + strings.Repeat("c", 64))
	stmt, _ := v1.NewHash("sha256:" + strings.Repeat("d", 64))
	for _, d := range []v1.Descriptor{
		{MediaType: types.OCIManifestSchema1, Digest: stmt, Size: 1100, ArtifactType: attest.StatementMediaType, Annotations: map[string]string{annotationReferenceDigest: good.String()}},
		{MediaType: types.OCIManifestSchema1, Digest: att, Size: 800, Platform: &v1.Platform{OS: "unknown", Architecture: "unknown"},
			Annotations: map[string]string{annotationReferenceType: referenceTypeAttestation, annotationReferenceDigest: good.String()}},
		{MediaType: types.OCIManifestSchema1, Digest: doc, Size: 600, ArtifactType: sbom.MediaType, Annotations: map[string]string{annotationReferenceDigest: good.String()}},
		{MediaType: types.OCIManifestSchema1, Digest: other, Size: 1, ArtifactType: sbom.MediaType, Annotations: map[string]string{annotationReferenceDigest: other.String()}},
		{MediaType: types.OCIManifestSchema1, Digest: other, Size: 1, ArtifactType: sbom.MediaType, Annotations: map[string]string{annotationReferenceDigest: good.String(), ociRefName: "x"}},
	} {
		if err := lp.AppendDescriptor(d); err != nil {
			t.Fatal(err)
		}
	}

	recs, errs, err := RecordsFromLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("records %+v, want the one complete instance entry", recs)
	}
	r := recs[0]
	if r.Kind != core.KindInstance || r.InstanceID != "a__b-1" || r.Platform != core.ARM64 || r.Digest.String() != good.String() ||
		r.SpecKey != "sha256:k" || r.BaseCommit != "abc" || r.OCILayout != dir || r.Status != core.StatusBuilt || r.Key != "sweb.eval.arm64.a__b-1:latest" {
		t.Errorf("record %+v", r)
	}
	if r.Attestation.String() != att.String() || r.AttestationSize != 800 || r.SBOM.String() != doc.String() || r.SBOMSize != 600 ||
		r.Verification.String() != stmt.String() || r.VerificationSize != 1100 {
		t.Errorf("record's referrers: attestation %s (%d), SBOM %s (%d), statement %s (%d); want %s (800), %s (600), %s (1100)",
			r.Attestation, r.AttestationSize, r.SBOM, r.SBOMSize, r.Verification, r.VerificationSize, att, doc, stmt)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), filepath.Join(dir, "index.json")+": manifests[2] (a__b-1): spec_key: required") {
		t.Errorf("errors %v, want one naming index.json, manifests[2] and spec_key", errs)
	}
	if _, _, err := RecordsFromLayout(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("a directory that is no layout gave no error")
	}
}
