package publish

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/publication"
	"github.com/swebuild/swebuild/sbom"
	"github.com/swebuild/swebuild/sign"
)

// Signed statements
//
// With a signer (Options.Signer), every in-toto statement publish attaches
// to a per-arch image is also attached signed, as a Sigstore bundle the way
// cosign v3 attaches attestations (package sign): the verification
// statement (the build's, carried, or the one made here from publish
// --verification), BuildKit's SLSA provenance (the statement in the
// build's attestation manifest) and the resolved environment (the CycloneDX
// document made a statement of predicate type https://cyclonedx.org/bom,
// what cosign's --type cyclonedx reads). Each statement is read by digest
// from the referrer the record names, so what is signed is what the build
// recorded; each is signed once and the bundle attached in the per-arch
// repository, then in the index repository (indexrefs.go), where a consumer
// of the multi-arch name looks. A key signer signs deterministically: a
// re-run makes the same bundles and writes nothing. The ledger records the
// bundles and the signer (core.Image.Signatures, SignedBy): a re-run whose
// ledger has them signed by the same signer checks each with one HEAD (none
// with TrustLedger) instead of signing again.

// statementsOf reads the statements to sign of the per-arch image im in
// repo: the verification (ver, when this run made it; else the build's
// statement artifact), the provenance and the SBOM as a statement.
func (p *publisher) statementsOf(ctx context.Context, repo name.Repository, im core.Image, ver *attest.Artifact) ([][]byte, error) {
	r := publication.New(p.c)
	var out [][]byte
	read := func(what string, dg digest.Digest, keep func(attest.Carried) bool) ([]attest.Carried, error) {
		if dg == "" {
			return nil, nil
		}
		h, err := v1.NewHash(dg.String())
		if err != nil {
			return nil, fmt.Errorf("%s digest %q: %w", what, dg, err)
		}
		layers, err := attest.ReferrerPayloads(ctx, r, repo, h)
		if err != nil {
			return nil, fmt.Errorf("reading the %s %s to sign it: %w", what, short(dg), err)
		}
		return slices.DeleteFunc(layers, func(c attest.Carried) bool { return !keep(c) }), nil
	}
	if ver != nil {
		out = append(out, ver.Blob)
	} else {
		got, err := read("verification statement", im.Verification, func(c attest.Carried) bool {
			return c.PredicateType == attest.TestResultPredicate || c.PredicateType == ""
		})
		if err != nil {
			return nil, err
		}
		for _, c := range got {
			out = append(out, c.Payload)
		}
	}
	prov, err := read("provenance", im.Attestation, func(c attest.Carried) bool {
		return strings.HasPrefix(c.PredicateType, "https://slsa.dev/provenance/")
	})
	if err != nil {
		return nil, err
	}
	if im.Attestation != "" && len(prov) == 0 {
		return nil, fmt.Errorf("the attestation manifest %s holds no SLSA provenance statement", short(im.Attestation))
	}
	for _, c := range prov {
		out = append(out, c.Payload)
	}
	docs, err := read("SBOM", im.SBOM, func(c attest.Carried) bool { return c.MediaType == types.MediaType(sbom.MediaType) })
	if err != nil {
		return nil, err
	}
	if im.SBOM != "" && len(docs) != 1 {
		return nil, fmt.Errorf("the SBOM artifact %s holds %d CycloneDX documents, want 1", short(im.SBOM), len(docs))
	}
	for _, c := range docs {
		st, err := sign.Statement(repo.String(), im.Digest.Encoded(), sign.CycloneDXBOM, c.Payload)
		if err != nil {
			return nil, fmt.Errorf("the SBOM %s as a statement: %w", short(im.SBOM), err)
		}
		out = append(out, st)
	}
	return out, nil
}

// signed reports whether the ledger's record prev of im already holds
// signatures by this run's signer over this build's referrers, each still
// attached in repo (one HEAD each; none with TrustLedger).
func (p *publisher) signed(ctx context.Context, repo name.Repository, im core.Image, prev *core.Image) (bool, error) {
	s := p.opts.Signer
	if prev == nil || prev.Status != core.StatusPublished || prev.Digest != im.Digest || prev.SignedBy != s.Name() || len(prev.Signatures) == 0 ||
		prev.Attestation != im.Attestation || prev.SBOM != im.SBOM || prev.Verification != im.Verification || p.opts.Verification != nil {
		return false, nil
	}
	if p.opts.TrustLedger {
		return true, nil
	}
	subject, err := v1.NewHash(im.Digest.String())
	if err != nil {
		return false, err
	}
	for _, sg := range prev.Signatures {
		h, err := v1.NewHash(sg.String())
		if err != nil {
			return false, err
		}
		have, err := p.referrers().Attached(ctx, repo, subject, h)
		if err != nil || !have {
			return false, err
		}
	}
	return true, nil
}

// signImage signs the statements of the per-arch image im (published as
// pub) and attaches the bundles in its per-arch repository, unless the
// ledger's record prev says they are there; it records the bundles in the
// ledger and in pub (for the index repository and superseding).
func (p *publisher) signImage(ctx context.Context, id string, im core.Image, pub *published, prev *core.Image) error {
	s := p.opts.Signer
	if s == nil {
		return nil
	}
	repo, err := p.c.ParseRepository(p.namer.ArchRepo(im.Platform.Arch(), id))
	if err != nil {
		return err
	}
	done, err := p.signed(ctx, repo, im, prev)
	if err != nil {
		return fmt.Errorf("looking for the signed statements: %w", err)
	}
	if done {
		pub.signatures = prev.Signatures
		p.count(func(sum *Summary) { sum.SignaturesPresent += len(prev.Signatures) })
		return nil
	}
	stmts, err := p.statementsOf(ctx, repo, im, pub.verification)
	if err != nil {
		return err
	}
	h, err := v1.NewHash(im.Digest.String())
	if err != nil {
		return err
	}
	subject := v1.Descriptor{MediaType: pub.child.MediaType, Digest: h, Size: pub.child.Size}
	if subject.MediaType == "" {
		subject.MediaType = types.OCIManifestSchema1
	}
	var sigs []digest.Digest
	var kinds []string
	for _, st := range stmts {
		a, info, err := s.SignedArtifact(ctx, subject, st)
		if err != nil {
			return fmt.Errorf("signing: %w", err)
		}
		wrote, err := p.referrers().AttachOnce(ctx, repo, a)
		if err != nil {
			return fmt.Errorf("attaching the signed %s statement: %w", info.PredicateType, err)
		}
		sigs = append(sigs, digest.Digest(a.Descriptor.Digest.String()))
		kinds = append(kinds, shortType(info.PredicateType))
		if wrote {
			pub.carried = true
			p.count(func(sum *Summary) { sum.SignaturesWritten++ })
		} else {
			p.count(func(sum *Summary) { sum.SignaturesPresent++ })
		}
	}
	pub.signatures = sigs
	if len(sigs) == 0 {
		return nil
	}
	p.progress("signed  %s %s %s: %s (%s)", id, im.Platform, short(im.Digest), strings.Join(kinds, ", "), s.Name())
	rec := pub.record
	rec.Signatures, rec.SignedBy = sigs, s.Name()
	return p.record("recording the signatures", rec)
}

// shortType names a predicate type in progress lines.
func shortType(pt string) string {
	switch {
	case pt == attest.TestResultPredicate:
		return "verification"
	case strings.HasPrefix(pt, "https://slsa.dev/provenance/"):
		return "provenance"
	case pt == sign.CycloneDXBOM:
		return "SBOM"
	}
	return pt
}
