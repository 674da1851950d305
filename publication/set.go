package publication

import (
	"bytes"
	"context"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests/naming"
)

// Prefix is a published set named by its repository prefix: per instance
// the per-arch images REPO/sweb.eval.<arch>.<id>:TAG and the index
// REPO/sweb.eval.<id>:TAG (manifests/naming, the names manifests.Namer
// gives).
type Prefix struct {
	Repo string
	// Tag is the tag read on every name (default "latest").
	Tag string
	// KeepDoubleUnderscore names images with "__" kept (as publish's
	// option of the same name).
	KeepDoubleUnderscore bool
}

func (p Prefix) tag() string {
	if p.Tag == "" {
		return naming.LatestTag
	}
	return p.Tag
}

// ArchName is the per-arch name of instance id on platform pl.
func (p Prefix) ArchName(id string, pl core.Platform) string {
	return naming.ArchRepo(p.Repo, pl.Arch(), id, p.KeepDoubleUnderscore) + ":" + p.tag()
}

// IndexName is the index name of instance id.
func (p Prefix) IndexName(id string) string {
	return naming.IndexRepo(p.Repo, id, p.KeepDoubleUnderscore) + ":" + p.tag()
}

// Want is one instance of a published set and the platforms it should
// have (the plan's decision, narrowed to what the caller asks about).
type Want struct {
	ID        string
	Platforms []core.Platform
}

// Instance is what the registry holds of one instance.
type Instance struct {
	ID string
	// Images are the per-arch names, one per platform wanted, in order.
	Images []Image
	Index  Index
}

// Image is a per-arch name of one platform.
type Image struct {
	Platform core.Platform
	Found
}

// Index is an instance's index and each of its children as found in the
// index's repository.
type Index struct {
	Found
	// Manifest is the index's content when it is present and an index;
	// NotIndex says it is present and something else.
	Manifest *v1.IndexManifest
	NotIndex bool
	Children []Child
}

// Child is one manifest an index lists, as found in the index's
// repository.
type Child struct {
	Descriptor v1.Descriptor
	// Platform is the child's platform when it is one swebuild builds
	// (invalid otherwise, and for attestation manifests).
	Platform core.Platform
	// Attestation: BuildKit's attestation manifest (platform
	// unknown/unknown) of the child Subject.
	Attestation bool
	Subject     string
	Found
}

// What names the child in messages: "linux/arm64 child sha256:...",
// "attestation manifest sha256:... (of sha256:...)".
func (c Child) What() string {
	switch {
	case c.Attestation:
		return fmt.Sprintf("attestation manifest %s (of %s)", c.Descriptor.Digest, c.Subject)
	case !c.Platform.IsZero():
		return fmt.Sprintf("%s child %s", c.Platform, c.Descriptor.Digest)
	case c.Descriptor.Platform != nil:
		return fmt.Sprintf("%s child %s", c.Descriptor.Platform, c.Descriptor.Digest)
	}
	return "child " + c.Descriptor.Digest.String()
}

// ChildOf returns the index's image child for platform p, if it lists one.
func (x Index) ChildOf(p core.Platform) (Child, bool) {
	for _, c := range x.Children {
		if !c.Attestation && c.Platform == p {
			return c, true
		}
	}
	return Child{}, false
}

// Read reads a prefix-named set: per wanted instance, each per-arch name
// (one HEAD) and the index (one GET, then one HEAD per child in the
// index's repository), Jobs at a time. The error is for a name that does
// not parse or a registry that could not be asked; what is missing or
// refused is in the result, instance by instance in wants' order.
func (r *Reader) Read(ctx context.Context, set Prefix, wants []Want) ([]Instance, error) {
	out := make([]Instance, len(wants))
	type job struct{ inst, image int } // image -1: the index
	var jobs []job
	for i, w := range wants {
		out[i] = Instance{ID: w.ID, Images: make([]Image, len(w.Platforms))}
		for k, p := range w.Platforms {
			out[i].Images[k].Platform = p
			jobs = append(jobs, job{i, k})
		}
		jobs = append(jobs, job{i, -1})
	}
	err := r.each(ctx, len(jobs), func(ctx context.Context, n int) error {
		j := jobs[n]
		inst := &out[j.inst]
		if j.image < 0 {
			x, err := r.ReadIndex(ctx, set.IndexName(inst.ID))
			inst.Index = x
			return err
		}
		img := &inst.Images[j.image]
		f, err := r.Head(ctx, set.ArchName(inst.ID, img.Platform))
		img.Found = f
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReadIndex reads the index ref names (one bounded GET) and HEADs each
// child it lists in the index's repository: a child missing there (what
// an untagged-manifest cleanup leaves) makes a pull of its platform fail
// even when the per-arch name still has it.
func (r *Reader) ReadIndex(ctx context.Context, ref string) (Index, error) {
	x := Index{Found: Found{Name: ref}}
	parsed, err := r.Client.ParseReference(ref)
	if err != nil {
		return x, err
	}
	m, err := r.Client.Manifest(ctx, parsed, r.limits().ManifestBytes)
	problem, hard := classify(err, parsed.Context().RegistryStr())
	if hard != nil {
		return x, hard
	}
	if err != nil {
		x.Problem = problem
		return x, nil
	}
	x.Present = true
	x.Descriptor = v1.Descriptor{MediaType: m.MediaType, Digest: m.Digest, Size: int64(len(m.Raw))}
	if !m.MediaType.IsIndex() {
		x.NotIndex = true
		return x, nil
	}
	im, err := v1.ParseIndexManifest(bytes.NewReader(m.Raw))
	if err != nil {
		x.Problem = fmt.Errorf("the index does not parse: %w", err)
		return x, nil
	}
	x.Manifest = im
	repo := parsed.Context()
	for _, d := range im.Manifests {
		c := Child{Descriptor: d, Subject: d.Annotations["vnd.docker.reference.digest"]}
		c.Attestation = d.Annotations["vnd.docker.reference.type"] != "" || (d.Platform != nil && d.Platform.OS == "unknown")
		if d.Platform != nil && !c.Attestation {
			c.Platform, _ = core.ParsePlatform(d.Platform.String())
		}
		c.Found, err = r.Head(ctx, repo.Digest(d.Digest.String()).String())
		if err != nil {
			return x, err
		}
		x.Children = append(x.Children, c)
	}
	return x, nil
}
