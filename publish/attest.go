package publish

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/verification"
)

// How attestations travel
//
// The builder pushes each image by digest with BuildKit's attestation
// manifest beside it (core.Image.Attestation: an OCI 1.1 artifact whose
// subject is the image, holding the SLSA provenance statement). Publish
// copies images by digest and writes its own index, so the attestation
// manifest is copied the same way: into the per-arch repository before the
// image's tags (a resumed run that finds the content tag finds the
// attestation too), registered there as a referrer of the image (attest:
// referrers API or the sha256-<hex> fallback tag), then into the index
// repository with the image, and listed in the index after the images as
// buildx lays it out (platform unknown/unknown, vnd.docker.reference.type
// attestation-manifest, vnd.docker.reference.digest the image).
//
// The build's verification statement (core.Image.Verification: the gold
// check of build --verify, attached by the builder where it pushed the
// image) is carried like the SBOM (sbom.go). A statement of a separate
// verify run (Options.Verification, publish --verification) is made here
// from its verdicts and attached to the per-arch image as a referrer. Once
// an image's referrers are in place, another build's of the same kinds
// are superseded (sbom.go, supersede).

// childAttestation is the build's attestation of im as an index lists it.
func childAttestation(im core.Image) *manifests.Attestation {
	if im.Attestation == "" {
		return nil
	}
	return &manifests.Attestation{Digest: im.Attestation.String(), Size: im.AttestationSize}
}

func (p *publisher) referrers() *attest.Referrers {
	p.refOnce.Do(func() { p.refs = &attest.Referrers{Client: p.c, OnRetry: p.onRefRetry} })
	return p.refs
}

// carryAttestation copies im's attestation manifest (and its blobs) from
// the image's source into repo and registers it as a referrer of the image
// there.
func (p *publisher) carryAttestation(ctx context.Context, repo name.Repository, im core.Image, mountFrom *name.Repository) error {
	if im.Attestation == "" {
		return nil
	}
	if err := p.carryReferrer(ctx, repo, im, im.Attestation, mountFrom); err != nil {
		return fmt.Errorf("attestation %s: %w", short(im.Attestation), err)
	}
	return nil
}

// carryReferrer copies the referrer dg of im (BuildKit's attestation
// manifest or the SBOM artifact) into repo, unless repo has it (one HEAD):
// from the registry im was pushed to (mountFrom, else the record's ref)
// when it is there, else from the record's OCI layout, where the build
// wrote it beside the image (layoutrefs.go).
func (p *publisher) carryReferrer(ctx context.Context, repo name.Repository, im core.Image, dg digest.Digest, mountFrom *name.Repository) error {
	d, err := p.c.Head(ctx, repo.Digest(dg.String()))
	if err != nil {
		return err
	}
	if d != nil {
		return nil
	}
	from := mountFrom
	if from == nil {
		from = p.refRepo(im)
	}
	if from != nil {
		if im.OCILayout == "" {
			return p.copyReferrer(ctx, repo, *from, dg.String())
		}
		// A build with --push and --output: the layout's referrer may
		// be one the push did not write.
		if s, err := p.c.Head(ctx, from.Digest(dg.String())); err != nil {
			return err
		} else if s != nil {
			return p.copyReferrer(ctx, repo, *from, dg.String())
		}
	}
	if im.OCILayout == "" {
		return errors.New("the record has no registry ref or OCI layout to copy it from")
	}
	return p.copyLayoutReferrer(ctx, repo, im.OCILayout, dg)
}

// refRepo is the repository of im's registry ref (nil when it has none).
func (p *publisher) refRepo(im core.Image) *name.Repository {
	if im.Ref == "" {
		return nil
	}
	ref, err := p.c.ParseReference(im.Ref)
	if err != nil {
		return nil
	}
	repo := ref.Context()
	return &repo
}

// copyAttestation puts the attestation manifest dg from src into repo
// (blobs mounted or copied as an image's are) and adds it to the referrers
// of its subject in repo; nothing when repo has it already.
func (p *publisher) copyAttestation(ctx context.Context, repo, src name.Repository, dg string) error {
	d, err := p.c.Head(ctx, repo.Digest(dg))
	if err != nil {
		return fmt.Errorf("attestation %s: %w", dg, err)
	}
	if d != nil {
		return nil
	}
	return p.copyReferrer(ctx, repo, src, dg)
}

// copyReferrer copies the referrer manifest dg (its blobs mounted from src
// or copied) from src into repo and adds it to its subject's referrers
// there.
func (p *publisher) copyReferrer(ctx context.Context, repo, src name.Repository, dg string) error {
	img, err := p.c.Image(ctx, src.Digest(dg))
	if err != nil {
		return fmt.Errorf("attestation: %w", err)
	}
	if err := p.copyBlobs(ctx, repo, img, &src); err != nil {
		return fmt.Errorf("attestation %s: %w", dg, err)
	}
	raw, err := img.RawManifest()
	if err != nil {
		return fmt.Errorf("attestation %s: %w", dg, err)
	}
	if err := p.referrers().Add(ctx, repo, raw); err != nil {
		return fmt.Errorf("attestation %s: %w", dg, err)
	}
	return nil
}

// indexAttestation copies a child's attestation from its per-arch
// repository into the index repository.
func (p *publisher) indexAttestation(ctx context.Context, repo, archRepo name.Repository, ch manifests.Child) error {
	if ch.Attestation == nil {
		return nil
	}
	return p.copyAttestation(ctx, repo, archRepo, ch.Attestation.Digest)
}

// VerificationSource is what verification statements are made from at
// publish time (publish --verification SUMMARY): verify's gold verdicts,
// each bound to the digest its runs used.
type VerificationSource struct {
	// Verdicts are the gold results (verify.Summary.Verdicts).
	Verdicts []verification.Verdict
	// Verifier names the tool and version written in the statement.
	Verifier string
}

// verification returns the statement for the per-arch image im of id, or
// nil when the source has no gold verdict on exactly that image.
func (p *publisher) verification(id string, im core.Image) ([]byte, error) {
	src := p.opts.Verification
	if src == nil {
		return nil, nil
	}
	var gold *verification.Verdict
	for i := range src.Verdicts {
		if v := &src.Verdicts[i]; v.InstanceID == id && v.Platform == im.Platform {
			gold = v
		}
	}
	if gold == nil {
		return nil, nil
	}
	if gold.Digest() != im.Digest.String() {
		return nil, fmt.Errorf("verification of %s %s ran on %q, not on the image published (%s)", id, im.Platform, gold.Image, im.Digest)
	}
	return attest.VerificationStatement(attest.VerificationOf(*gold, p.namer.ArchRepo(im.Platform.Arch(), id), im.Digest.String(), src.Verifier))
}

// attachVerification attaches the verification statement of the per-arch
// image im to it, once: a re-run finds the statement's attachment tag with
// one HEAD and writes nothing. It returns the statement's artifact (nil
// when there is no statement) for the index repository (indexrefs.go), and
// whether it wrote it.
func (p *publisher) attachVerification(ctx context.Context, id string, im core.Image, child manifests.Child) (*attest.Artifact, bool, error) {
	stmt, err := p.verification(id, im)
	if err != nil || stmt == nil {
		return nil, false, err
	}
	repo, err := p.c.ParseRepository(p.namer.ArchRepo(im.Platform.Arch(), id))
	if err != nil {
		return nil, false, err
	}
	h, err := v1.NewHash(im.Digest.String())
	if err != nil {
		return nil, false, err
	}
	subject := v1.Descriptor{MediaType: child.MediaType, Digest: h, Size: child.Size}
	if subject.MediaType == "" {
		subject.MediaType = types.OCIManifestSchema1
	}
	a, err := attest.StatementArtifact(subject, attest.TestResultPredicate, stmt)
	if err != nil {
		return nil, false, err
	}
	attached, err := p.referrers().AttachOnce(ctx, repo, a)
	if err != nil {
		return nil, false, fmt.Errorf("attaching the verification: %w", err)
	}
	if attached {
		p.progress("attached verification %s %s %s", id, im.Platform, short(digest.Digest(a.Descriptor.Digest.String())))
	}
	return a, attached, nil
}
