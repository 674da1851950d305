package publish

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/opencontainers/go-digest"

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
	if err := p.carryReferrer(ctx, repo, im, im.SBOM, mountFrom); err != nil {
		return fmt.Errorf("carrying the SBOM %s: %w", short(im.SBOM), err)
	}
	return nil
}

// carryStatement copies the build's verification statement artifact
// (core.Image.Verification: attached by the builder where it pushed the
// image, or written into its OCI layout) into repo, as carrySBOM does the
// SBOM: the statement published is the one the gold check made of this
// digest, whatever else is attached to it in the source.
func (p *publisher) carryStatement(ctx context.Context, repo name.Repository, im core.Image, mountFrom *name.Repository) error {
	if im.Verification == "" {
		return nil
	}
	if err := p.carryReferrer(ctx, repo, im, im.Verification, mountFrom); err != nil {
		return fmt.Errorf("carrying the verification statement %s: %w", short(im.Verification), err)
	}
	return nil
}

// supersede makes the referrers this publish attached to im in the
// repository named repo (its provenance, SBOM, the build's and this run's
// verification statements) the only ones of their kinds there: those
// another build of the same digest attached before are superseded
// (attest.Referrers.Supersede).
func (p *publisher) supersede(ctx context.Context, repo string, im core.Image, pub published) error {
	r, err := p.c.ParseRepository(repo)
	if err != nil {
		return err
	}
	subject, err := v1.NewHash(im.Digest.String())
	if err != nil {
		return fmt.Errorf("digest %q: %w", im.Digest, err)
	}
	var keep []v1.Hash
	for _, dg := range []digest.Digest{im.Attestation, im.SBOM, im.Verification} {
		if dg == "" {
			continue
		}
		h, err := v1.NewHash(dg.String())
		if err != nil {
			return fmt.Errorf("referrer digest %q: %w", dg, err)
		}
		keep = append(keep, h)
	}
	if pub.verification != nil {
		keep = append(keep, pub.verification.Descriptor.Digest)
	}
	if len(keep) == 0 {
		return nil
	}
	gone, err := p.referrers().Supersede(ctx, r, subject, keep)
	if err != nil {
		return err
	}
	for _, d := range gone {
		p.progress("superseded %s %s %s in %s: %s %s (another build of the same digest)", im.InstanceID, im.Platform, short(im.Digest), repo, d.ArtifactType, short(digest.Digest(d.Digest.String())))
	}
	return nil
}
