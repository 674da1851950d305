package publish

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/manifests"
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
		for _, carried := range []struct {
			what string
			dg   digest.Digest
		}{{"SBOM", pb.sbom}, {"verification statement", pb.statement}} {
			if err := p.indexReferrer(ctx, id, repo, ch, carried.what, carried.dg); err != nil {
				return err
			}
		}
	}
	return nil
}

// indexReferrer copies the referrer dg (what names it) of child ch from
// its per-arch repository into the index repository repo, unless its
// attachment tag is there already.
func (p *publisher) indexReferrer(ctx context.Context, id string, repo name.Repository, ch manifests.Child, what string, dg digest.Digest) error {
	if dg == "" {
		return nil
	}
	subject, err := v1.NewHash(ch.Digest)
	if err != nil {
		return fmt.Errorf("child %s: digest %q: %w", ch.Platform, ch.Digest, err)
	}
	art, err := v1.NewHash(dg.String())
	if err != nil {
		return fmt.Errorf("child %s: %s digest %q: %w", ch.Platform, what, dg, err)
	}
	if have, err := p.referrers().Attached(ctx, repo, subject, art); err != nil {
		return fmt.Errorf("looking for the %s of %s in %s: %w", what, ch.Platform, repo, err)
	} else if have {
		return nil
	}
	archRepo, err := p.c.ParseRepository(p.namer.ArchRepo(ch.Platform.Arch(), id))
	if err != nil {
		return err
	}
	if err := p.copyReferrer(ctx, repo, archRepo, dg.String()); err != nil {
		return fmt.Errorf("attaching the %s of %s in %s: %w", what, ch.Platform, repo, err)
	}
	p.progress("attached %s %s %s in %s", what, id, ch.Platform, repo)
	return nil
}
