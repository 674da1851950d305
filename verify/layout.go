package verify

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/containerd/containerd/v2/core/content"
	contentlocal "github.com/containerd/containerd/v2/plugins/content/local"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	bkclient "github.com/moby/buildkit/client"
	"github.com/moby/buildkit/client/llb"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests"
)

// Images in an OCI layout
//
// An image swebuild build wrote into an OCI layout (--output type=oci) is
// named oci-layout://DIR@sha256:<manifest digest> (LayoutRef). The engine
// hands BuildKit the layout as a content store of the solve's session
// (SolveOpt.OCIStores) and reads the image through the oci-layout source
// (llb.OCILayout), as buildx does for --build-context NAME=oci-layout://DIR:
// BuildKit fetches only the blobs it does not have, the layout stays the one
// copy, and no registry is involved. The image config (ENV, WORKDIR) is read
// from the layout with go-containerregistry on this side. Pushing the layout
// to a registry first would need a registry just to run a test, which is
// what building without one is for.

// LayoutScheme prefixes an image in an OCI layout directory.
const LayoutScheme = "oci-layout://"

// LayoutRef names the image with manifest digest dg in the OCI layout dir.
func LayoutRef(dir, dg string) string { return LayoutScheme + dir + "@" + dg }

// parseLayoutRef splits a LayoutRef; ok is false for other references.
func parseLayoutRef(ref string) (dir string, h v1.Hash, ok bool, err error) {
	rest, ok := strings.CutPrefix(ref, LayoutScheme)
	if !ok {
		return "", v1.Hash{}, false, nil
	}
	i := strings.LastIndex(rest, "@")
	if i <= 0 {
		return "", v1.Hash{}, true, fmt.Errorf("image %q: want %sDIR@sha256:DIGEST", ref, LayoutScheme)
	}
	if h, err = v1.NewHash(rest[i+1:]); err != nil {
		return "", v1.Hash{}, true, fmt.Errorf("image %q: %w", ref, err)
	}
	return rest[:i], h, true, nil
}

// layoutSource is an image in an OCI layout, ready for a solve.
type layoutSource struct {
	storeID string
	dg      v1.Hash
	config  []byte
}

// openLayoutImage checks that the layout holds the image and adds the
// layout's content store to so.
func openLayoutImage(dir string, h v1.Hash, so *bkclient.SolveOpt) (*layoutSource, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("opening OCI layout %s: %w", dir, err)
	}
	img, err := lp.Image(h)
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: image %s: %w", dir, h, err)
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: image %s: reading its config: %w", dir, h, err)
	}
	store, err := contentlocal.NewStore(dir)
	if err != nil {
		return nil, fmt.Errorf("opening OCI layout %s: %w", dir, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	sum := sha256.Sum256([]byte(abs))
	id := "swebuild-" + hex.EncodeToString(sum[:8])
	if so.OCIStores == nil {
		so.OCIStores = map[string]content.Store{}
	}
	so.OCIStores[id] = store
	return &layoutSource{storeID: id, dg: h, config: cfg}, nil
}

// state is the image's root file system with its config applied.
func (s *layoutSource) state(p core.Platform, name string) (llb.State, error) {
	st := llb.OCILayout("swebuild/layout@"+s.dg.String(), llb.OCIStore("", s.storeID), llb.Platform(p.OCI()), llb.WithCustomName("[verify] "+name))
	return st.WithImageConfig(s.config)
}

// ImagesFromLayout names the instance images of an OCI layout swebuild
// build wrote: the index.json entries carrying the instance-id annotation,
// by instance and platform.
func ImagesFromLayout(dir string) (ImageFunc, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("opening OCI layout %s: %w", dir, err)
	}
	ii, err := lp.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("reading OCI layout %s: %w", dir, err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("reading OCI layout %s: %w", dir, err)
	}
	byKey := map[imageKey]string{}
	for _, d := range im.Manifests {
		id := d.Annotations[manifests.AnnotationInstanceID]
		if id == "" || d.Platform == nil || !d.MediaType.IsImage() {
			continue
		}
		p, err := core.ParsePlatform(d.Platform.OS + "/" + d.Platform.Architecture)
		if err != nil {
			continue
		}
		byKey[imageKey{id, p}] = LayoutRef(dir, d.Digest.String())
	}
	return func(id string, platform core.Platform) (string, error) {
		ref, ok := byKey[imageKey{id, platform}]
		if !ok {
			return "", fmt.Errorf("%w: OCI layout %s: no instance image of %s for %s (index.json entries with %s)", ErrImageAbsent, dir, id, platform, manifests.AnnotationInstanceID)
		}
		return ref, nil
	}, nil
}
