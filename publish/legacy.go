package publish

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/core"
)

// A publish ledger written before publish wrote core records has lines
// like {"kind":"image",...,"pushed":true}. OpenLedger converts such a
// ledger once (the original is kept next to it as LEDGER.legacy), so resumed
// runs and every reader see core records only.

// legacyRecord is one line of the older ledger format.
type legacyRecord struct {
	Time       string        `json:"time"`
	Kind       string        `json:"kind"` // image, index or blob
	InstanceID string        `json:"instance_id"`
	Platform   core.Platform `json:"platform"`
	Ref        string        `json:"ref"` // tagged image or index; for a blob, the repository
	Digest     string        `json:"digest"`
	Size       int64         `json:"size"`
	MediaType  string        `json:"media_type"`
	SpecKey    string        `json:"spec_key"`
	Verified   *bool         `json:"verified"`
	Pushed     bool          `json:"pushed"`
	Error      string        `json:"error"`
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
// *core.LineError values next to the records that did; a torn last line is
// dropped.
func ConvertLegacyLedger(data []byte, path string) ([]core.Image, error) {
	var out []core.Image
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
				le := &core.LineError{File: path, Line: n, Msg: err.Error()}
				var fe *core.FieldError
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

func convertLegacyLine(b []byte) (core.Image, error) {
	var l legacyRecord
	if err := json.Unmarshal(b, &l); err != nil {
		var pe *core.PlatformError
		if errors.As(err, &pe) {
			return core.Image{}, &core.FieldError{Field: "platform", Msg: pe.Error()}
		}
		return core.Image{}, fmt.Errorf("not a ledger record: %w", err)
	}
	im := core.Image{Digest: digest.Digest(l.Digest), Size: l.Size, MediaType: l.MediaType, SpecKey: l.SpecKey,
		Verified: l.Verified, Status: core.StatusPublished, Time: l.Time}
	repo, tag := splitTag(l.Ref)
	switch l.Kind {
	case "image":
		im.Kind, im.InstanceID, im.Platform = core.KindInstance, l.InstanceID, l.Platform
	case "index":
		im.Kind, im.InstanceID = core.KindIndex, l.InstanceID
	case "blob":
		im.Kind, repo, tag = core.KindBlob, l.Ref, ""
	default:
		return core.Image{}, &core.FieldError{Field: "kind", Msg: fmt.Sprintf("%q is not image, index or blob", l.Kind)}
	}
	if repo != "" && l.Digest != "" {
		im.Ref = repo + "@" + l.Digest
	}
	if tag != "" {
		im.Tags = []string{tag}
	}
	if !l.Pushed || l.Error != "" {
		im.Status, im.Error = core.StatusFailed, l.Error
		if im.Kind != core.KindBlob {
			im.Ref, im.Tags = "", nil
		}
		if im.Error == "" {
			im.Error = "not pushed"
			if im.Kind == core.KindBlob {
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

// migrateLegacy converts the ledger at path in place when it is in the
// older format, keeping the original as path.legacy. It holds the ledger's
// lock while it does, so a concurrent publish is refused as usual. It
// reports whether it converted, and the lines it could not.
func migrateLegacy(path string) (bool, []*core.LineError, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, fmt.Errorf("opening %s: %w", path, err)
	}
	defer f.Close()
	if err := core.Lock(f); err != nil {
		return false, nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return false, nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if !IsLegacyLedger(data) {
		return false, nil, nil
	}
	recs, cerr := ConvertLegacyLedger(data, path)
	bad, err := core.LineErrors(cerr)
	if err != nil {
		return false, nil, err
	}
	if err := os.WriteFile(path+".legacy", data, 0o644); err != nil {
		return false, nil, fmt.Errorf("keeping the older ledger: %w", err)
	}
	if err := core.WriteFile(path, recs); err != nil {
		return false, nil, err
	}
	return true, bad, nil
}
