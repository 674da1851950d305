package publish

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/sbom"
)

// Referrers in an OCI layout
//
// swebuild build --output type=oci,dest=DIR writes each image's referrers
// into the layout beside it: BuildKit's attestation manifest (SLSA
// provenance) and the SBOM artifact, each an OCI 1.1 manifest whose
// subject is the image, with blobs in blobs/sha256 and an index.json entry
// of its own (no ref name; vnd.docker.reference.digest = the image's
// digest; the attestation also vnd.docker.reference.type=
// attestation-manifest and platform unknown/unknown, as buildx lays it
// out; the SBOM artifactType application/vnd.cyclonedx+json). Publishing
// from the layout copies them as it copies a pushed build's: into the
// per-arch repository as referrers of the image, then into the index
// repository.

// Annotations of a layout's referrer entries (BuildKit's and buildx's).
const (
	annotationReferenceType   = "vnd.docker.reference.type"
	annotationReferenceDigest = "vnd.docker.reference.digest"
	referenceTypeAttestation  = "attestation-manifest"
)

// copyLayoutReferrer copies the referrer manifest dg of the OCI layout in
// dir (its blobs, then its manifest) into repo and adds it to its
// subject's referrers there.
func (p *publisher) copyLayoutReferrer(ctx context.Context, repo name.Repository, dir string, dg digest.Digest) error {
	h, err := v1.NewHash(dg.String())
	if err != nil {
		return err
	}
	img, err := p.imageFromLayout(dir, h)
	if err != nil {
		return err
	}
	if err := p.copyBlobs(ctx, repo, img, nil); err != nil {
		return fmt.Errorf("referrer %s: %w", short(dg), err)
	}
	raw, err := img.RawManifest()
	if err != nil {
		return fmt.Errorf("referrer %s: %w", short(dg), err)
	}
	if err := p.referrers().Add(ctx, repo, raw); err != nil {
		return fmt.Errorf("referrer %s: %w", short(dg), err)
	}
	return nil
}

// layoutReferrers fills the attestation and SBOM of each record from the
// referrer entries of the layout's index.json (entries naming the
// record's image digest).
func layoutReferrers(ds []v1.Descriptor, recs []core.Image) {
	for i := range recs {
		r := &recs[i]
		for _, d := range ds {
			if d.Annotations[annotationReferenceDigest] != r.Digest.String() || d.Annotations[ociRefName] != "" {
				continue
			}
			switch {
			case d.Annotations[annotationReferenceType] == referenceTypeAttestation:
				r.Attestation, r.AttestationSize = digest.Digest(d.Digest.String()), d.Size
			case d.ArtifactType == sbom.MediaType:
				r.SBOM, r.SBOMSize = digest.Digest(d.Digest.String()), d.Size
			case d.ArtifactType == attest.StatementMediaType:
				r.Verification, r.VerificationSize = digest.Digest(d.Digest.String()), d.Size
			}
		}
	}
}
