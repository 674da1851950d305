package verify

import (
	"context"
	"fmt"

	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/dataset"
	"github.com/swebuild/swebuild/manifests"
)

// ImageFunc returns the image reference of an instance on a platform.
type ImageFunc func(instanceID, platform string) (string, error)

// ImagesFromRepo names images as published under repo: the per-arch
// repository manifests.Namer.ArchRepo at tag "latest".
func ImagesFromRepo(repo string) ImageFunc {
	n := manifests.Namer{Repo: repo}
	return func(id, platform string) (string, error) {
		p, err := core.ParsePlatform(platform)
		if err != nil {
			return "", fmt.Errorf("platform %q has no upstream arch name", platform)
		}
		return n.ArchRepo(p.Arch(), id) + ":" + manifests.LatestTag, nil
	}
}

// ImagesFromRecords looks images up in build records (a metadata file):
// built instance images with a pushed Ref, else in their OCI layout
// (LayoutRef).
func ImagesFromRecords(recs []core.Image, file string) ImageFunc {
	byKey := map[string]core.Image{}
	for _, im := range recs {
		if im.Kind == core.KindInstance {
			byKey[im.InstanceID+"@"+im.Platform.String()] = im
		}
	}
	return func(id, platform string) (string, error) {
		im, ok := byKey[id+"@"+platform]
		switch {
		case !ok:
			return "", fmt.Errorf("%s: no instance image of %s for %s", file, id, platform)
		case im.Status == core.StatusFailed:
			return "", fmt.Errorf("%s: the %s image of %s failed to build: %s", file, platform, id, im.Error)
		case im.Ref == "" && im.OCILayout != "" && im.Digest != "":
			return LayoutRef(im.OCILayout, im.Digest.String()), nil
		case im.Ref == "":
			return "", fmt.Errorf("%s: the %s image of %s was not exported (no ref, no OCI layout): build it with --push REPO or --output type=oci,dest=DIR", file, platform, id)
		}
		return im.Ref, nil
	}
}

// Targets renders eval.sh for every instance and each of its platforms
// (tables decide them; only those in want, when want is not empty) and
// names its image with images (nil: no image, for the builder hook). Bad
// instances are returned as errors, the others as targets.
func Targets(ctx context.Context, r *render.Renderer, insts []dataset.Instance, want []core.Platform, images ImageFunc) ([]Target, []error) {
	var out []Target
	var errs []error
	wanted := map[core.Platform]bool{}
	for _, p := range want {
		wanted[p] = true
	}
	for i := range insts {
		inst := insts[i]
		for _, cp := range r.Tables.Platforms(&inst) {
			p := cp.String()
			if len(wanted) > 0 && !wanted[cp] {
				continue
			}
			res, err := r.Render(ctx, &inst, cp)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s (%s): rendering eval.sh: %w", inst.InstanceID, p, err))
				continue
			}
			t := Target{Instance: inst, Platform: cp, EvalScript: res.Eval, Parser: r.Tables.LogParser(inst.Repo)}
			if images != nil {
				ref, err := images(inst.InstanceID, p)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s (%s): %w", inst.InstanceID, p, err))
					continue
				}
				t.Image = ref
			}
			out = append(out, t)
		}
	}
	return out, errs
}
