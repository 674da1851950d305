package publish

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/publication"
)

// The index's verification summary
//
// Once an index is in place, publish attaches to it, in the index
// repository, an in-toto Simple Verification Result (attest.
// VerificationSummary) naming which children were verified and how, made
// from each child's verification statement: as a plain statement artifact
// (what skopeo and oras read) and, with a signer, as a Sigstore bundle
// (cosign verify-attestation --type https://in-toto.io/attestation/svr/v0.1
// on the index digest). An older summary of the same index is superseded.
// The index's ledger record names the summary (Verification) and its
// bundle (Signatures): a re-run on the same index checks them with one
// HEAD each and makes none.

// verificationStatement returns the verification statement of the per-arch
// image im (published as pub in repo): the one this run made, else the
// build's, read by the digest its record names; nil when there is none.
// It is read once per run.
func (p *publisher) verificationStatement(ctx context.Context, repo name.Repository, im core.Image, pub *published) ([]byte, error) {
	if pub.statementBytes != nil || (pub.verification == nil && im.Verification == "") {
		return pub.statementBytes, nil
	}
	if pub.verification != nil {
		pub.statementBytes = pub.verification.Blob
		return pub.statementBytes, nil
	}
	h, err := v1.NewHash(im.Verification.String())
	if err != nil {
		return nil, fmt.Errorf("verification statement digest %q: %w", im.Verification, err)
	}
	layers, err := attest.ReferrerPayloads(ctx, publication.New(p.c), repo, h)
	if err != nil {
		return nil, fmt.Errorf("reading the verification statement %s: %w", short(im.Verification), err)
	}
	for _, l := range layers {
		if l.PredicateType == attest.TestResultPredicate || l.PredicateType == "" {
			pub.statementBytes = l.Payload
			return pub.statementBytes, nil
		}
	}
	return nil, fmt.Errorf("the verification statement artifact %s holds no test-result statement", short(im.Verification))
}

// summarized reports whether the ledger's index record prev already names
// a summary of the index dg, signed by this run's signer, still attached
// (one HEAD each; none with TrustLedger), and no child's referrers changed
// in this run.
func (p *publisher) summarized(ctx context.Context, repo name.Repository, dg digest.Digest, prev *core.Image, pubs []published) (bool, error) {
	name := ""
	if p.opts.Signer != nil {
		name = p.opts.Signer.Name()
	}
	if prev == nil || prev.Status != core.StatusPublished || prev.Digest != dg || prev.Verification == "" || prev.SignedBy != name || (name != "" && len(prev.Signatures) == 0) {
		return false, nil
	}
	for _, pb := range pubs {
		if pb.carried {
			return false, nil
		}
	}
	if p.opts.TrustLedger {
		return true, nil
	}
	subject, err := v1.NewHash(dg.String())
	if err != nil {
		return false, err
	}
	for _, d := range append([]digest.Digest{prev.Verification}, prev.Signatures...) {
		h, err := v1.NewHash(d.String())
		if err != nil {
			return false, err
		}
		if have, err := p.referrers().Attached(ctx, repo, subject, h); err != nil || !have {
			return false, err
		}
	}
	return true, nil
}

// summarize attaches the verification summary of the index dg of id (its
// children imgs, published as pubs) in the index repository, signed when
// there is a signer, and records it on the index's ledger record. prev is
// the index's record before this run. An index none of whose children has
// a verification statement gets no summary.
func (p *publisher) summarize(ctx context.Context, id string, dg digest.Digest, imgs []core.Image, pubs []published, prev *core.Image) error {
	any := false
	for i := range pubs {
		if pubs[i].verification != nil || imgs[i].Verification != "" {
			any = true
		}
	}
	if !any {
		return nil
	}
	repo, err := p.c.ParseRepository(p.namer.IndexRepo(id))
	if err != nil {
		return err
	}
	if done, err := p.summarized(ctx, repo, dg, prev, pubs); err != nil || done {
		return err
	}
	rec, ok := p.opts.Ledger.Lookup(core.KindIndex, id, core.Platform{})
	if !ok || rec.Digest != dg || rec.Size <= 0 {
		return fmt.Errorf("summarizing the index %s: the ledger has no record of it", short(dg))
	}
	var children []attest.Child
	for i, pb := range pubs {
		im := imgs[i]
		archRepo, err := p.c.ParseRepository(p.namer.ArchRepo(im.Platform.Arch(), id))
		if err != nil {
			return err
		}
		c := attest.Child{Platform: im.Platform, Name: archRepo.String(), Digest: im.Digest.String()}
		raw, err := p.verificationStatement(ctx, archRepo, im, &pubs[i])
		if err != nil {
			return err
		}
		if raw != nil {
			if c.Statement, err = attest.ParseVerificationStatement(raw); err != nil {
				return fmt.Errorf("%s: %w", im.Platform, err)
			}
			sum := sha256.Sum256(raw)
			c.StatementDigest = hex.EncodeToString(sum[:])
		}
		_ = pb
		children = append(children, c)
	}
	stmt, err := attest.VerificationSummary(repo.String(), dg.String(), children, time.Now())
	if err != nil {
		return err
	}
	h, err := v1.NewHash(dg.String())
	if err != nil {
		return err
	}
	subject := v1.Descriptor{MediaType: types.OCIImageIndex, Digest: h, Size: rec.Size}
	a, err := attest.StatementArtifact(subject, attest.SummaryPredicate, stmt)
	if err != nil {
		return err
	}
	if _, err := p.referrers().AttachOnce(ctx, repo, a); err != nil {
		return fmt.Errorf("attaching the verification summary: %w", err)
	}
	keep := []v1.Hash{a.Descriptor.Digest}
	rec.Verification, rec.VerificationSize = digest.Digest(a.Descriptor.Digest.String()), a.Descriptor.Size
	rec.Signatures, rec.SignedBy = nil, ""
	if s := p.opts.Signer; s != nil {
		b, _, err := s.SignedArtifact(ctx, subject, stmt)
		if err != nil {
			return fmt.Errorf("signing the verification summary: %w", err)
		}
		if _, err := p.referrers().AttachOnce(ctx, repo, b); err != nil {
			return fmt.Errorf("attaching the signed verification summary: %w", err)
		}
		keep = append(keep, b.Descriptor.Digest)
		rec.Signatures, rec.SignedBy = []digest.Digest{digest.Digest(b.Descriptor.Digest.String())}, s.Name()
	}
	gone, err := p.referrers().Supersede(ctx, repo, h, keep)
	if err != nil {
		return err
	}
	for _, d := range gone {
		p.progress("superseded %s index %s in %s: %s %s (an older summary)", id, short(dg), repo, d.ArtifactType, short(digest.Digest(d.Digest.String())))
	}
	p.progress("summary %s index %s: %s", id, short(dg), short(rec.Verification))
	return p.record("recording the verification summary", rec)
}
