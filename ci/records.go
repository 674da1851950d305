package ci

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Result is what a build shard reports for one (instance, platform): the
// pushed digest and whether the gold patch verified. Shards write these as
// JSON lines; Merge reads them.
//
// Local adapter: the builder's metadata file and publish's ledger are being
// written in parallel. This record carries the fields ci needs from either;
// ReadResults accepts the aliases listed on UnmarshalJSON.
type Result struct {
	InstanceID string `json:"instance_id"`
	Platform   string `json:"platform"`
	// Repository is where the image was pushed (by digest), e.g.
	// "127.0.0.1:5000/swebench/sweb.eval.x86_64.foo_1776_bar-1".
	Repository string `json:"repository,omitempty"`
	Digest     string `json:"digest,omitempty"`
	// Ref is a digest-pinned reference to pull the image from.
	Ref string `json:"ref,omitempty"`
	// SpecKey identifies the build inputs (publish tags with it).
	SpecKey string `json:"spec_key,omitempty"`
	// Verified is true when the gold patch resolved the instance (and the
	// empty-patch control did not).
	Verified bool `json:"verified"`
	// Error says what failed (build, push, verify), empty when nothing did.
	Error string `json:"error,omitempty"`
	// Size is the image size in bytes when known.
	Size int64 `json:"size,omitempty"`

	// Source is "file:line" for messages.
	Source string `json:"-"`
	// verdict is true when the record states a verification verdict
	// (verified/resolved/status), false for "not verified" (null/absent).
	verdict bool
	// other marks a record about something else (a base/env node of a
	// metadata file, an index or blob line of a publish ledger).
	other bool
}

// UnmarshalJSON accepts "id" for instance_id, "image" (repo@digest) for
// repository and digest, "arch" (x86_64/arm64/amd64) for platform and
// "status" ("verified", "published", "ok", "failed", ...) for verified, so
// ledgers written by publish and result lines written here both read.
func (r *Result) UnmarshalJSON(b []byte) error {
	var raw struct {
		InstanceID string `json:"instance_id"`
		ID         string `json:"id"`
		Platform   string `json:"platform"`
		Arch       string `json:"arch"`
		Repository string `json:"repository"`
		Image      string `json:"image"`
		Ref        string `json:"ref"`
		SpecKey    string `json:"spec_key"`
		Kind       string `json:"kind"`
		Node       string `json:"node"`
		Pushed     *bool  `json:"pushed"`
		Digest     string `json:"digest"`
		Verified   *bool  `json:"verified"`
		Resolved   *bool  `json:"resolved"`
		Mode       string `json:"mode"`
		Failure    string `json:"failure"`
		Status     string `json:"status"`
		Error      string `json:"error"`
		Size       int64  `json:"size"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*r = Result{InstanceID: raw.InstanceID, Platform: raw.Platform, Repository: raw.Repository, Digest: raw.Digest, Ref: raw.Ref, SpecKey: raw.SpecKey, Error: raw.Error, Size: raw.Size}
	// A core.Image record (publish's ledger): kind "instance", a status of
	// built/published/failed that says nothing about verification.
	coreRecord := raw.Kind == "instance"
	if coreRecord {
		raw.Status = ""
	}
	if (raw.Kind != "" && raw.Kind != "image" && !coreRecord) || (raw.Node != "" && raw.Node != "instance") || (raw.Mode != "" && raw.Mode != "gold") {
		r.other = true
		return nil
	}
	if raw.Image == "" {
		raw.Image = raw.Ref
	}
	if raw.Image != "" {
		// "repo@sha256:..." or "repo:tag@sha256:..."
		repo, dig, hasDigest := strings.Cut(raw.Image, "@")
		if r.Repository == "" {
			r.Repository = trimTag(repo)
		}
		if r.Digest == "" && hasDigest {
			r.Digest = dig
		}
	}
	if r.InstanceID == "" {
		r.InstanceID = raw.ID
	}
	if r.Platform == "" && raw.Arch != "" {
		p, err := PlatformOfArch(raw.Arch)
		if err != nil {
			return err
		}
		r.Platform = p
	}
	if raw.Failure != "" {
		// a verify summary: "infrastructure_error: grading ...: no log parser"
		r.Error = strings.TrimSuffix("gold "+raw.Failure+": "+r.Error, ": ")
	}
	if raw.Verified == nil {
		raw.Verified = raw.Resolved
	}
	r.verdict = raw.Verified != nil || raw.Status != ""
	switch {
	case raw.Verified != nil:
		r.Verified = *raw.Verified
	case raw.Status != "":
		switch strings.ToLower(raw.Status) {
		case "verified", "published", "ok", "resolved":
			r.Verified = true
		}
		if !r.Verified && r.Error == "" {
			r.Error = "status " + raw.Status
		}
	}
	if raw.Pushed != nil && !*raw.Pushed && r.Error == "" {
		// a publish ledger line for an image that did not reach the registry
		r.Error = "not pushed"
	}
	return nil
}

// trimTag drops a ":tag" suffix (a colon after the last slash).
func trimTag(repo string) string {
	slash := strings.LastIndex(repo, "/")
	if i := strings.LastIndex(repo, ":"); i > slash {
		return repo[:i]
	}
	return repo
}

// OK reports whether the image can go into an index.
func (r Result) OK() bool { return r.Verified && r.Error == "" && r.Digest != "" }

// PlatformOfArch maps upstream arch names and OCI platforms to OCI platforms.
func PlatformOfArch(arch string) (string, error) {
	switch arch {
	case "x86_64", "amd64", PlatformAMD64:
		return PlatformAMD64, nil
	case "arm64", "aarch64", "arm64/v8", PlatformARM64, "linux/arm64/v8":
		return PlatformARM64, nil
	}
	return "", fmt.Errorf("unknown arch %q", arch)
}

// ReadResults reads result lines (JSON lines, or one JSON array) from files
// and directories (every *.jsonl and *.json file below a directory, in name
// order). Bad lines are errors naming file and line; every file is read so
// all errors are reported together.
func ReadResults(paths []string) ([]Result, error) {
	files, err := expandPaths(paths)
	if err != nil {
		return nil, err
	}
	explicit := map[string]bool{}
	for _, p := range paths {
		explicit[p] = true
	}
	var out []Result
	var errs []string
	for _, f := range files {
		rs, ferrs := readResultFile(f, !explicit[f])
		out = append(out, rs...)
		errs = append(errs, ferrs...)
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("reading results:\n  %s", strings.Join(errs, "\n  "))
	}
	return out, nil
}

func expandPaths(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("reading results: %w", err)
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
			if !d.IsDir() && (strings.HasSuffix(path, ".jsonl") || strings.HasSuffix(path, ".json")) {
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

// readResultFile reads one file. found is true for a file met while walking
// a directory: a .json file there that is neither a list of records nor a
// metadata/summary object (a BuildKit or verify artefact) is skipped.
func readResultFile(path string, found bool) ([]Result, []string) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, []string{err.Error()}
	}
	trimmed := bytes.TrimSpace(data)
	listKey := ""
	if len(trimmed) > 0 {
		listKey = recordListKey(trimmed)
	}
	if found && strings.HasSuffix(path, ".json") && listKey == "" && (len(trimmed) == 0 || trimmed[0] != '[') {
		return nil, nil
	}
	if len(trimmed) > 0 && (trimmed[0] == '[' || listKey != "") {
		var rs []Result
		if trimmed[0] == '[' {
			if err := json.Unmarshal(trimmed, &rs); err != nil {
				return nil, []string{fmt.Sprintf("%s: %v", path, err)}
			}
		} else {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(trimmed, &obj); err != nil {
				return nil, []string{fmt.Sprintf("%s: %v", path, err)}
			}
			if err := json.Unmarshal(obj[listKey], &rs); err != nil {
				return nil, []string{fmt.Sprintf("%s: %s: %v", path, listKey, err)}
			}
		}
		var errs []string
		var out []Result
		for i := range rs {
			rs[i].Source = fmt.Sprintf("%s: %s[%d]", path, listKey, i)
			if rs[i].other {
				continue
			}
			if e := checkResult(rs[i]); e != "" {
				errs = append(errs, rs[i].Source+": "+e)
				continue
			}
			out = append(out, rs[i])
		}
		return out, errs
	}
	return parseResultLines(bytes.NewReader(data), path)
}

func parseResultLines(r io.Reader, name string) ([]Result, []string) {
	var out []Result
	var errs []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var res Result
		if err := json.Unmarshal(b, &res); err != nil {
			errs = append(errs, fmt.Sprintf("%s:%d: %v", name, line, err))
			continue
		}
		res.Source = fmt.Sprintf("%s:%d", name, line)
		if res.other {
			continue
		}
		if e := checkResult(res); e != "" {
			errs = append(errs, res.Source+": "+e)
			continue
		}
		out = append(out, res)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Sprintf("%s:%d: %v", name, line, err))
	}
	return out, errs
}

// recordListKey tells a whole-file JSON object holding a list of records
// from one JSON line: "images" for a build metadata file (publish.Metadata),
// "results" for a verify summary; "" otherwise.
func recordListKey(data []byte) string {
	if data[0] != '{' {
		return ""
	}
	var probe struct {
		Images  json.RawMessage `json:"images"`
		Results json.RawMessage `json:"results"`
	}
	if json.Unmarshal(data, &probe) != nil {
		return ""
	}
	switch {
	case len(probe.Images) > 0 && probe.Images[0] == '[':
		return "images"
	case len(probe.Results) > 0 && probe.Results[0] == '[':
		return "results"
	}
	return ""
}

func checkResult(r Result) string {
	switch {
	case r.InstanceID == "":
		return "instance_id: missing"
	case r.Platform == "":
		return "platform: missing"
	case r.Digest != "" && !strings.HasPrefix(r.Digest, "sha256:"):
		return fmt.Sprintf("digest: %q is not a sha256 digest", r.Digest)
	}
	return ""
}

// Latest keeps the last result per (instance, platform), the way a ledger
// appended run after run is read.
func Latest(rs []Result) map[Key]Result {
	out := make(map[Key]Result, len(rs))
	for _, r := range rs {
		out[Key{r.InstanceID, r.Platform}] = r
	}
	return out
}

// Combine folds every record about one image (the builder's metadata entry,
// the verify summary's gold result) into one: the digest and reference of the
// last record that has one, the first error, and verified only when at least
// one record gave a verdict and every verdict was "verified".
func Combine(rs []Result) map[Key]Result {
	out := make(map[Key]Result, len(rs))
	bad := map[Key]bool{}
	for _, r := range rs {
		k := Key{r.InstanceID, r.Platform}
		c, seen := out[k]
		if !seen {
			c = Result{InstanceID: r.InstanceID, Platform: r.Platform, Source: r.Source}
		}
		if r.Digest != "" {
			c.Digest, c.Ref, c.Repository, c.SpecKey, c.Size = r.Digest, r.Ref, r.Repository, r.SpecKey, r.Size
		}
		if c.Error == "" && r.Error != "" {
			c.Error = r.Error
		}
		if r.verdict || r.Verified {
			c.verdict = true
			if !r.Verified {
				bad[k] = true
			}
		}
		c.Verified = c.verdict && !bad[k]
		out[k] = c
	}
	return out
}

// Key names one image: an instance on a platform.
type Key struct {
	InstanceID string
	Platform   string
}
