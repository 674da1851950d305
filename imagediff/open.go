// Package imagediff compares two container images file by file: their
// manifests, configs and layers, and for every layer that differs, every
// file that differs (path, layer, what: content, mode, owner, mtime, link
// target, xattrs, type), with the known cause where it can name one (a .pyc
// holding its source's mtime, a git index's stat data, a git pack, a
// commit's date). It is how a reproducible build shows it reproduced, or
// what did not (docs/reproducible.md).
package imagediff

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/publication"
)

// Source is where an image is read from.
type Source struct {
	// Ref as given: a registry reference (HOST/REPO[:TAG|@DIGEST]) or an
	// OCI layout, oci:DIR@sha256:HEX (a manifest in it) or oci:DIR:NAME
	// (the manifest its index.json names NAME, as swebuild build --output
	// names each image by its key).
	Ref string
	// Platform picks the image of an index (ignored for a manifest); the
	// zero Platform takes the index's only image (attestation manifests do
	// not count).
	Platform core.Platform
	// Reader reads registry references (the project's registry client:
	// credentials, token realm route, retry budget); required for them.
	Reader *publication.Reader
}

// Open resolves s to one image manifest.
func Open(ctx context.Context, s Source) (v1.Image, error) {
	if dir, ok := strings.CutPrefix(s.Ref, "oci:"); ok {
		return openLayout(dir, s.Platform)
	}
	if s.Reader == nil {
		return nil, fmt.Errorf("image %q: no registry reader", s.Ref)
	}
	img, err := s.Reader.Image(ctx, s.Ref, s.Platform)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", s.Ref, err)
	}
	return img, nil
}

// openLayout reads oci:DIR@DIGEST or oci:DIR:NAME.
func openLayout(spec string, platform core.Platform) (v1.Image, error) {
	dir, sel, byDigest := splitLayoutSpec(spec)
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: index.json: %w", dir, err)
	}
	found := layoutEntries(im.Manifests, sel, byDigest)
	if byDigest && len(found) == 0 {
		// A manifest that index.json does not list (one of an index's).
		h, err := v1.NewHash(sel)
		if err != nil {
			return nil, fmt.Errorf("OCI layout %s: %q: %w", dir, sel, err)
		}
		found = append(found, v1.Descriptor{Digest: h, MediaType: types.OCIManifestSchema1})
	}
	if len(found) > 1 && !platform.IsZero() {
		op := platform.OCI()
		found = slices.DeleteFunc(found, func(d v1.Descriptor) bool {
			return d.Platform == nil || d.Platform.OS != op.OS || d.Platform.Architecture != op.Architecture
		})
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("OCI layout %s: index.json names no image %q", dir, sel)
	case 1:
	default:
		return nil, fmt.Errorf("OCI layout %s: index.json holds %d images; name one (oci:DIR:NAME or oci:DIR@sha256:...)", dir, len(found))
	}
	d := found[0]
	if d.MediaType.IsIndex() {
		sub, err := idx.ImageIndex(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("OCI layout %s: %s: %w", dir, d.Digest, err)
		}
		return pick(sub, platform)
	}
	img, err := idx.Image(d.Digest)
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: %s: %w", dir, d.Digest, err)
	}
	return img, nil
}

// splitLayoutSpec splits DIR@DIGEST or DIR:NAME (or DIR alone: sel "").
// NAME may itself hold a ':' (a key's :latest), a directory rarely does:
// the first ':' after the last '/' ends DIR.
func splitLayoutSpec(spec string) (dir, sel string, byDigest bool) {
	if dir, sel, byDigest = strings.Cut(spec, "@"); byDigest {
		return dir, sel, true
	}
	slash := strings.LastIndex(spec, "/")
	if i := strings.Index(spec[slash+1:], ":"); i >= 0 {
		return spec[:slash+1+i], spec[slash+2+i:], false
	}
	return spec, "", false
}

// layoutEntries are the entries of index.json sel names: by digest, by
// image name, or all of them when sel is "".
func layoutEntries(manifests []v1.Descriptor, sel string, byDigest bool) []v1.Descriptor {
	var found []v1.Descriptor
	for _, d := range manifests {
		switch {
		case sel == "":
			found = append(found, d)
		case byDigest && d.Digest.String() == sel:
			found = append(found, d)
		case !byDigest && (d.Annotations["org.opencontainers.image.ref.name"] == sel || d.Annotations["io.containerd.image.name"] == sel):
			found = append(found, d)
		}
	}
	return found
}

// pick returns the image of an index for platform ("": its only image),
// leaving attestation manifests out.
func pick(idx v1.ImageIndex, platform core.Platform) (v1.Image, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var want *v1.Platform
	if !platform.IsZero() {
		op := platform.OCI()
		want = &v1.Platform{OS: op.OS, Architecture: op.Architecture}
	}
	var found []v1.Descriptor
	for _, d := range im.Manifests {
		if d.Annotations["vnd.docker.reference.type"] != "" || d.Platform == nil || d.Platform.OS == "unknown" {
			continue
		}
		if want != nil && (d.Platform.OS != want.OS || d.Platform.Architecture != want.Architecture) {
			continue
		}
		found = append(found, d)
	}
	switch len(found) {
	case 0:
		return nil, errors.New("the index holds no image manifest for the platform asked")
	case 1:
		return idx.Image(found[0].Digest)
	default:
		return nil, fmt.Errorf("the index holds %d image manifests; pick one with a platform", len(found))
	}
}
