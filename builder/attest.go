package builder

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	bkclient "github.com/moby/buildkit/client"
	"github.com/moby/buildkit/exporter/containerimage/exptypes"
	ocispecs "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/registry"
)

// Provenance
//
// A pushed image carries BuildKit's SLSA provenance attestation, asked for
// as buildx asks for it: the solve's frontend attribute
// attest:provenance=mode=max (the LLB of every step, so the Dockerfile
// bytes and the build arguments, and the materials: images pulled, local
// contexts). BuildKit's image exporter then pushes an index holding the
// platform's image manifest and an attestation manifest (platform
// unknown/unknown, annotations vnd.docker.reference.type=
// attestation-manifest and vnd.docker.reference.digest=<image digest>;
// with oci-artifact=true it is also an OCI 1.1 artifact whose subject is
// the image). An OCI layout export (--output type=oci) is attested the
// same way: the oci exporter writes that index into the layout, and the
// layout's index.json names the image manifest with the attestation
// manifest as a referrer entry beside it (output.go). The rest of swebuild
// keeps speaking per-arch image manifests: resolveAttested reads that
// index back once (from the registry, or from the layout) and reports the
// image manifest's digest as the node's digest and the attestation
// manifest's digest beside it (core.Image.Attestation); publish copies the
// attestation next to the image and lays it out in the instance's index
// the way buildx does.

// Attestation annotation keys of BuildKit's (and buildx's) index layout.
const (
	AnnotationReferenceType   = "vnd.docker.reference.type"
	AnnotationReferenceDigest = "vnd.docker.reference.digest"
	ReferenceTypeAttestation  = "attestation-manifest"
)

// provenanceAttrs adds the provenance request and the attestation layout to
// a solve that exports an image someone reads (a push, an OCI layout, or
// both): nothing is attested when the image stays in BuildKit's cache.
// Both exporters write the attestation manifest as an OCI 1.1 artifact
// (oci-artifact=true), so a push and a layout of one solve hold the same
// bytes.
func (s *bkSolver) provenanceAttrs(so *bkclient.SolveOpt) {
	if (s.push == "" && s.layout == nil) || s.noProvenance {
		return
	}
	if so.FrontendAttrs == nil {
		so.FrontendAttrs = map[string]string{}
	}
	so.FrontendAttrs["attest:provenance"] = "mode=max"
	if s.builderID != "" {
		// runDetails.builder.id, which SLSA v1 requires (buildx's
		// --attest type=provenance,builder-id=URI).
		so.FrontendAttrs["attest:provenance"] += ",builder-id=" + s.builderID
	}
	for i := range so.Exports {
		e := &so.Exports[i]
		if e.Type != bkclient.ExporterImage && e.Type != bkclient.ExporterOCI {
			continue
		}
		if e.Attrs == nil {
			e.Attrs = map[string]string{}
		}
		e.Attrs[string(exptypes.OptKeyOCIArtifact)] = "true"
	}
}

// resolveAttested fills out.Digest (and out.Attestation) from a solve's
// exporter response: the image manifest's digest when BuildKit exported
// an image, or, when it exported an index with attestations, the digest
// of the image manifest for p in it and of its attestation manifest. The
// index is read from the push repository, else from the OCI layout.
func (s *bkSolver) resolveAttested(ctx context.Context, resp *bkclient.SolveResponse, p core.Platform, out *Outcome) error {
	out.Digest = resp.ExporterResponse[exptypes.ExporterImageDigestKey]
	if out.Digest == "" {
		return fmt.Errorf("BuildKit reported no image digest")
	}
	enc := resp.ExporterResponse[exptypes.ExporterImageDescriptorKey]
	if enc == "" || (s.push == "" && s.layout == nil) {
		return nil
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return fmt.Errorf("decoding the exported descriptor: %w", err)
	}
	var desc ocispecs.Descriptor
	if err := json.Unmarshal(raw, &desc); err != nil {
		return fmt.Errorf("decoding the exported descriptor: %w", err)
	}
	if desc.MediaType != ocispecs.MediaTypeImageIndex && desc.MediaType != "application/vnd.docker.distribution.manifest.list.v2+json" {
		return nil
	}
	// With both a push and a layout, BuildKit reports one exporter's
	// result, the layout's (the oci exporter runs last), and the two
	// indexes differ (the image manifest in them does not; checked by
	// pushedImage): the layout's is read, and the record names its
	// attestation, which publish carries from the layout.
	var im *v1.IndexManifest
	where := ""
	if s.layout != nil {
		where = "in OCI layout " + s.layout.dir
		if im, err = s.layout.readIndex(ctx, desc); err != nil {
			return err
		}
	} else {
		where = s.push + "@" + out.Digest
		if im, err = s.pushedIndex(ctx, out.Digest); err != nil {
			return err
		}
	}
	img, att, err := attestedImage(im, p)
	if err != nil {
		return fmt.Errorf("exported index %s: %w", where, err)
	}
	out.Digest = img.String()
	for _, d := range im.Manifests {
		if d.Digest == img && d.Annotations[AnnotationReferenceType] == "" {
			out.manifest = &v1.Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: d.Size}
			break
		}
	}
	if att != nil {
		out.Attestation, out.AttestationSize = att.Digest.String(), att.Size
	}
	if s.layout != nil && s.push != "" {
		return s.pushedImage(ctx, out.Digest)
	}
	return nil
}

// client is the solver's registry client (see bkSolver.reg).
func (s *bkSolver) client() (*registry.Client, error) {
	s.regOnce.Do(func() {
		if s.reg == nil {
			s.reg, s.regErr = registry.New(registry.Options{Keychain: s.keychain, Insecure: s.insecure})
		}
	})
	return s.reg, s.regErr
}

// pushedRef is the reference of digest dg in the push repository.
func (s *bkSolver) pushedRef(dg string) (*registry.Client, name.Reference, error) {
	c, err := s.client()
	if err != nil {
		return nil, nil, err
	}
	ref, err := c.ParseReference(s.push + "@" + dg)
	return c, ref, err
}

// pushedImage makes sure the image manifest dg the layout holds was pushed
// too (one HEAD, through the registry client's budget).
func (s *bkSolver) pushedImage(ctx context.Context, dg string) error {
	c, ref, err := s.pushedRef(dg)
	if err != nil {
		return fmt.Errorf("reference of the pushed image: %w", err)
	}
	gctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	d, err := c.Head(gctx, ref)
	if err == nil && d == nil {
		err = errors.New("the registry does not have it")
	}
	if err != nil {
		return fmt.Errorf("the image %s in the OCI layout was not pushed as %s: %w", dg, ref, err)
	}
	return nil
}

// pushedIndex reads the index BuildKit pushed by digest dg.
func (s *bkSolver) pushedIndex(ctx context.Context, dg string) (*v1.IndexManifest, error) {
	c, ref, err := s.pushedRef(dg)
	if err != nil {
		return nil, fmt.Errorf("reference of the exported index: %w", err)
	}
	gctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	d, err := c.Get(gctx, ref)
	if err != nil {
		return nil, fmt.Errorf("reading the exported index %s: %w", ref, err)
	}
	im, err := v1.ParseIndexManifest(bytes.NewReader(d.Manifest))
	if err != nil {
		return nil, fmt.Errorf("reading the exported index %s: %w", ref, err)
	}
	return im, nil
}

// attestedImage picks, in an index BuildKit exported for one platform, the
// image manifest for p and the attestation manifest that refers to it (nil
// when there is none).
func attestedImage(im *v1.IndexManifest, p core.Platform) (v1.Hash, *v1.Descriptor, error) {
	op := p.OCI()
	var img *v1.Hash
	for _, d := range im.Manifests {
		if d.Annotations[AnnotationReferenceType] != "" || d.Platform == nil {
			continue
		}
		if d.Platform.OS == op.OS && d.Platform.Architecture == op.Architecture {
			if img != nil {
				return v1.Hash{}, nil, fmt.Errorf("two image manifests for %s", p)
			}
			h := d.Digest
			img = &h
		}
	}
	if img == nil {
		return v1.Hash{}, nil, fmt.Errorf("no image manifest for %s", p)
	}
	for _, d := range im.Manifests {
		if d.Annotations[AnnotationReferenceType] == ReferenceTypeAttestation && d.Annotations[AnnotationReferenceDigest] == img.String() {
			return *img, &d, nil
		}
	}
	return *img, nil, nil
}
