package manifests

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/swebuild/swebuild/core"
)

// Annotation keys written on indexes and their child descriptors.
const (
	AnnotationInstanceID = "io.swebuild.instance-id"
	AnnotationBaseCommit = "io.swebuild.base-commit"
	AnnotationSpecKey    = "io.swebuild.spec-key"
	AnnotationVersion    = "io.swebuild.version"
	// AnnotationRevision is the OCI standard key; it repeats the base commit.
	AnnotationRevision = "org.opencontainers.image.revision"
)

// Child is one per-platform image manifest an index lists.
type Child struct {
	Platform  core.Platform   // linux/amd64 or linux/arm64
	Digest    string          // manifest digest, sha256:...
	Size      int64           // manifest size in bytes
	MediaType types.MediaType // manifest media type
	SpecKey   string          // the image's spec key (build inputs)
	// Attestation is the image's attestation manifest (BuildKit's SLSA
	// provenance), listed after the images as buildx lays it out; nil:
	// none.
	Attestation *Attestation
}

// Attestation is an attestation manifest (an OCI image manifest) of a
// child image.
type Attestation struct {
	Digest string // sha256:...
	Size   int64
}

// Attestation layout keys on an index's attestation descriptors (buildx's
// and BuildKit's).
const (
	AnnotationReferenceType   = "vnd.docker.reference.type"
	AnnotationReferenceDigest = "vnd.docker.reference.digest"
	ReferenceTypeAttestation  = "attestation-manifest"
)

// IndexInfo is the instance-level data recorded in index annotations.
type IndexInfo struct {
	InstanceID string
	BaseCommit string
	SpecKey    string // instance-level spec key; empty: derived from children
	Version    string // swebuild version
}

// appendable is a Child as a mutate.Appendable: BuildIndex appends children
// by their descriptor alone (the manifests themselves are already in the
// registry, copied there before the index goes up).
type appendable struct{ c Child }

func (a appendable) MediaType() (types.MediaType, error) {
	if a.c.MediaType == "" {
		return types.OCIManifestSchema1, nil
	}
	return a.c.MediaType, nil
}
func (a appendable) Digest() (v1.Hash, error) { return v1.NewHash(a.c.Digest) }
func (a appendable) Size() (int64, error)     { return a.c.Size, nil }

// Index is an assembled OCI image index: exact bytes, digest, media type.
// It satisfies go-containerregistry's remote.Taggable.
type Index struct {
	Raw    []byte
	Digest string
}

// RawManifest returns the index bytes.
func (i *Index) RawManifest() ([]byte, error) { return i.Raw, nil }

// MediaType is always the OCI image index type.
func (i *Index) MediaType() (types.MediaType, error) { return types.OCIImageIndex, nil }

// ContentTagForChildren is the index's content key tag: over every child's
// "platform=speckey" line.
func ContentTagForChildren(children []Child) string {
	keys := make([]string, 0, len(children))
	for _, c := range children {
		keys = append(keys, c.Platform.String()+"="+c.SpecKey)
	}
	return ContentTag(keys...)
}

// BuildIndex assembles the index for one instance. Children are ordered
// amd64 then arm64; the bytes are deterministic for the same input. It
// fails when a platform is repeated, unknown, or amd64 is missing (x86-only
// instances list amd64 alone; there is no arm64-only instance).
func BuildIndex(info IndexInfo, children []Child) (*Index, error) {
	if info.InstanceID == "" {
		return nil, fmt.Errorf("building index: empty instance id")
	}
	cs := append([]Child(nil), children...)
	seen := map[core.Platform]bool{}
	for _, c := range cs {
		if c.Platform.IsZero() {
			return nil, fmt.Errorf("building index for %s: a child (%s) has no platform", info.InstanceID, c.Digest)
		}
		if seen[c.Platform] {
			return nil, fmt.Errorf("building index for %s: platform %s listed twice", info.InstanceID, c.Platform)
		}
		seen[c.Platform] = true
		if _, err := v1.NewHash(c.Digest); err != nil {
			return nil, fmt.Errorf("building index for %s: %s digest %q: %w", info.InstanceID, c.Platform, c.Digest, err)
		}
		if c.Size <= 0 {
			return nil, fmt.Errorf("building index for %s: %s manifest size %d", info.InstanceID, c.Platform, c.Size)
		}
		if a := c.Attestation; a != nil {
			if _, err := v1.NewHash(a.Digest); err != nil || a.Size <= 0 {
				return nil, fmt.Errorf("building index for %s: %s attestation %q size %d: not a manifest descriptor", info.InstanceID, c.Platform, a.Digest, a.Size)
			}
		}
	}
	if !seen[core.AMD64] {
		return nil, fmt.Errorf("building index for %s: no linux/amd64 image", info.InstanceID)
	}
	sort.Slice(cs, func(i, j int) bool {
		return slices.Index(core.AllPlatforms(), cs[i].Platform) < slices.Index(core.AllPlatforms(), cs[j].Platform)
	})

	specKey := info.SpecKey
	if specKey == "" {
		specKey = strings.TrimPrefix(ContentTagForChildren(cs), "k-")
	}
	ann := map[string]string{AnnotationInstanceID: info.InstanceID, AnnotationSpecKey: specKey}
	if info.BaseCommit != "" {
		ann[AnnotationBaseCommit] = info.BaseCommit
		ann[AnnotationRevision] = info.BaseCommit
	}
	if info.Version != "" {
		ann[AnnotationVersion] = info.Version
	}
	adds := make([]mutate.IndexAddendum, 0, len(cs))
	for _, c := range cs {
		op := c.Platform.OCI()
		d := v1.Descriptor{Platform: &v1.Platform{OS: op.OS, Architecture: op.Architecture}}
		if c.SpecKey != "" {
			d.Annotations = map[string]string{AnnotationSpecKey: c.SpecKey}
		}
		adds = append(adds, mutate.IndexAddendum{Add: appendable{c}, Descriptor: d})
	}
	// Attestations after every image, platform unknown/unknown, each naming
	// the image it attests: how BuildKit and buildx lay them out, so
	// docker, buildx imagetools and crane skip them as platforms.
	for _, c := range cs {
		if c.Attestation == nil {
			continue
		}
		d := v1.Descriptor{
			Platform:    &v1.Platform{OS: "unknown", Architecture: "unknown"},
			Annotations: map[string]string{AnnotationReferenceType: ReferenceTypeAttestation, AnnotationReferenceDigest: c.Digest},
		}
		a := Child{Digest: c.Attestation.Digest, Size: c.Attestation.Size, MediaType: types.OCIManifestSchema1}
		adds = append(adds, mutate.IndexAddendum{Add: appendable{a}, Descriptor: d})
	}
	idx := mutate.AppendManifests(empty.Index, adds...)
	raw, err := mutate.Annotations(idx, ann).RawManifest()
	if err != nil {
		return nil, fmt.Errorf("encoding index for %s: %w", info.InstanceID, err)
	}
	sum := sha256.Sum256(raw)
	return &Index{Raw: raw, Digest: "sha256:" + hex.EncodeToString(sum[:])}, nil
}
