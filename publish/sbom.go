package publish

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/swebuild/swebuild/core"
)

// How the SBOM travels
//
// The builder attaches each env and instance image's resolved environment
// (package sbom: a CycloneDX document in an OCI 1.1 artifact whose subject
// is the image manifest) in the repository it pushes to, and the record
// names the artifact (core.Image.SBOM). Publish copies that artifact
// manifest and its blobs into the published per-arch repository, where the
// image has the same digest, and registers it there as a referrer of the
// image (attest.Referrers: the referrers API, else the sha256-<hex>
// fallback tag), before the image's tags, as it does BuildKit's
// provenance. A re-run that finds the artifact by digest writes nothing
// (one HEAD), and one whose ledger already records it published with the
// same SBOM makes no request for it at all.

// carrySBOM copies im's SBOM artifact from the image's source repository
// into repo and registers it as a referrer of the image there.
func (p *publisher) carrySBOM(ctx context.Context, repo name.Repository, im core.Image, mountFrom *name.Repository) error {
	if im.SBOM == "" {
		return nil
	}
	if mountFrom == nil {
		return fmt.Errorf("SBOM %s: the record has no registry ref to copy it from", short(im.SBOM))
	}
	if err := p.copyAttestation(ctx, repo, *mountFrom, im.SBOM.String()); err != nil {
		return fmt.Errorf("carrying the SBOM: %w", err)
	}
	return nil
}
