package attest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/swebuild/swebuild/publication"
	"github.com/swebuild/swebuild/registry"
)

// How a referrer is written and read
//
// A registry with the referrers API (OCI distribution spec 1.1, e.g.
// Docker Hub) indexes a manifest's subject itself when
// the manifest is PUT: nothing more is written. A registry without it
// (distribution 2.8 and 3.x, GHCR) is told through the referrers tag schema: an
// OCI index tagged sha256-<subject hex> lists the referrers, and every
// writer must read it, add its descriptor and write it back. Two writers
// that read the same index each write back their own addition, and the
// one that writes last erases the other's (the loss cosign and ORAS users
// report on GHCR). No registry offers a conditional PUT (If-Match) on
// manifests to make that safe, so Add does three things:
//
//  1. the artifact manifest is PUT under a tag of its own,
//     sha256-<subject hex>.<32 hex of its digest>.att, written once by one
//     writer and never read-modified-written: an attachment cannot be lost
//     whatever the fallback index says (cosign's tag convention);
//  2. the fallback index is updated by read, add, write, then re-read after
//     a short random wait until the addition has been seen present on two
//     reads in a row, written again whenever it is missing (a writer that
//     read before us and wrote after us erased it); within one process,
//     writers of one subject take turns;
//  3. List reads the referrers API when the registry serves it, else the
//     fallback index and the attachment tags (one tags/list request), so
//     an attachment whose index entry was erased by a writer that did not
//     follow 2 is still found.

// Referrers writes and reads the referrers of images through one registry
// client. Its zero value is not usable: set Client.
type Referrers struct {
	Client *registry.Client
	// Settle is the wait before a re-read of the fallback index (a random
	// time between Settle and 2*Settle; default 100 ms). Rounds bounds the
	// reads (default 12).
	Settle time.Duration
	Rounds int
	// OnRetry is told of each manifest PUT (an attachment or a fallback
	// index) tried again because the registry answered that a reference
	// was unknown (registry.PutManifest: another writer rewriting the
	// same link at that instant); nil: nobody.
	OnRetry func(ref name.Reference, err error)

	mu    sync.Mutex
	locks map[string]*sync.Mutex
	api   map[string]bool // registry host -> serves the referrers API
}

// FallbackTag is the referrers tag schema's tag for subject
// (publication.FallbackTag).
func FallbackTag(subject v1.Hash) string { return publication.FallbackTag(subject) }

// AttachmentTag is the write-once tag of artifact, a referrer of subject
// (publication.AttachmentTag).
func AttachmentTag(subject, artifact v1.Hash) string {
	return publication.AttachmentTag(subject, artifact)
}

// reader reads through the writer's client (publication.Reader: every
// read bounded).
func (r *Referrers) reader() *publication.Reader { return publication.New(r.Client) }

// rawManifest is a manifest's exact bytes as a remote.Taggable.
type rawManifest struct {
	raw []byte
	mt  types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.raw, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mt, nil }

// EmptyConfig is the OCI 1.1 empty descriptor's blob, the config of an
// artifact with no config.
var EmptyConfig = []byte("{}")

// Artifact is an OCI 1.1 artifact manifest carrying one blob.
type Artifact struct {
	Raw        []byte
	Descriptor v1.Descriptor // how a referrers index lists it
	Blob       []byte
	BlobType   types.MediaType
}

// NewArtifact makes the OCI 1.1 artifact manifest of payload (one layer of
// layerType with annotations), with artifactType, the empty config and
// subject.
func NewArtifact(subject v1.Descriptor, artifactType string, layerType types.MediaType, payload []byte, layerAnnotations map[string]string) (*Artifact, error) {
	return newArtifact(subject, artifactType, layerType, payload, layerAnnotations, nil)
}

// newArtifact is NewArtifact with annotations on the manifest too (a
// referrers index lists them with the artifact).
func newArtifact(subject v1.Descriptor, artifactType string, layerType types.MediaType, payload []byte, layerAnnotations, annotations map[string]string) (*Artifact, error) {
	ch, cs, _ := v1.SHA256(bytes.NewReader(EmptyConfig))
	lh, ls, _ := v1.SHA256(bytes.NewReader(payload))
	sub := v1.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: "application/vnd.oci.empty.v1+json", Digest: ch, Size: cs},
		Layers:        []v1.Descriptor{{MediaType: layerType, Digest: lh, Size: ls, Annotations: layerAnnotations}},
		Subject:       &sub,
		Annotations:   annotations,
	}
	raw, err := json.Marshal(struct {
		v1.Manifest
		ArtifactType string `json:"artifactType"`
	}{m, artifactType})
	if err != nil {
		return nil, fmt.Errorf("encoding artifact manifest: %w", err)
	}
	h, n, _ := v1.SHA256(bytes.NewReader(raw))
	return &Artifact{
		Raw:        raw,
		Descriptor: v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: h, Size: n, ArtifactType: artifactType, Annotations: annotations},
		Blob:       payload, BlobType: layerType,
	}, nil
}

// StatementArtifact wraps an in-toto statement as an artifact referring to
// subject: artifactType and layer application/vnd.in-toto+json, the layer
// and the manifest annotated with its predicate type (so a referrers index
// entry says which statement it is: Kind).
func StatementArtifact(subject v1.Descriptor, predicateType string, statement []byte) (*Artifact, error) {
	ann := map[string]string{AnnotationPredicateType: predicateType}
	return newArtifact(subject, StatementMediaType, StatementMediaType, statement, ann, maps.Clone(ann))
}

// Attach puts a (its blobs, then its manifest) into repo and records it
// as a referrer of its subject.
func (r *Referrers) Attach(ctx context.Context, repo name.Repository, a *Artifact) error {
	for _, b := range []struct {
		data []byte
		mt   types.MediaType
	}{{EmptyConfig, "application/vnd.oci.empty.v1+json"}, {a.Blob, a.BlobType}} {
		if err := r.Client.Upload(ctx, repo, static.NewLayer(b.data, b.mt)); err != nil {
			return fmt.Errorf("attaching %s to %s: uploading a blob: %w", a.Descriptor.Digest, repo, err)
		}
	}
	return r.Add(ctx, repo, a.Raw)
}

// Attached reports whether artifact is already attached to subject in
// repo: its write-once attachment tag answers one HEAD with its digest (a
// superseded one answers a tombstone's: Supersede).
func (r *Referrers) Attached(ctx context.Context, repo name.Repository, subject, artifact v1.Hash) (bool, error) {
	d, err := r.Client.Head(ctx, repo.Tag(AttachmentTag(subject, artifact)))
	if err != nil {
		return false, err
	}
	return d != nil && d.Digest == artifact, nil
}

// AttachOnce attaches a in repo unless it is already attached there
// (Attached): a re-run costs that one HEAD and writes nothing. attached
// says whether it wrote.
func (r *Referrers) AttachOnce(ctx context.Context, repo name.Repository, a *Artifact) (attached bool, err error) {
	_, subject, err := publication.Describe(a.Raw)
	if err != nil {
		return false, fmt.Errorf("attaching %s: %w", a.Descriptor.Digest, err)
	}
	if have, err := r.Attached(ctx, repo, subject, a.Descriptor.Digest); err != nil || have {
		return false, err
	}
	if err := r.Attach(ctx, repo, a); err != nil {
		return false, err
	}
	return true, nil
}

// Add records manifest raw, whose blobs are in repo, as a referrer of its
// subject: it is PUT under its attachment tag (which stores it by digest
// too), and, when the registry does not serve the referrers API, added to
// the subject's fallback index so that no concurrent writer erases it.
func (r *Referrers) Add(ctx context.Context, repo name.Repository, raw []byte) error {
	desc, subject, err := publication.Describe(raw)
	if err != nil {
		return fmt.Errorf("adding a referrer in %s: %w", repo, err)
	}
	if err := r.put(ctx, repo.Tag(AttachmentTag(subject, desc.Digest)), rawManifest{raw, desc.MediaType}); err != nil {
		return fmt.Errorf("adding referrer %s of %s: %w", desc.Digest, subject, err)
	}
	api, err := r.serves(ctx, repo, subject)
	if err != nil {
		return err
	}
	if api {
		return nil
	}
	unlock := r.lock(repo.String() + "@" + subject.String())
	defer unlock()
	return r.addToFallback(ctx, repo, subject, desc)
}

// put writes a manifest with the client's retry of a PUT refused for an
// unknown reference: two publishes attaching to the same images upload
// the same empty config and put the same attachments, and distribution
// 2.8 rewrites their link files in place while the other's PUT checks
// them (registry.PutManifest). The same retry index PUTs get.
func (r *Referrers) put(ctx context.Context, ref name.Reference, m rawManifest) error {
	return r.Client.PutManifest(ctx, ref, m, registry.PutRetry{OnRetry: r.OnRetry})
}

func (r *Referrers) lock(key string) func() {
	r.mu.Lock()
	if r.locks == nil {
		r.locks = map[string]*sync.Mutex{}
	}
	l, ok := r.locks[key]
	if !ok {
		l = &sync.Mutex{}
		r.locks[key] = l
	}
	r.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// serves reports (and remembers per registry) whether repo's registry
// serves the referrers API.
func (r *Referrers) serves(ctx context.Context, repo name.Repository, subject v1.Hash) (bool, error) {
	host := repo.RegistryStr()
	r.mu.Lock()
	v, ok := r.api[host]
	r.mu.Unlock()
	if ok {
		return v, nil
	}
	_, supported, err := r.Client.Referrers(ctx, repo.Digest(subject.String()), registry.ListLimits{})
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	if r.api == nil {
		r.api = map[string]bool{}
	}
	r.api[host] = supported
	r.mu.Unlock()
	return supported, nil
}

func contains(ds []v1.Descriptor, h v1.Hash) bool {
	return slices.ContainsFunc(ds, func(d v1.Descriptor) bool { return d.Digest == h })
}

// fallbackIndex is the referrers index of ds: sorted by digest, as
// go-containerregistry writes it.
func fallbackIndex(ds []v1.Descriptor) rawManifest {
	ds = slices.Clone(ds)
	sort.Slice(ds, func(i, j int) bool { return ds[i].Digest.String() < ds[j].Digest.String() })
	raw, _ := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: ds})
	return rawManifest{raw, types.OCIImageIndex}
}

// addToFallback adds desc to subject's fallback index: read, add, write,
// and re-read after a random wait until desc is seen on two reads in a row.
func (r *Referrers) addToFallback(ctx context.Context, repo name.Repository, subject v1.Hash, desc v1.Descriptor) error {
	settle, rounds := r.Settle, r.Rounds
	if settle <= 0 {
		settle = 100 * time.Millisecond
	}
	if rounds <= 0 {
		rounds = 12
	}
	tag := repo.Tag(FallbackTag(subject))
	seen := 0
	for round := 0; round < rounds; round++ {
		cur, err := r.reader().ReadFallback(ctx, repo, subject)
		if err != nil {
			return fmt.Errorf("adding referrer %s of %s: %w", desc.Digest, subject, err)
		}
		if contains(cur, desc.Digest) {
			if seen++; seen == 2 {
				return nil
			}
		} else {
			seen = 0
			if err := r.put(ctx, tag, fallbackIndex(append(cur, desc))); err != nil {
				return fmt.Errorf("adding referrer %s of %s: %w", desc.Digest, subject, err)
			}
		}
		wait := settle + rand.N(settle)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	return fmt.Errorf("adding referrer %s of %s: the fallback index %s kept losing it after %d reads (it stays reachable under %s)", desc.Digest, subject, tag, rounds, AttachmentTag(subject, desc.Digest))
}

// List returns the referrers of subject in repo (publication.Reader's
// Referrers: the referrers API, else the fallback index and the attachment
// tags; bounded). Sorted by digest.
func (r *Referrers) List(ctx context.Context, repo name.Repository, subject v1.Hash) ([]v1.Descriptor, error) {
	return r.reader().Referrers(ctx, repo, subject)
}

// Statements returns the in-toto statements of predicateType attached to
// subject in repo: every layer annotated with that predicate type in every
// referrer (swebuild's artifacts and BuildKit's attestation manifests
// alike).
func (r *Referrers) Statements(ctx context.Context, repo name.Repository, subject v1.Hash, predicateType string) ([][]byte, error) {
	pr := r.reader()
	refs, err := pr.Referrers(ctx, repo, subject)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, d := range refs {
		b, err := manifestStatements(ctx, pr, repo, d.Digest, predicateType)
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return out, nil
}

// maxStatement bounds one statement layer.
const maxStatement = 16 << 20

// referrerManifest reads and parses the manifest at repo@dg (bounded by the
// publication reader).
func referrerManifest(ctx context.Context, pr *publication.Reader, repo name.Repository, dg v1.Hash) (*v1.Manifest, error) {
	m, err := pr.Manifest(ctx, repo.Digest(dg.String()))
	if err != nil {
		return nil, err
	}
	man, err := v1.ParseManifest(bytes.NewReader(m.Raw))
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", dg, err)
	}
	return man, nil
}

// manifestStatements reads the layers of the manifest at repo@dg annotated
// with predicateType.
func manifestStatements(ctx context.Context, pr *publication.Reader, repo name.Repository, dg v1.Hash, predicateType string) ([][]byte, error) {
	man, err := referrerManifest(ctx, pr, repo, dg)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, l := range man.Layers {
		if l.Annotations[AnnotationPredicateType] != predicateType {
			continue
		}
		b, err := pr.ReadBlob(ctx, repo, l, maxStatement, "statement")
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// Carried is one layer of a referrer manifest: its predicate type (the
// in-toto.io/predicate-type annotation; "" for a layer that names none)
// or media type, and its bytes.
type Carried struct {
	PredicateType string
	MediaType     types.MediaType
	Payload       []byte
}

// ReferrerPayloads reads every layer of the referrer manifest dg in repo
// (BuildKit's attestation manifest: its provenance statement; swebuild's
// statement and SBOM artifacts: their one layer), each bounded and
// digest-checked through the publication reader. Reading by digest, what
// comes back is what the record that names dg was made with.
func ReferrerPayloads(ctx context.Context, pr *publication.Reader, repo name.Repository, dg v1.Hash) ([]Carried, error) {
	man, err := referrerManifest(ctx, pr, repo, dg)
	if err != nil {
		return nil, err
	}
	var out []Carried
	for _, l := range man.Layers {
		b, err := pr.ReadBlob(ctx, repo, l, maxStatement, "referrer layer")
		if err != nil {
			return nil, err
		}
		out = append(out, Carried{PredicateType: l.Annotations[AnnotationPredicateType], MediaType: l.MediaType, Payload: b})
	}
	return out, nil
}
