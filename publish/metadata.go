// Package publish pushes built images by digest, writes one multi-arch index
// per instance once every platform it names is in the registry, and keeps a
// ledger so a re-run skips what is done and retries only what failed.
package publish

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests"
)

// Metadata is the build metadata file: the contract between the builder
// (which writes it, e.g. `swebuild build --metadata-file F`) and publish
// (which reads it, `swebuild publish --metadata-file F`). JSON, UTF-8:
//
//	{
//	  "images": [
//	    {
//	      "instance_id": "django__django-11099",
//	      "node": "instance",
//	      "platform": "linux/amd64",
//	      "arch": "x86_64",
//	      "digest": "sha256:<image manifest digest>",
//	      "ref": "127.0.0.1:5000/build/cache@sha256:<same digest>",
//	      "oci_layout": "oci/django__django-11099-x86_64",
//	      "spec_key": "<opaque key of the build inputs>",
//	      "base_commit": "<git sha>",
//	      "verified": true
//	    }
//	  ]
//	}
//
// One entry per built image (node, instance, platform). The builder either
// pushes by digest to any repository (BuildKit image exporter with
// push-by-digest=true, name-canonical=true) and sets Ref, or exports an OCI
// layout directory (BuildKit oci exporter, tar=false) and sets OCILayout, or
// both; publish prefers OCILayout when the directory exists, else Ref.
// Digest is always the single-platform image manifest digest (not an
// index); when the layout's index.json lists an index, publish looks inside it.
type Metadata struct {
	Images []Image `json:"images"`
}

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
}

// NodeKind returns Node with the default applied.
func (im Image) NodeKind() string {
	if im.Node == "" {
		return NodeInstance
	}
	return im.Node
}

// FieldError names the file, entry and field of a bad metadata value.
type FieldError struct {
	File  string
	Index int // entry index in "images", 0-based
	Line  int // line of the entry in the file, 1-based; 0 if unknown
	Field string
	Msg   string
}

func (e *FieldError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: images[%d].%s: %s", e.File, e.Line, e.Index, e.Field, e.Msg)
	}
	return fmt.Sprintf("%s: images[%d].%s: %s", e.File, e.Index, e.Field, e.Msg)
}

// ReadMetadata reads and validates a metadata file. Relative OCILayout paths
// are made absolute against the file's directory. It returns the entries that
// are valid and, joined, one FieldError per invalid entry (so a caller can
// publish the good ones and still fail at the end).
func ReadMetadata(path string) (*Metadata, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading metadata file: %w", err)
	}
	var raw struct {
		Images []json.RawMessage `json:"images"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%s: parsing metadata JSON: %w", path, err)
	}
	lines := entryLines(data)
	dir := filepath.Dir(path)
	md := &Metadata{}
	var errs []error
	for i, rm := range raw.Images {
		line := 0
		if i < len(lines) {
			line = lines[i]
		}
		var im Image
		d := json.NewDecoder(bytes.NewReader(rm))
		d.DisallowUnknownFields()
		if err := d.Decode(&im); err != nil {
			errs = append(errs, &FieldError{File: path, Index: i, Line: line, Field: "*", Msg: err.Error()})
			continue
		}
		if ferr := validate(im); ferr != nil {
			ferr.File, ferr.Index, ferr.Line = path, i, line
			errs = append(errs, ferr)
			continue
		}
		if im.OCILayout != "" && !filepath.IsAbs(im.OCILayout) {
			im.OCILayout = filepath.Join(dir, im.OCILayout)
		}
		md.Images = append(md.Images, im)
	}
	return md, errors.Join(errs...)
}

func validate(im Image) *FieldError {
	switch im.NodeKind() {
	case NodeBase, NodeEnv, NodeInstance:
	default:
		return &FieldError{Field: "node", Msg: fmt.Sprintf("%q is not base, env or instance", im.Node)}
	}
	if im.NodeKind() == NodeInstance && im.InstanceID == "" {
		return &FieldError{Field: "instance_id", Msg: "required"}
	}
	arch, err := manifests.ArchForPlatform(im.Platform)
	if err != nil {
		return &FieldError{Field: "platform", Msg: err.Error()}
	}
	if im.Arch != "" && im.Arch != arch {
		return &FieldError{Field: "arch", Msg: fmt.Sprintf("%q does not match platform %s (%s)", im.Arch, im.Platform, arch)}
	}
	if _, err := v1.NewHash(im.Digest); err != nil || !strings.HasPrefix(im.Digest, "sha256:") {
		return &FieldError{Field: "digest", Msg: fmt.Sprintf("%q is not a sha256 digest", im.Digest)}
	}
	if im.Ref == "" && im.OCILayout == "" {
		return &FieldError{Field: "ref", Msg: "one of ref or oci_layout is required"}
	}
	if im.Ref != "" {
		_, dg, ok := strings.Cut(im.Ref, "@")
		if !ok || dg != im.Digest {
			return &FieldError{Field: "ref", Msg: fmt.Sprintf("%q must be pinned to the entry's digest %s", im.Ref, im.Digest)}
		}
	}
	if im.SpecKey == "" {
		return &FieldError{Field: "spec_key", Msg: "required"}
	}
	return nil
}

// entryLines returns, for each element of the top-level "images" array, the
// 1-based line where it starts.
func entryLines(data []byte) []int {
	dec := json.NewDecoder(bytes.NewReader(data))
	depth := 0
	inImages := false
	var out []int
	expectKey := false
	for {
		off := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if inImages && depth == 2 && t == '{' {
					out = append(out, 1+bytes.Count(data[:skipSpace(data, off)], []byte{'\n'}))
				}
				if t == '[' && depth == 1 && expectKey {
					inImages = true
				}
				depth++
			case '}', ']':
				depth--
				if depth == 1 {
					inImages = false
				}
			}
			expectKey = false
		case string:
			if depth == 1 {
				expectKey = t == "images" && !expectKey
			}
		default:
			expectKey = false
		}
	}
}

func skipSpace(data []byte, off int64) int {
	i := int(off)
	for i < len(data) && (data[i] == ' ' || data[i] == '\n' || data[i] == '\t' || data[i] == '\r' || data[i] == ',' || data[i] == ':') {
		i++
	}
	return i
}

// WriteMetadata writes md as indented JSON (for the builder and tests).
func WriteMetadata(path string, md *Metadata) error {
	b, err := json.MarshalIndent(md, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding metadata: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing metadata file: %w", err)
	}
	return nil
}

// CoreImages returns md's entries as core records, for Publish.
func CoreImages(md *Metadata) []core.Image {
	out := make([]core.Image, 0, len(md.Images))
	for _, im := range md.Images {
		out = append(out, core.Image{
			Kind: core.Kind(im.NodeKind()), InstanceID: im.InstanceID, Platform: core.Platform(im.Platform),
			Digest: digest.Digest(im.Digest), Ref: im.Ref, OCILayout: im.OCILayout, SpecKey: im.SpecKey,
			BaseCommit: im.BaseCommit, Verified: im.Verified, Status: core.StatusBuilt,
		})
	}
	return out
}
