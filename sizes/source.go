package sizes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/publication"
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
// implementation is Remote (the publication reader); tests may supply
// their own.
type Source interface {
	// Manifest fetches the image manifest that ref names. When ref names an
	// image index, the child for platform ("linux/amd64") is resolved, which
	// costs one more manifest request.
	Manifest(ctx context.Context, ref string, platform core.Platform) (Manifest, error)
	// Blob opens the blob with the given digest in the repository of ref.
	Blob(ctx context.Context, ref, digest string) (io.ReadCloser, error)
}

// Remote is a Source reading through the publication reader (package
// publication: the registry client's credentials, token realm route and
// retry budget; bounded reads).
type Remote struct {
	r *publication.Reader
}

// NewRemote returns a Remote over r.
func NewRemote(r *publication.Reader) *Remote { return &Remote{r: r} }

// Manifest implements Source.
func (r *Remote) Manifest(ctx context.Context, ref string, platform core.Platform) (Manifest, error) {
	res, err := r.r.Resolve(ctx, ref, platform)
	if err != nil {
		return Manifest{}, mapNotFound(err)
	}
	m := res.Manifest
	out := Manifest{
		Digest: res.Ref.DigestStr(),
		Config: Blob{Digest: m.Config.Digest.String(), Size: m.Config.Size, MediaType: string(m.Config.MediaType)},
	}
	for _, l := range m.Layers {
		out.Layers = append(out.Layers, Blob{Digest: l.Digest.String(), Size: l.Size, MediaType: string(l.MediaType)})
	}
	return out, nil
}

// Blob implements Source.
func (r *Remote) Blob(ctx context.Context, ref, digest string) (io.ReadCloser, error) {
	nref, err := r.r.Client.ParseReference(ref)
	if err != nil {
		return nil, err
	}
	h, err := v1.NewHash(digest)
	if err != nil {
		return nil, fmt.Errorf("blob digest %q: %w", digest, err)
	}
	rc, err := r.r.Blob(ctx, nref.Context(), h)
	if err != nil {
		return nil, mapNotFound(err)
	}
	return rc, nil
}

// mapNotFound turns the reader's not-found into ErrNotFound, keeping the
// message.
func mapNotFound(err error) error {
	if errors.Is(err, publication.ErrNotFound) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
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
