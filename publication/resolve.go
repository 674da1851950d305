package publication

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/registry"
)

// Resolved is one image manifest of a publication, pinned by digest.
type Resolved struct {
	// Ref is the image manifest, REPO@DIGEST (the index's child when the
	// reference named an index).
	Ref      name.Digest
	Manifest *v1.Manifest
	Raw      []byte
}

// Resolve fetches the image ref names for platform p: the manifest ref
// names, or when it names an index, the index's image for p (one more
// bounded GET); with p not valid (the zero Platform), the index's only
// image (attestation manifests do not count). A reference or child the
// registry does not have is an error wrapping ErrNotFound.
func (r *Reader) Resolve(ctx context.Context, ref string, p core.Platform) (*Resolved, error) {
	parsed, err := r.Client.ParseReference(ref)
	if err != nil {
		return nil, err
	}
	m, err := r.manifestOf(ctx, parsed)
	if err != nil {
		return nil, err
	}
	repo := parsed.Context()
	pinned := repo.Digest(m.Digest.String())
	if m.MediaType.IsIndex() {
		im, err := v1.ParseIndexManifest(bytes.NewReader(m.Raw))
		if err != nil {
			return nil, fmt.Errorf("index %s: %w", ref, err)
		}
		child, err := pick(im, p)
		if err != nil {
			return nil, fmt.Errorf("index %s: %w", ref, err)
		}
		pinned = repo.Digest(child.String())
		if m, err = r.manifestOf(ctx, pinned); err != nil {
			return nil, fmt.Errorf("index %s: its image: %w", ref, err)
		}
	}
	if !m.MediaType.IsImage() {
		return nil, fmt.Errorf("%s: unsupported manifest media type %q", ref, m.MediaType)
	}
	man, err := v1.ParseManifest(bytes.NewReader(m.Raw))
	if err != nil {
		return nil, fmt.Errorf("manifest of %s: %w", ref, err)
	}
	return &Resolved{Ref: pinned, Manifest: man, Raw: m.Raw}, nil
}

// manifestOf is Manifest with a refusal or another registry answer
// turned into a *RefusedError or *AnswerError.
func (r *Reader) manifestOf(ctx context.Context, ref name.Reference) (*registry.Manifest, error) {
	m, err := r.Manifest(ctx, ref)
	if err == nil || errors.Is(err, ErrNotFound) {
		return m, err
	}
	if problem, _ := classify(err, ref.Context().RegistryStr()); problem != nil {
		return nil, problem
	}
	return nil, err
}

// ResolveAll resolves refs[i] for platforms[i], Jobs at a time. errs[i]
// is that image's error; a registry that could not be asked is each of
// its images' error too (IsProblem tells them apart).
func (r *Reader) ResolveAll(ctx context.Context, refs []string, platforms []core.Platform) (out []*Resolved, errs []error) {
	out, errs = make([]*Resolved, len(refs)), make([]error, len(refs))
	_ = r.each(ctx, len(refs), func(ctx context.Context, i int) error {
		out[i], errs[i] = r.Resolve(ctx, refs[i], platforms[i])
		return nil
	})
	return out, errs
}

// IsProblem reports whether err is about the reference itself (missing,
// refused, another registry answer, over a limit) rather than a registry
// that could not be asked.
func IsProblem(err error) bool {
	var re *RefusedError
	var ae *AnswerError
	var le *registry.LimitError
	return errors.Is(err, ErrNotFound) || errors.As(err, &re) || errors.As(err, &ae) || errors.As(err, &le)
}

// Image is Resolve's image as a go-containerregistry image whose blobs
// are read through the client when asked for (diff-images reads layers).
func (r *Reader) Image(ctx context.Context, ref string, p core.Platform) (v1.Image, error) {
	res, err := r.Resolve(ctx, ref, p)
	if err != nil {
		return nil, err
	}
	return r.Client.Image(ctx, res.Ref)
}

// pick is the digest of im's image for p (p invalid: its only image),
// attestation manifests left out.
func pick(im *v1.IndexManifest, p core.Platform) (v1.Hash, error) {
	var found []v1.Descriptor
	for _, d := range im.Manifests {
		if d.Annotations["vnd.docker.reference.type"] != "" || d.Platform == nil || d.Platform.OS == "unknown" || !d.MediaType.IsImage() {
			continue
		}
		if !p.IsZero() {
			got, err := core.ParsePlatform(d.Platform.String())
			if err != nil || got != p {
				continue
			}
		}
		found = append(found, d)
	}
	switch {
	case len(found) == 0 && !p.IsZero():
		return v1.Hash{}, fmt.Errorf("no image for %s: %w", p, ErrNotFound)
	case len(found) == 0:
		return v1.Hash{}, errors.New("the index holds no image manifest")
	case len(found) > 1 && p.IsZero():
		return v1.Hash{}, fmt.Errorf("the index holds %d image manifests; pick one with a platform", len(found))
	}
	return found[0].Digest, nil
}
