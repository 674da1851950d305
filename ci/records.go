package ci

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/core"
)

// Key names one image: an instance on a platform.
type Key struct {
	InstanceID string
	Platform   string
}

// KeyOf is the key of an instance record.
func KeyOf(r core.Image) Key { return Key{r.InstanceID, r.Platform.String()} }

// Usable reports whether an instance record can go into an index: built or
// published without error, with a digest, and verified.
func Usable(r core.Image) bool { return r.OK() && r.IsVerified() && r.Digest != "" }

// Repository is the repository part of a record's digest-pinned ref.
func Repository(r core.Image) string {
	repo, _, _ := strings.Cut(r.Ref, "@")
	return repo
}

// ReadRecords reads image records (core.Image JSON lines) from files and
// directories: a directory contributes every *.jsonl file below it, in name
// order (shards write their build metadata as meta/<id>.jsonl). Every file
// is read, so all bad lines are reported together (file:line: field:
// message); the good records are returned with the error.
func ReadRecords(paths []string) ([]core.Image, error) {
	files, err := expandPaths(paths)
	if err != nil {
		return nil, err
	}
	var out []core.Image
	var errs []error
	for _, f := range files {
		recs, err := core.ReadFile(f)
		out = append(out, recs...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("reading records:\n%w", err)
	}
	return out, nil
}

func expandPaths(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("reading records: %w", err)
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		var found []string
		err = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(path, ".jsonl") {
				found = append(found, path)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", p, err)
		}
		sort.Strings(found)
		files = append(files, found...)
	}
	return files, nil
}

// Latest keeps the last instance record per (instance, platform), the way a
// ledger appended run after run is read; other kinds are left out.
func Latest(recs []core.Image) map[Key]core.Image {
	out := make(map[Key]core.Image, len(recs))
	for _, r := range recs {
		if r.Kind == core.KindInstance {
			out[KeyOf(r)] = r
		}
	}
	return out
}

// ReadLedger reads a publish ledger; a missing file is an empty ledger.
//
// A ledger written before publish wrote core records (publish.Record lines:
// "kind":"image", "pushed") is converted here, line by line; that reader goes
// away once no such ledger is in use.
func ReadLedger(path string) ([]core.Image, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading ledger: %w", err)
	}
	if !isLegacyLedger(data) {
		return core.Decode(bytes.NewReader(data), path)
	}
	return readLegacyLedger(data, path)
}

func isLegacyLedger(data []byte) bool {
	line, _, _ := bytes.Cut(bytes.TrimSpace(data), []byte("\n"))
	var probe map[string]json.RawMessage
	if json.Unmarshal(line, &probe) != nil {
		return false
	}
	_, ok := probe["pushed"]
	return ok
}

func readLegacyLedger(data []byte, path string) ([]core.Image, error) {
	type legacy struct {
		Time       string `json:"time"`
		Kind       string `json:"kind"`
		InstanceID string `json:"instance_id"`
		Platform   string `json:"platform"`
		Ref        string `json:"ref"`
		Digest     string `json:"digest"`
		Size       int64  `json:"size"`
		MediaType  string `json:"media_type"`
		SpecKey    string `json:"spec_key"`
		Verified   *bool  `json:"verified"`
		Pushed     bool   `json:"pushed"`
		Error      string `json:"error"`
	}
	var out []core.Image
	var errs []error
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), core.MaxLine)
	for n := 1; sc.Scan(); n++ {
		var l legacy
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			errs = append(errs, &core.LineError{File: path, Line: n, Msg: "not a ledger record: " + err.Error()})
			continue
		}
		if l.Kind != "image" {
			continue
		}
		im := core.Image{Kind: core.KindInstance, InstanceID: l.InstanceID, Platform: core.Platform(l.Platform),
			Digest: digest.Digest(l.Digest), Size: l.Size, MediaType: l.MediaType, SpecKey: l.SpecKey,
			Verified: l.Verified, Status: core.StatusPublished, Time: l.Time}
		if l.Ref != "" && l.Digest != "" {
			im.Ref = trimTag(strings.SplitN(l.Ref, "@", 2)[0]) + "@" + l.Digest
		}
		if !l.Pushed || l.Error != "" {
			im.Status, im.Ref, im.Error = core.StatusFailed, "", l.Error
			if im.Error == "" {
				im.Error = "not pushed"
			}
		}
		if err := im.Validate(); err != nil {
			var fe *core.FieldError
			le := &core.LineError{File: path, Line: n, Msg: err.Error()}
			if errors.As(err, &fe) {
				le.Field, le.Msg = fe.Field, fe.Msg
			}
			errs = append(errs, le)
			continue
		}
		out = append(out, im)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("reading %s: %w", path, err))
	}
	return out, errors.Join(errs...)
}

// trimTag drops a ":tag" suffix (a colon after the last slash).
func trimTag(repo string) string {
	slash := strings.LastIndex(repo, "/")
	if i := strings.LastIndex(repo, ":"); i > slash {
		return repo[:i]
	}
	return repo
}
