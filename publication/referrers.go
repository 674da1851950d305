package publication

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/swebuild/swebuild/registry"
)

// How referrers are found
//
// A registry serving the referrers API (OCI distribution 1.1) answers
// GET /v2/<name>/referrers/<digest>. One without it (distribution 2.8 and
// 3.x, GHCR) is read through the referrers tag schema: an OCI index tagged
// sha256-<subject hex> lists the referrers. swebuild's writers (package
// attest) also put every artifact under a write-once tag of its own,
// sha256-<subject hex>.<32 hex of its digest>.att (cosign's convention), so
// an artifact whose fallback index entry another writer erased is still
// found through the tag list.

// FallbackTag is the referrers tag schema's tag for subject.
func FallbackTag(subject v1.Hash) string { return subject.Algorithm + "-" + subject.Hex }

// AttachmentTag is the write-once tag of artifact (a referrer of subject).
func AttachmentTag(subject, artifact v1.Hash) string {
	return FallbackTag(subject) + "." + artifact.Hex[:32] + ".att"
}

// referrerInfo is what a referrers index needs from a manifest.
type referrerInfo struct {
	MediaType    types.MediaType   `json:"mediaType"`
	ArtifactType string            `json:"artifactType"`
	Config       v1.Descriptor     `json:"config"`
	Subject      *v1.Descriptor    `json:"subject"`
	Annotations  map[string]string `json:"annotations"`
}

// Describe returns the descriptor a referrers index lists for manifest raw
// (artifactType: the manifest's, else its config's media type, as the
// distribution spec says) and its subject.
func Describe(raw []byte) (v1.Descriptor, v1.Hash, error) {
	var m referrerInfo
	if err := json.Unmarshal(raw, &m); err != nil {
		return v1.Descriptor{}, v1.Hash{}, fmt.Errorf("decoding manifest: %w", err)
	}
	if m.Subject == nil {
		return v1.Descriptor{}, v1.Hash{}, fmt.Errorf("the manifest has no subject")
	}
	h, n, _ := v1.SHA256(bytes.NewReader(raw))
	at := m.ArtifactType
	if at == "" {
		at = string(m.Config.MediaType)
	}
	mt := m.MediaType
	if mt == "" {
		mt = types.OCIManifestSchema1
	}
	return v1.Descriptor{MediaType: mt, Digest: h, Size: n, ArtifactType: at, Annotations: m.Annotations}, m.Subject.Digest, nil
}

// tooMany refuses a referrers answer or fallback index of more than the
// limit's descriptors.
func (r *Reader) tooMany(what string, n int) error {
	if lim := r.limits().Referrers; n > lim {
		return &registry.LimitError{What: what, Limit: strconv.Itoa(lim) + " referrers", Why: fmt.Sprintf("it lists %d", n)}
	}
	return nil
}

// ReadFallback reads subject's fallback index in repo (empty when
// absent), refused over the byte and referrer limits.
func (r *Reader) ReadFallback(ctx context.Context, repo name.Repository, subject v1.Hash) ([]v1.Descriptor, error) {
	tag := repo.Tag(FallbackTag(subject))
	m, err := r.Manifest(ctx, tag)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("the fallback referrers index %s: %w", tag, err)
	}
	im, err := v1.ParseIndexManifest(bytes.NewReader(m.Raw))
	if err != nil {
		return nil, fmt.Errorf("the fallback referrers index %s: %w", tag, err)
	}
	if err := r.tooMany("the fallback referrers index "+tag.String(), len(im.Manifests)); err != nil {
		return nil, err
	}
	return im.Manifests, nil
}

// Referrers returns the referrers of subject in repo: the referrers API's
// answer when the registry serves it; else the fallback index and every
// attachment tag of subject (a manifest read for each one the index
// lacks). Sorted by digest. Every read is bounded (Limits).
func (r *Reader) Referrers(ctx context.Context, repo name.Repository, subject v1.Hash) ([]v1.Descriptor, error) {
	lim := r.limits()
	idx, api, err := r.Client.Referrers(ctx, repo.Digest(subject.String()), lim.Listing)
	if err != nil {
		return nil, err
	}
	if api {
		if err := r.tooMany("the referrers of "+repo.Digest(subject.String()).String(), len(idx.Manifests)); err != nil {
			return nil, err
		}
		return idx.Manifests, nil
	}
	out, err := r.ReadFallback(ctx, repo, subject)
	if err != nil {
		return nil, fmt.Errorf("listing referrers of %s: %w", subject, err)
	}
	tags, err := r.Client.Tags(ctx, repo, lim.Listing)
	if err != nil {
		return nil, fmt.Errorf("listing referrers of %s: %w", subject, err)
	}
	prefix := FallbackTag(subject) + "."
	for _, t := range tags {
		if !strings.HasPrefix(t, prefix) || !strings.HasSuffix(t, ".att") {
			continue
		}
		short := strings.TrimSuffix(strings.TrimPrefix(t, prefix), ".att")
		if slices.ContainsFunc(out, func(d v1.Descriptor) bool { return strings.HasPrefix(d.Digest.Hex, short) }) {
			continue
		}
		if err := r.tooMany("the referrers of "+repo.Digest(subject.String()).String(), len(out)+1); err != nil {
			return nil, err
		}
		m, err := r.Manifest(ctx, repo.Tag(t))
		if err != nil {
			return nil, fmt.Errorf("listing referrers of %s: %w", subject, err)
		}
		desc, sub, err := Describe(m.Raw)
		if err != nil || sub != subject {
			continue // not a referrer of subject after all
		}
		out = append(out, desc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Digest.String() < out[j].Digest.String() })
	return out, nil
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
