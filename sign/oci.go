package sign

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/publication"
)

// Annotations of a bundle referrer, as cosign v3 writes them
// (pkg/oci/remote.WriteAttestationNewBundleFormat).
const (
	AnnotationBundleContent       = "dev.sigstore.bundle.content"
	AnnotationBundlePredicateType = "dev.sigstore.bundle.predicateType"
	annotationCreated             = "org.opencontainers.image.created"
	emptyConfigType               = "application/vnd.oci.empty.v1+json"
	bundleTypePrefix              = "application/vnd.dev.sigstore.bundle"
)

// referrerManifest is cosign v3's referrer manifest: an OCI image
// manifest with artifactType, the empty config (whose descriptor also
// names the artifactType: cosign clean looks there), one layer and the
// subject. Field order is go-containerregistry's v1.Manifest's, then
// artifactType, as cosign marshals it.
type referrerManifest struct {
	v1.Manifest
	ArtifactType string `json:"artifactType,omitempty"`
}

// Artifact returns the referrer that carries bundle (a Sigstore bundle of
// a statement of predicateType) on subject, exactly as cosign v3 attaches
// an attestation: artifactType and layer media type BundleMediaType, the
// empty config, annotations dev.sigstore.bundle.content=dsse-envelope and
// dev.sigstore.bundle.predicateType. cosign also writes
// org.opencontainers.image.created with the time of writing; created is
// written only when not zero, so that signing one statement twice (the
// key path is deterministic) gives one referrer, not two.
func Artifact(subject v1.Descriptor, predicateType string, bundle []byte, created time.Time) (*attest.Artifact, error) {
	ch, cs, _ := v1.SHA256(bytes.NewReader(attest.EmptyConfig))
	lh, ls, _ := v1.SHA256(bytes.NewReader(bundle))
	ann := map[string]string{
		AnnotationBundleContent:       "dsse-envelope",
		AnnotationBundlePredicateType: predicateType,
	}
	if !created.IsZero() {
		ann[annotationCreated] = created.UTC().Format(time.RFC3339)
	}
	m := referrerManifest{
		Manifest: v1.Manifest{
			SchemaVersion: 2,
			MediaType:     types.OCIManifestSchema1,
			Config:        v1.Descriptor{MediaType: emptyConfigType, ArtifactType: BundleMediaType, Digest: ch, Size: cs},
			Layers:        []v1.Descriptor{{MediaType: BundleMediaType, Digest: lh, Size: ls}},
			Subject:       &v1.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size},
			Annotations:   ann,
		},
		ArtifactType: BundleMediaType,
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding the bundle referrer: %w", err)
	}
	h, n, _ := v1.SHA256(bytes.NewReader(raw))
	return &attest.Artifact{
		Raw:        raw,
		Descriptor: v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: h, Size: n, ArtifactType: BundleMediaType, Annotations: ann},
		Blob:       bundle,
		BlobType:   BundleMediaType,
	}, nil
}

// Attached is a statement signed and attached.
type Attached struct {
	// Referrer is the referrer manifest's digest; Written says whether
	// this call wrote it (false: it was attached already).
	Referrer v1.Hash
	Written  bool
	StatementInfo
}

// Attach signs statement with s and attaches the bundle to subject in repo
// through refs (attest.Referrers: the referrers API where served, else
// the sha256-<hex> fallback index cosign reads, plus a write-once tag). A
// statement whose subjects do not name subject's digest is refused: no
// verifier (cosign's included) would accept it for this image. A referrer
// already attached is not written again (one HEAD).
func (s *Signer) Attach(ctx context.Context, refs *attest.Referrers, repo name.Repository, subject v1.Descriptor, statement []byte) (Attached, error) {
	bundle, info, err := s.Sign(ctx, statement)
	if err != nil {
		return Attached{}, fmt.Errorf("%s@%s: %w", repo, subject.Digest, err)
	}
	if !info.Names(subject.Digest.Hex) {
		return Attached{}, fmt.Errorf("%s@%s: the %s statement is about %s, not this image", repo, subject.Digest, info.PredicateType, strings.Join(sortedSubjects(info), ", "))
	}
	a, err := Artifact(subject, info.PredicateType, bundle, time.Time{})
	if err != nil {
		return Attached{}, err
	}
	wrote, err := refs.AttachOnce(ctx, repo, a)
	if err != nil {
		return Attached{}, fmt.Errorf("attaching the signed %s statement to %s@%s: %w", info.PredicateType, repo, subject.Digest, err)
	}
	return Attached{Referrer: a.Descriptor.Digest, Written: wrote, StatementInfo: info}, nil
}

// IsBundleReferrer reports whether a referrer descriptor (from the
// referrers API or a fallback index) is a Sigstore bundle.
func IsBundleReferrer(d v1.Descriptor) bool {
	return strings.HasPrefix(d.ArtifactType, bundleTypePrefix)
}

// ReadBundles reads the Sigstore bundles among referrers (of one image, in
// repo, as r.Referrers lists them) through the publication reader: each
// referrer whose artifactType is a bundle media type, its one layer of a
// bundle media type (bounded and digest-checked). A referrer that is not a
// single-layer bundle manifest is skipped, as cosign skips it.
func ReadBundles(ctx context.Context, r *publication.Reader, repo name.Repository, referrers []v1.Descriptor) ([]Bundle, error) {
	var out []Bundle
	for _, d := range referrers {
		if !IsBundleReferrer(d) {
			continue
		}
		got, err := r.Manifest(ctx, repo.Digest(d.Digest.String()))
		if err != nil {
			return nil, fmt.Errorf("reading bundle referrer %s in %s: %w", d.Digest, repo, err)
		}
		m, err := v1.ParseManifest(bytes.NewReader(got.Raw))
		if err != nil || len(m.Layers) != 1 || !strings.HasPrefix(string(m.Layers[0].MediaType), bundleTypePrefix) {
			continue
		}
		raw, err := r.ReadBlob(ctx, repo, m.Layers[0], maxStatement, "bundle")
		if err != nil {
			return nil, fmt.Errorf("reading bundle referrer %s in %s: %w", d.Digest, repo, err)
		}
		out = append(out, Bundle{Referrer: d.Digest, PredicateType: m.Annotations[AnnotationBundlePredicateType], JSON: raw})
	}
	return out, nil
}

// VerifyImage lists the referrers of image in repo through the publication
// reader (r.Referrers: the API, else the fallback index and attachment
// tags), reads its bundles and verifies them (Trust.VerifyBundles): the
// verified statements, or an *ImageError naming repo@image and why.
func (t Trust) VerifyImage(ctx context.Context, r *publication.Reader, repo name.Repository, image v1.Hash, want ...string) (*Result, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	ref := repo.Digest(image.String()).String()
	list, err := r.Referrers(ctx, repo, image)
	if err != nil {
		return nil, fmt.Errorf("%s: listing referrers: %w", ref, err)
	}
	bundles, err := ReadBundles(ctx, r, repo, list)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	res, err := t.VerifyBundles(ref, image, bundles, want...)
	if ie, ok := err.(*ImageError); ok && len(bundles) == 0 {
		ie.Reason = fmt.Sprintf("no signed statement: none of its %d referrers is a Sigstore bundle", len(list))
	}
	return res, err
}
