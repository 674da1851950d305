package publish

import (
	"fmt"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests"
)

// RecordsFromLayout reads the instance images of an OCI layout swebuild
// build --output type=oci wrote, as the build records Publish takes: each
// index.json entry with an instance id annotation becomes a built instance
// record (platform, digest, spec key, base commit, the layout, and the
// attestation and SBOM the layout holds as its referrers). Entries
// without an instance id (base and env images) are left out; an instance
// entry missing what publishing needs is an error naming index.json, the
// entry and the field, and the other entries are still returned.
func RecordsFromLayout(dir string) ([]core.Image, []error, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	lp, err := layout.FromPath(abs)
	if err != nil {
		return nil, nil, fmt.Errorf("opening OCI layout %s: %w", dir, err)
	}
	ii, err := lp.ImageIndex()
	if err != nil {
		return nil, nil, fmt.Errorf("reading OCI layout %s: %w", dir, err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return nil, nil, fmt.Errorf("reading OCI layout %s: %w", dir, err)
	}
	file := filepath.Join(abs, "index.json")
	var recs []core.Image
	var errs []error
	for i, d := range im.Manifests {
		id := d.Annotations[manifests.AnnotationInstanceID]
		if id == "" {
			continue
		}
		if !d.MediaType.IsImage() {
			errs = append(errs, fmt.Errorf("%s: manifests[%d] (%s): mediaType: %q is not an image manifest", file, i, id, d.MediaType))
			continue
		}
		if d.Platform == nil {
			errs = append(errs, fmt.Errorf("%s: manifests[%d] (%s): platform: missing", file, i, id))
			continue
		}
		p, err := core.ParsePlatform(d.Platform.OS + "/" + d.Platform.Architecture)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: manifests[%d] (%s): platform: %w", file, i, id, err))
			continue
		}
		r := core.Image{
			Kind: core.KindInstance, InstanceID: id, Key: d.Annotations[ociRefName], Platform: p,
			Digest: digest.Digest(d.Digest.String()), OCILayout: abs,
			SpecKey: d.Annotations[manifests.AnnotationSpecKey], BaseCommit: d.Annotations[manifests.AnnotationBaseCommit],
			Status: core.StatusBuilt,
		}
		if err := r.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s: manifests[%d] (%s): %w", file, i, id, err))
			continue
		}
		recs = append(recs, r)
	}
	layoutReferrers(im.Manifests, recs)
	return recs, errs, nil
}

// ociRefName is the OCI annotation naming an image in a layout.
const ociRefName = "org.opencontainers.image.ref.name"
