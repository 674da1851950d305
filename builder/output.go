package builder

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/containerd/containerd/v2/core/content"
	contentlocal "github.com/containerd/containerd/v2/plugins/content/local"
	"github.com/gofrs/flock"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	bkclient "github.com/moby/buildkit/client"
	"github.com/moby/buildkit/exporter/containerimage/exptypes"
	"github.com/opencontainers/go-digest"
	ocispecs "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/sbom"
)

// Exports without a registry
//
// --output type=oci,dest=DIR exports every node's image through BuildKit's
// oci exporter with tar=false: the exporter copies the image's blobs into a
// content store of the client's session, here containerd's local store on
// DIR, whose files are the layout's blobs/sha256/<hex>. A blob the layout
// already holds is not sent again, so the images of a graph (an instance
// image holds its env's and base's layers) share their blobs. The exporter
// does not touch index.json; the builder adds one descriptor per node after
// its solve, named by the image key (with the instance id, spec key and
// base commit of its record), under the same lock file BuildKit's
// own oci exporter takes (index.json.lock), so two builds into one layout
// do not lose each other's entries.

// Output types.
const OutputOCI = "oci"

// AnnotationRefName is the OCI annotation naming an image in a layout's
// index.json: the node's image key.
const AnnotationRefName = ocispecs.AnnotationRefName

// Output is where built images go besides a push, in the buildx --output
// syntax: type=oci,dest=DIR is an OCI image layout directory holding every
// node's image, each named in index.json by its image key.
type Output struct {
	// Type is the exporter: "oci".
	Type string
	// Dest is the layout directory (created when missing).
	Dest string
}

// ParseOutput parses an --output value the way buildx does (CSV fields of
// key=value, quoted when a value holds a comma; keys are case-insensitive):
// type=oci,dest=DIR, with tar=false allowed (a directory is what swebuild
// writes). Anything else is an error naming the field.
func ParseOutput(v string) (Output, error) {
	var o Output
	if strings.TrimSpace(v) == "" {
		return o, errors.New("empty value; want type=oci,dest=DIR")
	}
	r := csv.NewReader(strings.NewReader(v))
	r.TrimLeadingSpace = true
	fields, err := r.Read()
	if err != nil {
		return o, fmt.Errorf("%q: %w", v, err)
	}
	if len(fields) == 1 && !strings.Contains(fields[0], "=") {
		// buildx reads a bare path as type=local (a root file system).
		return o, fmt.Errorf("%q: a bare path is buildx's type=local; swebuild exports image layouts: want type=oci,dest=DIR", v)
	}
	seen := map[string]bool{}
	for _, f := range fields {
		key, val, ok := strings.Cut(f, "=")
		key = strings.ToLower(strings.TrimSpace(key))
		if !ok || key == "" {
			return o, fmt.Errorf("%q: field %q is not key=value", v, f)
		}
		if seen[key] {
			return o, fmt.Errorf("%q: %s given twice", v, key)
		}
		seen[key] = true
		switch key {
		case "type":
			o.Type = val
		case "dest":
			o.Dest = val
		case "tar":
			b, err := strconv.ParseBool(val)
			if err != nil {
				return o, fmt.Errorf("%q: tar=%s is not a boolean", v, val)
			}
			if b {
				return o, fmt.Errorf("%q: tar=true is not supported: a build exports many images into one layout directory (tar it afterwards)", v)
			}
		default:
			return o, fmt.Errorf("%q: unknown key %q (type=oci takes dest and tar=false)", v, key)
		}
	}
	switch o.Type {
	case OutputOCI:
	case "":
		return o, fmt.Errorf("%q: type= is required (type=oci)", v)
	case "registry", "image":
		return o, fmt.Errorf("%q: type=%s is not an output here: images go to a registry through the build's push repository", v, o.Type)
	default:
		return o, fmt.Errorf("%q: type=%s is not supported (want type=oci)", v, o.Type)
	}
	if o.Dest == "" {
		return o, fmt.Errorf("%q: dest= is required (the OCI layout directory)", v)
	}
	if o.Dest == "-" {
		return o, fmt.Errorf("%q: dest=- (a tar stream on stdout) is not supported: give a directory", v)
	}
	return o, nil
}

// ociLayout is an OCI image layout directory the builder exports into.
type ociLayout struct {
	dir   string // absolute
	store content.Store
	mu    sync.Mutex // index.json within this process; the lock file across processes
	// specKeys are the derived spec keys of nodes without their own, by
	// node ID (inputKeys; what the records carry).
	specKeys map[string]string
}

// openLayout creates (or opens) the layout directory: oci-layout, an
// index.json (empty when new) and the content store on its blobs.
func openLayout(dir string) (*ociLayout, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("creating OCI layout %s: %w", abs, err)
	}
	l := &ociLayout{dir: abs}
	if err := l.update(func(*ocispecs.Index) {}); err != nil {
		return nil, err
	}
	store, err := contentlocal.NewStore(abs)
	if err != nil {
		return nil, fmt.Errorf("opening OCI layout %s: %w", abs, err)
	}
	l.store = &serialWriters{Store: store, locks: map[string]chan struct{}{}}
	return l, nil
}

// serialWriters makes concurrent writers of one blob wait for each other:
// containerd's local store refuses a second writer of a ref ("locked",
// Unavailable), which BuildKit retries but the session's content server
// logs as an error on every attempt (two nodes of a graph export their
// shared base layers at once). The waiting writer then finds the blob
// committed (AlreadyExists: nothing sent again).
type serialWriters struct {
	content.Store
	mu    sync.Mutex
	locks map[string]chan struct{} // by writer ref; a full channel is a held lock
}

func (s *serialWriters) Writer(ctx context.Context, opts ...content.WriterOpt) (content.Writer, error) {
	var wo content.WriterOpts
	for _, o := range opts {
		if err := o(&wo); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	lock, ok := s.locks[wo.Ref]
	if !ok {
		lock = make(chan struct{}, 1)
		s.locks[wo.Ref] = lock
	}
	s.mu.Unlock()
	select {
	case lock <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	w, err := s.Store.Writer(ctx, opts...)
	if err != nil {
		<-lock
		return nil, err
	}
	return &releasingWriter{Writer: w, release: sync.OnceFunc(func() { <-lock })}, nil
}

// releasingWriter releases its ref's lock when closed (the content server
// closes every writer it opened).
type releasingWriter struct {
	content.Writer
	release func()
}

func (w *releasingWriter) Close() error {
	err := w.Writer.Close()
	w.release()
	return err
}

// export is the solve's export entry: BuildKit's oci exporter writing the
// image's blobs into the layout's store.
func (l *ociLayout) export() bkclient.ExportEntry {
	return bkclient.ExportEntry{Type: bkclient.ExporterOCI, Attrs: map[string]string{"tar": "false"}, OutputStore: l.store}
}

// add names node n's exported image in index.json (replacing an entry of
// the same key and platform, and the referrers of the image it named),
// from the exporter's response and the node's outcome: the image key, and
// the instance id, spec key and base commit its record carries, so the
// layout alone says what to publish. When BuildKit exported an index (the
// image with its provenance), the entry names the image manifest in it
// (out.Digest, resolved by resolveAttested). The image's referrers in the
// layout, BuildKit's attestation manifest (out.Attestation) and the SBOM
// artifact (out.SBOMArtifact), get entries of their own beside it.
func (l *ociLayout) add(n *graph.Node, resp map[string]string, out *Outcome) error {
	got, err := l.exported(resp, out)
	if err != nil {
		return err
	}
	dg := got.Digest
	ctx := context.Background()
	if _, err := l.store.Info(ctx, dg); err != nil {
		return fmt.Errorf("OCI layout %s: the exported manifest %s is not in the layout: %w", l.dir, dg, err)
	}
	p := n.Platform.OCI()
	desc := ocispecs.Descriptor{
		MediaType:   got.MediaType,
		Digest:      dg,
		Size:        got.Size,
		Platform:    &p,
		Annotations: map[string]string{AnnotationRefName: n.Key},
	}
	if n.InstanceID != "" {
		desc.Annotations[manifests.AnnotationInstanceID] = n.InstanceID
	}
	if k := cmp.Or(n.SpecKey, l.specKeys[n.ID()]); k != "" {
		desc.Annotations[manifests.AnnotationSpecKey] = k
	}
	if n.BaseCommit != "" {
		desc.Annotations[manifests.AnnotationBaseCommit] = n.BaseCommit
	}
	refs := referrerEntries(out, dg)
	for _, r := range refs {
		if _, err := l.store.Info(ctx, r.Digest); err != nil {
			return fmt.Errorf("OCI layout %s: referrer %s of %s is not in the layout: %w", l.dir, r.Digest, dg, err)
		}
	}
	return l.update(func(idx *ocispecs.Index) {
		replaced := map[string]bool{dg.String(): true}
		idx.Manifests = slices.DeleteFunc(idx.Manifests, func(d ocispecs.Descriptor) bool {
			if d.Annotations[AnnotationRefName] == n.Key && d.Platform != nil && d.Platform.Architecture == p.Architecture && d.Platform.OS == p.OS {
				replaced[d.Digest.String()] = true
				return true
			}
			return false
		})
		// The referrers of the image replaced (or of this image, written
		// again below) go with it.
		idx.Manifests = slices.DeleteFunc(idx.Manifests, func(d ocispecs.Descriptor) bool {
			return d.Annotations[AnnotationRefName] == "" && replaced[d.Annotations[AnnotationReferenceDigest]]
		})
		idx.Manifests = append(idx.Manifests, desc)
		idx.Manifests = append(idx.Manifests, refs...)
		// Stable bytes: entries by name, then platform, then digest
		// (referrers have no name).
		slices.SortStableFunc(idx.Manifests, func(a, b ocispecs.Descriptor) int {
			return cmp.Or(
				strings.Compare(a.Annotations[AnnotationRefName], b.Annotations[AnnotationRefName]),
				strings.Compare(platformString(a.Platform), platformString(b.Platform)),
				strings.Compare(a.Digest.String(), b.Digest.String()))
		})
	})
}

// exported is the descriptor of the image BuildKit's exporter response
// names: the image manifest itself, or the one in the index it exported
// (out's, resolved by resolveAttested).
func (l *ociLayout) exported(resp map[string]string, out *Outcome) (ocispecs.Descriptor, error) {
	dg, err := digest.Parse(resp[exptypes.ExporterImageDigestKey])
	if err != nil {
		return ocispecs.Descriptor{}, fmt.Errorf("OCI layout %s: BuildKit's image digest: %w", l.dir, err)
	}
	raw, err := base64.StdEncoding.DecodeString(resp[exptypes.ExporterImageDescriptorKey])
	if err != nil {
		return ocispecs.Descriptor{}, fmt.Errorf("OCI layout %s: BuildKit's image descriptor: %w", l.dir, err)
	}
	var got ocispecs.Descriptor
	if err := json.Unmarshal(raw, &got); err != nil {
		return ocispecs.Descriptor{}, fmt.Errorf("OCI layout %s: BuildKit's image descriptor: %w", l.dir, err)
	}
	if got.Digest != dg || got.Size <= 0 || got.MediaType == "" {
		return ocispecs.Descriptor{}, fmt.Errorf("OCI layout %s: BuildKit's image descriptor %s (%d bytes, %q) does not describe digest %s", l.dir, got.Digest, got.Size, got.MediaType, dg)
	}
	if got.MediaType != ocispecs.MediaTypeImageIndex {
		return got, nil
	}
	// The image is a child of the exported index.
	if out == nil || out.manifest == nil || out.manifest.Digest.String() != out.Digest {
		return ocispecs.Descriptor{}, fmt.Errorf("OCI layout %s: BuildKit exported index %s and the image manifest in it was not resolved", l.dir, dg)
	}
	return ocispecs.Descriptor{MediaType: string(out.manifest.MediaType), Digest: digest.Digest(out.manifest.Digest.String()), Size: out.manifest.Size}, nil
}

// referrerEntries are the index entries of the image dg's referrers out
// names: BuildKit's attestation manifest, the SBOM artifact and the
// verification statement.
func referrerEntries(out *Outcome, dg digest.Digest) []ocispecs.Descriptor {
	if out == nil {
		return nil
	}
	var refs []ocispecs.Descriptor
	if out.Attestation != "" {
		refs = append(refs, ocispecs.Descriptor{
			MediaType: ocispecs.MediaTypeImageManifest, Digest: digest.Digest(out.Attestation), Size: out.AttestationSize,
			Platform:    &ocispecs.Platform{OS: "unknown", Architecture: "unknown"},
			Annotations: map[string]string{AnnotationReferenceType: ReferenceTypeAttestation, AnnotationReferenceDigest: dg.String()},
		})
	}
	if out.SBOMArtifact != "" {
		refs = append(refs, ocispecs.Descriptor{
			MediaType: ocispecs.MediaTypeImageManifest, Digest: digest.Digest(out.SBOMArtifact), Size: out.SBOMArtifactSize,
			ArtifactType: sbom.MediaType,
			Annotations:  map[string]string{AnnotationReferenceDigest: dg.String()},
		})
	}
	if out.Verification != "" {
		refs = append(refs, ocispecs.Descriptor{
			MediaType: ocispecs.MediaTypeImageManifest, Digest: digest.Digest(out.Verification), Size: out.VerificationSize,
			ArtifactType: attest.StatementMediaType,
			Annotations:  map[string]string{AnnotationReferenceDigest: dg.String()},
		})
	}
	return refs
}

// readIndex reads the index desc from the layout's content store.
func (l *ociLayout) readIndex(ctx context.Context, desc ocispecs.Descriptor) (*v1.IndexManifest, error) {
	b, err := content.ReadBlob(ctx, l.store, desc)
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: reading the exported index %s: %w", l.dir, desc.Digest, err)
	}
	im, err := v1.ParseIndexManifest(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: the exported index %s: %w", l.dir, desc.Digest, err)
	}
	return im, nil
}

// putArtifact writes an OCI 1.1 artifact (its empty config, its blob and
// its manifest) into the layout's content store; a blob the layout holds
// is not written again. add names it in index.json as a referrer.
func (l *ociLayout) putArtifact(ctx context.Context, a *attest.Artifact) error {
	for _, b := range []struct {
		data []byte
		mt   string
	}{{attest.EmptyConfig, "application/vnd.oci.empty.v1+json"}, {a.Blob, string(a.BlobType)}, {a.Raw, string(a.Descriptor.MediaType)}} {
		d := ocispecs.Descriptor{MediaType: b.mt, Digest: digest.FromBytes(b.data), Size: int64(len(b.data))}
		if err := content.WriteBlob(ctx, l.store, "swebuild-artifact-"+d.Digest.Encoded(), bytes.NewReader(b.data), d); err != nil {
			return fmt.Errorf("OCI layout %s: writing artifact %s: blob %s: %w", l.dir, a.Descriptor.Digest, d.Digest, err)
		}
	}
	return nil
}

func platformString(p *ocispecs.Platform) string {
	if p == nil {
		return ""
	}
	return p.OS + "/" + p.Architecture + "/" + p.Variant
}

// update rewrites index.json (and oci-layout) under the layout's lock: the
// index is read, changed by f and written to a temporary file renamed over
// the old one.
func (l *ociLayout) update(f func(*ocispecs.Index)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	indexPath := filepath.Join(l.dir, ocispecs.ImageIndexFile)
	lock := flock.New(indexPath + ".lock")
	if err := lock.Lock(); err != nil {
		return fmt.Errorf("locking %s: %w", indexPath, err)
	}
	defer lock.Unlock()

	layoutFile := filepath.Join(l.dir, ocispecs.ImageLayoutFile)
	if _, err := os.Stat(layoutFile); errors.Is(err, os.ErrNotExist) {
		b, _ := json.Marshal(ocispecs.ImageLayout{Version: ocispecs.ImageLayoutVersion})
		if err := os.WriteFile(layoutFile, b, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", layoutFile, err)
		}
	}
	idx := ocispecs.Index{MediaType: ocispecs.MediaTypeImageIndex}
	idx.SchemaVersion = 2
	b, err := os.ReadFile(indexPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("reading %s: %w", indexPath, err)
	default:
		if err := json.Unmarshal(b, &idx); err != nil {
			return fmt.Errorf("%s is not an OCI index: %w", indexPath, err)
		}
	}
	f(&idx)
	if idx.Manifests == nil {
		idx.Manifests = []ocispecs.Descriptor{}
	}
	out, err := json.Marshal(idx)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", indexPath, err)
	}
	if bytes.Equal(out, b) {
		return nil
	}
	return core.WriteBytesAtomic(indexPath, out, 0o644)
}

// close removes the content store's empty ingest directory.
func (l *ociLayout) close() {
	_ = os.Remove(filepath.Join(l.dir, "ingest")) // only when empty
}
