package core

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/opencontainers/go-digest"
)

// A publish ledger written before publish wrote core records has lines
// like {"kind":"image",...,"pushed":true}. The converter lives here, beside
// the record reader, so every reader of a ledger (ci, sizes) converts it
// without linking the writer; publish's OpenLedger converts such a ledger
// once in place (the original is kept next to it as LEDGER.legacy), so
// resumed runs see core records only.

// legacyRecord is one line of the older ledger format.
type legacyRecord struct {
	Time       string   `json:"time"`
	Kind       string   `json:"kind"` // image, index or blob
	InstanceID string   `json:"instance_id"`
	Platform   Platform `json:"platform"`
	Ref        string   `json:"ref"` // tagged image or index; for a blob, the repository
	Digest     string   `json:"digest"`
	Size       int64    `json:"size"`
	MediaType  string   `json:"media_type"`
	SpecKey    string   `json:"spec_key"`
	Verified   *bool    `json:"verified"`
	Pushed     bool     `json:"pushed"`
	Error      string   `json:"error"`
}

// IsLegacyLedger reports whether data is a ledger in the older format (its
// first line has "pushed").
func IsLegacyLedger(data []byte) bool {
	line, _, _ := bytes.Cut(bytes.TrimSpace(data), []byte("\n"))
	var probe map[string]json.RawMessage
	if json.Unmarshal(line, &probe) != nil {
		return false
	}
	_, ok := probe["pushed"]
	return ok
}

// ConvertLegacyLedger converts a ledger in the older format to core
// records. Lines that do not convert are returned joined as
// *LineError values next to the records that did; a torn last line is
// dropped.
func ConvertLegacyLedger(data []byte, path string) ([]Image, error) {
	var out []Image
	var errs []error
	br := bufio.NewReader(bytes.NewReader(data))
	for n := 1; ; n++ {
		line, rerr := br.ReadBytes('\n')
		complete := rerr == nil
		if t := bytes.TrimSpace(line); len(t) > 0 {
			im, err := convertLegacyLine(t)
			switch {
			case err == nil:
				out = append(out, im)
			case complete:
				le := &LineError{File: path, Line: n, Msg: err.Error()}
				var fe *FieldError
				if errors.As(err, &fe) {
					le.Field, le.Msg = fe.Field, fe.Msg
				}
				errs = append(errs, le)
			}
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				errs = append(errs, fmt.Errorf("reading %s: %w", path, rerr))
			}
			break
		}
	}
	return out, errors.Join(errs...)
}

func convertLegacyLine(b []byte) (Image, error) {
	var l legacyRecord
	if err := json.Unmarshal(b, &l); err != nil {
		var pe *PlatformError
		if errors.As(err, &pe) {
			return Image{}, &FieldError{Field: "platform", Msg: pe.Error()}
		}
		return Image{}, fmt.Errorf("not a ledger record: %w", err)
	}
	im := Image{Digest: digest.Digest(l.Digest), Size: l.Size, MediaType: l.MediaType, SpecKey: l.SpecKey,
		Verified: l.Verified, Status: StatusPublished, Time: l.Time}
	repo, tag := splitTag(l.Ref)
	switch l.Kind {
	case "image":
		im.Kind, im.InstanceID, im.Platform = KindInstance, l.InstanceID, l.Platform
	case "index":
		im.Kind, im.InstanceID = KindIndex, l.InstanceID
	case "blob":
		im.Kind, repo, tag = KindBlob, l.Ref, ""
	default:
		return Image{}, &FieldError{Field: "kind", Msg: fmt.Sprintf("%q is not image, index or blob", l.Kind)}
	}
	if repo != "" && l.Digest != "" {
		im.Ref = repo + "@" + l.Digest
	}
	if tag != "" {
		im.Tags = []string{tag}
	}
	if !l.Pushed || l.Error != "" {
		im.Status, im.Error = StatusFailed, l.Error
		if im.Kind != KindBlob {
			im.Ref, im.Tags = "", nil
		}
		if im.Error == "" {
			im.Error = "not pushed"
			if im.Kind == KindBlob {
				im.Error = "upload started, not confirmed"
			}
		}
	}
	if im.Digest == "" {
		im.Ref = ""
	}
	return im, im.Validate()
}

// splitTag splits "host/repo:tag@digest" into the repository and the tag.
func splitTag(ref string) (repo, tag string) {
	ref, _, _ = strings.Cut(ref, "@")
	slash := strings.LastIndex(ref, "/")
	if i := strings.LastIndex(ref, ":"); i > slash {
		return ref[:i], ref[i+1:]
	}
	return ref, ""
}
