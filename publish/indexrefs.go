package publish

import (
	"context"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Attachments in the index repository
//
// A consumer pulls REPO/sweb.eval.<id>, the multi-arch index, and asks
// that repository for the referrers of the per-arch manifest it resolved
// (the index repository holds every child by digest). So, once the index
// is written (or found present), each child's verification statement and
// SBOM are attached there too: the same artifact bytes as in the per-arch
// repository, the same subject (the per-arch image manifest), registered
// through attest.Referrers (referrers API, else the sha256-<hex> fallback
// index and the write-once attachment tag). BuildKit's provenance already
// travels with the child when it is copied (indexAttestation).
//
// Each attachment is looked for first by its write-once attachment tag:
// a re-run that finds it costs that one HEAD and writes nothing.

// indexReferrers attaches the verification statement and the SBOM of
// every published child of id in the index repository.
func (p *publisher) indexReferrers(ctx context.Context, id string, pubs []published) error {
	repo, err := p.c.ParseRepository(p.namer.IndexRepo(id))
	if err != nil {
		return err
	}
	for _, pb := range pubs {
		ch := pb.child
		if pb.verification != nil {
			attached, err := p.referrers().AttachOnce(ctx, repo, pb.verification)
			if err != nil {
				return fmt.Errorf("attaching the verification of %s in %s: %w", ch.Platform, repo, err)
			}
			if attached {
				p.progress("attached verification %s %s in %s", id, ch.Platform, repo)
			}
		}
		if pb.sbom == "" {
			continue
		}
		subject, err := v1.NewHash(ch.Digest)
		if err != nil {
			return fmt.Errorf("child %s: digest %q: %w", ch.Platform, ch.Digest, err)
		}
		art, err := v1.NewHash(pb.sbom.String())
		if err != nil {
			return fmt.Errorf("child %s: SBOM digest %q: %w", ch.Platform, pb.sbom, err)
		}
		if have, err := p.referrers().Attached(ctx, repo, subject, art); err != nil {
			return fmt.Errorf("looking for the SBOM of %s in %s: %w", ch.Platform, repo, err)
		} else if have {
			continue
		}
		archRepo, err := p.c.ParseRepository(p.namer.ArchRepo(ch.Platform.Arch(), id))
		if err != nil {
			return err
		}
		if err := p.copyReferrer(ctx, repo, archRepo, pb.sbom.String()); err != nil {
			return fmt.Errorf("attaching the SBOM of %s in %s: %w", ch.Platform, repo, err)
		}
		p.progress("attached SBOM %s %s in %s", id, ch.Platform, repo)
	}
	return nil
}
