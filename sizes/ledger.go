package sizes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/publish"
)

// LoadImageFile reads the images of a file written by the pipeline:
//
//   - a build metadata file (publish.Metadata, JSON object with "images"):
//     every instance node with a "ref" (REPO@sha256:...) is measured there;
//     an entry with only an OCI layout directory cannot be measured in a
//     registry and is reported as an error;
//   - a publish ledger (JSON lines of core.Image): the last record of
//     each per-arch image (kind instance) wins; published images are
//     measured at their repository pinned to the recorded digest, images
//     that were not published are reported missing (with the ledger's
//     error).
//
// The publish package validates metadata entries; its errors name the file,
// line, entry and field. The ledger is read without modifying it.
func LoadImageFile(path string) ([]Target, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading image file: %w", err)
	}
	if isMetadata(data) {
		return targetsFromMetadata(path)
	}
	return targetsFromLedger(path, data)
}

// isMetadata reports whether data is one JSON object with an "images" key
// (a metadata file) rather than JSON lines (a ledger).
func isMetadata(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	var top map[string]json.RawMessage
	if err := dec.Decode(&top); err != nil {
		return false
	}
	_, ok := top["images"]
	return ok && !dec.More()
}

func targetsFromMetadata(path string) ([]Target, error) {
	md, err := publish.ReadMetadata(path)
	if err != nil {
		return nil, err
	}
	var out []Target
	seen := map[string]bool{}
	for i, im := range md.Images {
		if im.NodeKind() != publish.NodeInstance {
			continue
		}
		key := im.InstanceID + " " + im.Platform
		if seen[key] {
			return nil, fmt.Errorf("%s: images[%d].instance_id: %s %s listed twice", path, i, im.InstanceID, im.Platform)
		}
		seen[key] = true
		t := Target{Instance: im.InstanceID, Repo: RepoFromID(im.InstanceID), Platform: im.Platform, Ref: im.Ref}
		if im.Ref == "" {
			t.Err = fmt.Sprintf("%s: images[%d]: no ref, only an OCI layout (%s): not in a registry", path, i, im.OCILayout)
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no instance images", path)
	}
	sortTargets(out)
	return out, nil
}

func targetsFromLedger(path string, data []byte) ([]Target, error) {
	recs, err := core.Decode(bytes.NewReader(data), path)
	for _, e := range unjoin(err) {
		var le *core.LineError
		if errors.As(e, &le) && le.Torn {
			continue // a torn last line: the writer was killed mid-record
		}
		return nil, e
	}
	last := map[string]core.Image{}
	var order []string
	for _, rec := range recs {
		if rec.Kind != core.KindInstance {
			continue
		}
		k := rec.ID()
		if _, ok := last[k]; !ok {
			order = append(order, k)
		}
		last[k] = rec
	}
	var out []Target
	for _, k := range order {
		rec := last[k]
		t := Target{Instance: rec.InstanceID, Repo: RepoFromID(rec.InstanceID), Platform: string(rec.Platform)}
		switch {
		case rec.Status != core.StatusPublished:
			t.Missing = "not pushed according to the ledger"
			if rec.Error != "" {
				t.Missing += ": " + rec.Error
			}
		default:
			t.Ref = pinRef(rec.Ref, rec.Digest.String())
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no image records", path)
	}
	sortTargets(out)
	return out, nil
}

func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// pinRef replaces the tag or digest of ref by digest:
// "h:5000/r/x:k-1" + "sha256:ab" -> "h:5000/r/x@sha256:ab".
func pinRef(ref, digest string) string {
	repo := ref
	if i := strings.Index(repo, "@"); i >= 0 {
		repo = repo[:i]
	}
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	return repo + "@" + digest
}
