// Package publish pushes built images by digest, writes one multi-arch index
// per instance once every platform it names is in the registry, and keeps a
// ledger so a re-run skips what is done and retries only what failed.
package publish

import "github.com/swebuild/swebuild/core"

// Node kinds. Publish publishes "instance" nodes; the others are accepted and
// ignored so the builder can describe its whole graph in one file.
const (
	NodeBase     = "base"
	NodeEnv      = "env"
	NodeInstance = "instance"
)

// Image is one built image.
type Image struct {
	// InstanceID is the SWE-bench instance id (required for instance nodes).
	InstanceID string `json:"instance_id"`
	// Node is "base", "env" or "instance"; empty means "instance".
	Node string `json:"node,omitempty"`
	// Platform is the OCI platform: "linux/amd64" or "linux/arm64".
	Platform string `json:"platform"`
	// Arch is the upstream arch name, "x86_64" or "arm64"; optional, must
	// agree with Platform when set.
	Arch string `json:"arch,omitempty"`
	// Digest is the image manifest digest, "sha256:<64 hex>" (required).
	Digest string `json:"digest"`
	// Ref is a digest-pinned reference where the image can be pulled
	// (REGISTRY/REPO@sha256:...); its digest must equal Digest.
	Ref string `json:"ref,omitempty"`
	// OCILayout is an OCI image layout directory holding the image; relative
	// paths are relative to the metadata file's directory.
	OCILayout string `json:"oci_layout,omitempty"`
	// SpecKey identifies the build inputs (spec, scripts, pins, patch);
	// publish tags with manifests.ContentTag(SpecKey). Required.
	SpecKey string `json:"spec_key"`
	// BaseCommit is the instance's base commit (an index annotation).
	BaseCommit string `json:"base_commit,omitempty"`
	// Verified is the verify result: true (gold patch passed), false
	// (failed) or null (not verified). Publish records it in the ledger; with
	// --require-verified it refuses images that are not true.
	Verified *bool `json:"verified"`
	// BuildError is set when the record says the image failed to build or
	// verify: the instance's index is not written.
	BuildError string `json:"-"`
}

// NodeKind returns Node with the default applied.
func (im Image) NodeKind() string {
	if im.Node == "" {
		return NodeInstance
	}
	return im.Node
}

// imagesFromRecords turns core records into publish's per-image view:
// instance records only (the others are counted as ignored); a failed record
// keeps its error so the instance's index is not written without it.
func imagesFromRecords(recs []core.Image) (imgs []Image, ignored int) {
	for _, r := range recs {
		if r.Kind != core.KindInstance {
			ignored++
			continue
		}
		im := Image{
			InstanceID: r.InstanceID,
			Node:       NodeInstance,
			Platform:   r.Platform.String(),
			Arch:       r.Platform.Arch(),
			Digest:     r.Digest.String(),
			Ref:        r.Ref,
			OCILayout:  r.OCILayout,
			SpecKey:    r.SpecKey,
			BaseCommit: r.BaseCommit,
			Verified:   r.Verified,
		}
		if r.Status == core.StatusFailed {
			im.BuildError = r.Error
		}
		imgs = append(imgs, im)
	}
	return imgs, ignored
}
