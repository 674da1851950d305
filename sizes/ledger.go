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

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/publish"
)

// LoadImageFile reads the images of a record file written by the pipeline
// (JSON lines of core.Image: a build metadata file or a publish ledger): the
// last record of each instance image wins; built or published images are
// measured at their digest-pinned ref, failed ones are reported missing
// (with the record's error), built images that were never pushed (no ref)
// are errors. Errors name the file, line and field.
//
// Until the publish ledger is written as core records, a ledger in the
// older publish.Record format is read by targetsFromLedger.
func LoadImageFile(path string) ([]Target, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading image file: %w", err)
	}
	if isLegacyLedger(data) {
		return targetsFromLedger(path, data)
	}
	recs, err := core.Decode(bytes.NewReader(data), path)
	if err != nil {
		return nil, err
	}
	return targetsFromRecords(path, recs)
}

// isLegacyLedger reports whether the first record line is an older
// publish.Record (it has "pushed").
func isLegacyLedger(data []byte) bool {
	line, _, _ := bytes.Cut(bytes.TrimSpace(data), []byte("\n"))
	var probe map[string]json.RawMessage
	if json.Unmarshal(line, &probe) != nil {
		return false
	}
	_, ok := probe["pushed"]
	return ok
}

func targetsFromRecords(path string, recs []core.Image) ([]Target, error) {
	var out []Target
	for _, rec := range core.Latest(recs) {
		if rec.Kind != core.KindInstance {
			continue
		}
		t := Target{Instance: rec.InstanceID, Repo: RepoFromID(rec.InstanceID), Platform: rec.Platform.String(), Ref: rec.Ref}
		switch {
		case rec.Status == core.StatusFailed:
			t.Ref = ""
			t.Missing = "failed according to " + path + ": " + rec.Error
		case rec.Ref == "":
			t.Err = fmt.Sprintf("%s: %s %s: no ref, not in a registry", path, rec.InstanceID, rec.Platform)
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
