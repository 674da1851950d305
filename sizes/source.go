package sizes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/registry"
)

// ErrNotFound is returned (wrapped) by a Source when the registry says the
// image or blob does not exist.
var ErrNotFound = errors.New("not found in registry")

// Blob is one content descriptor of a manifest.
type Blob struct {
	Digest    string
	Size      int64
	MediaType string
}

// Manifest is what sizes needs from one image manifest.
type Manifest struct {
	// Digest of the image manifest (the platform's child when the reference
	// named an index).
	Digest string
	Config Blob
	Layers []Blob
}

// Source is the small registry interface sizes needs. The default
// implementation is Remote (go-containerregistry); tests and other packages
// may supply their own (for example one over the project's retrying
// transport).
type Source interface {
	// Manifest fetches the image manifest that ref names. When ref names an
	// image index, the child for platform ("linux/amd64") is resolved, which
	// costs one more manifest request.
	Manifest(ctx context.Context, ref string, platform core.Platform) (Manifest, error)
	// Blob opens the blob with the given digest in the repository of ref.
	Blob(ctx context.Context, ref, digest string) (io.ReadCloser, error)
}

// Remote is a Source talking to registries through the project's registry
// client: its one retry layer and budget, its per-registry limits, and the
// credentials it was given.
type Remote struct {
	c *registry.Client
}

// NewRemote returns a Remote over c.
func NewRemote(c *registry.Client) *Remote { return &Remote{c: c} }

// Manifest implements Source.
func (r *Remote) Manifest(ctx context.Context, ref string, platform core.Platform) (Manifest, error) {
	nref, err := r.c.ParseReference(ref)
	if err != nil {
		return Manifest{}, fmt.Errorf("parsing image reference %q: %w", ref, err)
	}
	desc, err := r.c.Get(ctx, nref)
	if err != nil {
		return Manifest{}, mapNotFound(err)
	}
	if desc.MediaType.IsIndex() {
		want := ociPlatform(platform)
		idx, err := v1.ParseIndexManifest(bytesReader(desc.Manifest))
		if err != nil {
			return Manifest{}, fmt.Errorf("parsing index manifest of %s: %w", ref, err)
		}
		var child *v1.Descriptor
		for i := range idx.Manifests {
			m := idx.Manifests[i]
			if m.Platform != nil && m.Platform.Satisfies(*want) && m.MediaType.IsImage() {
				child = &m
				break
			}
		}
		if child == nil {
			return Manifest{}, fmt.Errorf("index %s has no image for %s: %w", ref, platform, ErrNotFound)
		}
		desc, err = r.c.Get(ctx, nref.Context().Digest(child.Digest.String()))
		if err != nil {
			return Manifest{}, mapNotFound(err)
		}
	}
	if !desc.MediaType.IsImage() {
		return Manifest{}, fmt.Errorf("%s: unsupported manifest media type %q", ref, desc.MediaType)
	}
	m, err := v1.ParseManifest(bytesReader(desc.Manifest))
	if err != nil {
		return Manifest{}, fmt.Errorf("parsing manifest of %s: %w", ref, err)
	}
	out := Manifest{
		Digest: desc.Digest.String(),
		Config: Blob{Digest: m.Config.Digest.String(), Size: m.Config.Size, MediaType: string(m.Config.MediaType)},
	}
	for _, l := range m.Layers {
		out.Layers = append(out.Layers, Blob{Digest: l.Digest.String(), Size: l.Size, MediaType: string(l.MediaType)})
	}
	return out, nil
}

// Blob implements Source.
func (r *Remote) Blob(ctx context.Context, ref, digest string) (io.ReadCloser, error) {
	nref, err := r.c.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("parsing image reference %q: %w", ref, err)
	}
	d := nref.Context().Digest(digest)
	l, err := r.c.Layer(ctx, d)
	if err != nil {
		return nil, mapNotFound(err)
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, fmt.Errorf("fetching blob %s: %w", d, mapNotFound(err))
	}
	return rc, nil
}

// mapNotFound turns a registry "unknown" answer into ErrNotFound while
// keeping the original message.
func mapNotFound(err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) {
		if terr.StatusCode == http.StatusNotFound {
			return fmt.Errorf("%w: %v", ErrNotFound, err)
		}
		for _, d := range terr.Errors {
			switch d.Code {
			case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode:
				return fmt.Errorf("%w: %v", ErrNotFound, err)
			}
		}
	}
	return err
}

// imageConfig is the part of an image config sizes checks.
type imageConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Variant      string `json:"variant"`
	RootFS       struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

func parseConfig(b []byte) (imageConfig, error) {
	var c imageConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return c, err
	}
	return c, nil
}

// platform formats a config's platform as os/arch[/variant].
func (c imageConfig) platform() string {
	p := c.OS + "/" + c.Architecture
	if c.Variant != "" {
		p += "/" + c.Variant
	}
	return p
}

// platformMatches reports whether a config's platform satisfies want
// ("linux/arm64" accepts "linux/arm64/v8").
func platformMatches(c imageConfig, want core.Platform) bool {
	got := v1.Platform{OS: c.OS, Architecture: c.Architecture, Variant: c.Variant}
	return got.Satisfies(*ociPlatform(want))
}

// ociPlatform is p as go-containerregistry's platform (no variant: any
// variant satisfies it).
func ociPlatform(p core.Platform) *v1.Platform {
	o := p.OCI()
	return &v1.Platform{OS: o.OS, Architecture: o.Architecture}
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
