package sizes

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/publish"
)

// LoadImageFile reads the images of a file written by the pipeline:
//
//   - a build metadata file (publish.Metadata, JSON object with "images"):
//     every instance node with a "ref" (REPO@sha256:...) is measured there;
//     an entry with only an OCI layout directory cannot be measured in a
//     registry and is reported as an error;
//   - a publish ledger (JSON lines of publish.Record): the last record of
//     each per-arch image wins; pushed images are measured at their
//     repository pinned to the recorded digest, images that were not
//     pushed are reported missing (with the ledger's error).
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
	last := map[string]publish.Record{}
	var order []string
	r := bufio.NewReader(bytes.NewReader(data))
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		complete := len(line) > 0 && line[len(line)-1] == '\n'
		if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
			var rec publish.Record
			if jerr := json.Unmarshal(trimmed, &rec); jerr != nil {
				if !complete {
					break // a torn last line: the writer was killed mid-record
				}
				return nil, fmt.Errorf("%s:%d: parsing ledger record: %w", path, n, jerr)
			}
			if rec.Kind == "" {
				return nil, fmt.Errorf("%s:%d: kind: missing (not a publish ledger or metadata file)", path, n)
			}
			if rec.Kind == publish.KindImage {
				if rec.InstanceID == "" {
					return nil, fmt.Errorf("%s:%d: instance_id: missing", path, n)
				}
				if _, err := manifests.ArchForPlatform(rec.Platform); err != nil {
					return nil, fmt.Errorf("%s:%d: platform: %v", path, n, err)
				}
				k := rec.Key()
				if _, ok := last[k]; !ok {
					order = append(order, k)
				}
				last[k] = rec
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
	}
	var out []Target
	for _, k := range order {
		rec := last[k]
		t := Target{Instance: rec.InstanceID, Repo: RepoFromID(rec.InstanceID), Platform: rec.Platform}
		switch {
		case !rec.Pushed:
			t.Missing = "not pushed according to the ledger"
			if rec.Error != "" {
				t.Missing += ": " + rec.Error
			}
		case rec.Ref == "" || rec.Digest == "":
			t.Err = fmt.Sprintf("%s: ledger record of %s %s has no ref or digest", path, rec.InstanceID, rec.Platform)
		default:
			t.Ref = pinRef(rec.Ref, rec.Digest)
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no image records", path)
	}
	sortTargets(out)
	return out, nil
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
