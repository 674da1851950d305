package sizes

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// LoadLedger reads the images of a metadata/ledger file. Until the publish
// package's file types are used here, this is a local adapter accepting
// records with these fields, either as a JSON array, as JSONL, or as the
// array under a top-level "images" key:
//
//	instance_id   required
//	platform      "linux/amd64" / "linux/arm64" (or "arch": x86_64, amd64, arm64)
//	ref           a full reference ("host/repo@sha256:..." or ":tag"), or
//	image+digest  a repository and a manifest digest, joined as image@digest
//	repo          optional GitHub repository ("django/django")
//
// Errors name the file, the record (line for JSONL) and the field.
func LoadLedger(path string) ([]Target, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading metadata file: %w", err)
	}
	type rec struct {
		InstanceID string `json:"instance_id"`
		Platform   string `json:"platform"`
		Arch       string `json:"arch"`
		Ref        string `json:"ref"`
		Image      string `json:"image"`
		Digest     string `json:"digest"`
		Repo       string `json:"repo"`
	}
	type located struct {
		where string
		r     rec
	}
	var recs []located
	trimmed := bytes.TrimSpace(data)
	switch {
	case len(trimmed) > 0 && trimmed[0] == '{' && !isJSONL(trimmed):
		var top struct {
			Images []rec `json:"images"`
		}
		if err := json.Unmarshal(trimmed, &top); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if top.Images == nil {
			return nil, fmt.Errorf("%s: images: missing (want an array of image records)", path)
		}
		for i, r := range top.Images {
			recs = append(recs, located{fmt.Sprintf("%s: images[%d]", path, i), r})
		}
	case len(trimmed) > 0 && trimmed[0] == '[':
		var arr []rec
		if err := json.Unmarshal(trimmed, &arr); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for i, r := range arr {
			recs = append(recs, located{fmt.Sprintf("%s: [%d]", path, i), r})
		}
	default:
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 1<<20), 1<<26)
		for n := 1; sc.Scan(); n++ {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 {
				continue
			}
			var r rec
			if err := json.Unmarshal(line, &r); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, n, err)
			}
			recs = append(recs, located{fmt.Sprintf("%s:%d", path, n), r})
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
	}
	var out []Target
	var errs []error
	seen := map[string]string{}
	for _, l := range recs {
		r := l.r
		if r.InstanceID == "" {
			errs = append(errs, fmt.Errorf("%s: instance_id: missing", l.where))
			continue
		}
		platform := r.Platform
		if platform == "" {
			switch r.Arch {
			case "x86_64", "amd64":
				platform = "linux/amd64"
			case "arm64", "aarch64":
				platform = "linux/arm64"
			case "":
				errs = append(errs, fmt.Errorf("%s: platform: missing (or arch)", l.where))
				continue
			default:
				errs = append(errs, fmt.Errorf("%s: arch: unsupported %q", l.where, r.Arch))
				continue
			}
		}
		if _, err := ArchName(platform); err != nil {
			errs = append(errs, fmt.Errorf("%s: platform: %v", l.where, err))
			continue
		}
		ref := r.Ref
		if ref == "" {
			if r.Image == "" || r.Digest == "" {
				errs = append(errs, fmt.Errorf("%s: ref: missing (or image and digest)", l.where))
				continue
			}
			ref = strings.TrimSuffix(r.Image, "/") + "@" + r.Digest
		}
		key := r.InstanceID + " " + platform
		if prev, dup := seen[key]; dup {
			errs = append(errs, fmt.Errorf("%s: instance_id: %s %s already listed at %s", l.where, r.InstanceID, platform, prev))
			continue
		}
		seen[key] = l.where
		repo := r.Repo
		if repo == "" {
			repo = RepoFromID(r.InstanceID)
		}
		out = append(out, Target{Instance: r.InstanceID, Repo: repo, Platform: platform, Ref: ref})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no images", path)
	}
	sortTargets(out)
	return out, nil
}

// isJSONL reports whether data holds more than one top-level JSON value.
func isJSONL(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return false
	}
	return dec.More()
}
