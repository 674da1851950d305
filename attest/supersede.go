package attest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Superseded referrers
//
// One image digest can be built more than once: a rebuild that BuildKit
// answers from its cache gives the same image manifest with a new
// provenance (BuildKit dates each build and names its invocation), and a
// new verification statement. Publishing the second build into a
// repository that holds the first would leave the image with two
// provenance manifests and two statements, and a consumer could not tell
// which one belongs to the build published. So after publish attaches a
// build's referrers to an image, the ones of the same kind that the build
// did not make are superseded (Supersede): taken out of the subject's
// fallback index, and their write-once attachment tags pointed at a
// tombstone (a manifest with no subject), so List does not find them
// either. Referrers of a kind the build did not attach (a signature
// someone else added) are left as they are. A later publish of the older
// build attaches its referrers again (Add writes the attachment tag
// again). On a registry serving the referrers API nothing is superseded:
// the API lists every manifest whose subject is the image, and removing
// one would mean deleting it.

// AnnotationBundlePredicateType is the predicate type of the statement a
// Sigstore bundle referrer carries (cosign v3 writes it on the manifest and
// its descriptor; package sign writes it the same way).
const AnnotationBundlePredicateType = "dev.sigstore.bundle.predicateType"

// AnnotationSuperseded is the tombstone's annotation naming what
// superseded the referrer that was attached under its tag.
const AnnotationSuperseded = "org.swebuild.superseded-by"

// TombstoneType is the artifactType of a tombstone.
const TombstoneType = "application/vnd.swebuild.superseded.v1+json"

// Kind is what a referrer is, as superseding compares referrers: its
// artifactType and, for an in-toto statement, its predicate type (the
// manifest annotation in-toto.io/predicate-type, which a referrers index
// entry carries). A statement whose entry names none is taken as a test
// result: the only statement swebuild attached before its entries named
// their predicate.
func Kind(d v1.Descriptor) string {
	pt := d.Annotations[AnnotationPredicateType]
	if pt == "" {
		// A Sigstore bundle names its statement's predicate type so
		// (cosign v3's referrer annotation): a signed provenance and a
		// signed verification are different kinds.
		pt = d.Annotations[AnnotationBundlePredicateType]
	}
	if d.ArtifactType == StatementMediaType && pt == "" {
		pt = TestResultPredicate
	}
	return d.ArtifactType + " " + pt
}

// Superseded returns the entries of refs that keep supersedes: those of
// the same Kind as an entry of refs whose digest is in keep, that are not
// in keep themselves. Entries of kinds keep has none of stay.
func Superseded(refs []v1.Descriptor, keep []v1.Hash) []v1.Descriptor {
	kinds := map[string]bool{}
	for _, d := range refs {
		if slices.Contains(keep, d.Digest) {
			kinds[Kind(d)] = true
		}
	}
	var out []v1.Descriptor
	for _, d := range refs {
		if kinds[Kind(d)] && !slices.Contains(keep, d.Digest) {
			out = append(out, d)
		}
	}
	return out
}

// Supersede makes the referrers keep of subject in repo the only ones of
// their kinds there (Superseded): the others are taken out of the
// fallback index, which is then re-read until the removal holds on two
// reads in a row, and their attachment tags are pointed at a tombstone.
// It returns what it superseded. Nothing is written when nothing is
// superseded (one GET), nor on a registry serving the referrers API.
func (r *Referrers) Supersede(ctx context.Context, repo name.Repository, subject v1.Hash, keep []v1.Hash) ([]v1.Descriptor, error) {
	api, err := r.serves(ctx, repo, subject)
	if err != nil || api {
		return nil, err
	}
	unlock := r.lock(repo.String() + "@" + subject.String())
	defer unlock()
	settle, rounds := r.Settle, r.Rounds
	if settle <= 0 {
		settle = 100 * time.Millisecond
	}
	if rounds <= 0 {
		rounds = 12
	}
	var gone []v1.Descriptor
	seen := 0
	for round := 0; round < rounds; round++ {
		cur, err := r.reader().ReadFallback(ctx, repo, subject)
		if err != nil {
			return nil, fmt.Errorf("superseding referrers of %s: %w", subject, err)
		}
		stale := Superseded(cur, keep)
		if len(stale) == 0 {
			if round == 0 {
				return nil, nil
			}
			if seen++; seen == 2 {
				break
			}
		} else {
			seen = 0
			for _, d := range stale {
				if !slices.ContainsFunc(gone, func(g v1.Descriptor) bool { return g.Digest == d.Digest }) {
					gone = append(gone, d)
				}
			}
			left := slices.DeleteFunc(slices.Clone(cur), func(d v1.Descriptor) bool {
				return slices.ContainsFunc(stale, func(s v1.Descriptor) bool { return s.Digest == d.Digest })
			})
			if err := r.put(ctx, repo.Tag(FallbackTag(subject)), fallbackIndex(left)); err != nil {
				return nil, fmt.Errorf("superseding referrers of %s: %w", subject, err)
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(settle + rand.N(settle)):
		}
	}
	if seen < 2 {
		return nil, fmt.Errorf("superseding referrers of %s in %s: the fallback index kept listing them after %d reads", subject, repo, rounds)
	}
	for _, d := range gone {
		if err := r.tombstone(ctx, repo, subject, d.Digest, keep); err != nil {
			return nil, err
		}
	}
	return gone, nil
}

// tombstone points the attachment tag of the superseded referrer art at a
// manifest with no subject, which List skips; the referrer itself stays
// stored by digest.
func (r *Referrers) tombstone(ctx context.Context, repo name.Repository, subject, art v1.Hash, by []v1.Hash) error {
	names := make([]string, len(by))
	for i, h := range by {
		names[i] = h.String()
	}
	empty, _, _ := v1.SHA256(bytes.NewReader(EmptyConfig))
	emptyDesc := v1.Descriptor{MediaType: "application/vnd.oci.empty.v1+json", Digest: empty, Size: int64(len(EmptyConfig))}
	raw, err := json.Marshal(struct {
		v1.Manifest
		ArtifactType string `json:"artifactType"`
	}{v1.Manifest{
		SchemaVersion: 2, MediaType: types.OCIManifestSchema1, Config: emptyDesc, Layers: []v1.Descriptor{emptyDesc},
		Annotations: map[string]string{AnnotationSuperseded: fmt.Sprint(names)},
	}, TombstoneType})
	if err != nil {
		return fmt.Errorf("superseding %s: %w", art, err)
	}
	if err := r.Client.Upload(ctx, repo, emptyLayer()); err != nil {
		return fmt.Errorf("superseding %s: %w", art, err)
	}
	if err := r.put(ctx, repo.Tag(AttachmentTag(subject, art)), rawManifest{raw, types.OCIManifestSchema1}); err != nil {
		return fmt.Errorf("superseding %s: %w", art, err)
	}
	return nil
}

func emptyLayer() v1.Layer { return static.NewLayer(EmptyConfig, "application/vnd.oci.empty.v1+json") }
