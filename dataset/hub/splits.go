package hub

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
)

// RepoFile is one file of a dataset repository at a commit, as the hub's
// revision API lists it with blobs=true.
type RepoFile struct {
	Path   string `json:"path"`
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"` // the LFS object id, for LFS files
}

// revision is what swebuild keeps of the hub's answer for one commit:
// the files and the dataset card's configs. Stored as JSON in the cache.
type revision struct {
	SHA     string     `json:"sha"`
	Files   []RepoFile `json:"files"`
	Configs []config   `json:"configs,omitempty"`
}

// config is one entry of the dataset card's "configs" (README.md YAML,
// which the hub returns as cardData).
type config struct {
	Name      string      `json:"config_name"`
	Default   bool        `json:"default,omitempty"`
	DataFiles []dataFiles `json:"data_files,omitempty"`
}

// dataFiles are the path patterns of one split.
type dataFiles struct {
	Split string   `json:"split"`
	Paths []string `json:"paths"`
}

// apiInfo is the part of GET /api/datasets/{name}/revision/{rev}?blobs=true
// swebuild reads (huggingface_hub: DatasetInfo, RepoSibling, BlobLfsInfo).
type apiInfo struct {
	SHA      string `json:"sha"`
	Siblings []struct {
		RFilename string `json:"rfilename"`
		Size      *int64 `json:"size"`
		LFS       *struct {
			Size   int64  `json:"size"`
			SHA256 string `json:"sha256"`
		} `json:"lfs"`
	} `json:"siblings"`
	CardData struct {
		Configs json.RawMessage `json:"configs"`
	} `json:"cardData"`
}

// parseInfo turns the API's answer into a revision, refusing file paths
// that are not plain relative paths (they become paths in the cache).
func parseInfo(body []byte) (*revision, error) {
	var a apiInfo
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if !isCommit(a.SHA) {
		return nil, fmt.Errorf("the answer names no commit (sha %q)", a.SHA)
	}
	rev := &revision{SHA: a.SHA}
	for _, s := range a.Siblings {
		if !safeRepoPath(s.RFilename) {
			return nil, fmt.Errorf("the answer lists a file named %q, which is not a plain relative path", s.RFilename)
		}
		f := RepoFile{Path: s.RFilename}
		if s.Size != nil {
			f.Size = *s.Size
		}
		if s.LFS != nil {
			f.Size, f.SHA256 = s.LFS.Size, s.LFS.SHA256
		}
		rev.Files = append(rev.Files, f)
	}
	sort.Slice(rev.Files, func(i, j int) bool { return rev.Files[i].Path < rev.Files[j].Path })
	if len(a.CardData.Configs) > 0 && string(a.CardData.Configs) != "null" {
		cs, err := parseConfigs(a.CardData.Configs)
		if err != nil {
			return nil, fmt.Errorf("the dataset card's configs: %w", err)
		}
		rev.Configs = cs
	}
	return rev, nil
}

// safeRepoPath reports whether p is a clean relative path without ".."
// (or "." or empty) components.
func safeRepoPath(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\\\x00") {
		return false
	}
	for _, part := range strings.Split(p, "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
	}
	return true
}

// parseConfigs reads the card's configs in the forms datasets accepts
// (MetadataConfigs): data_files a string, a list of strings (both the
// "train" split), or a list of {split, path} where path is a string or a
// list.
func parseConfigs(raw json.RawMessage) ([]config, error) {
	var entries []struct {
		Name      string          `json:"config_name"`
		Default   bool            `json:"default"`
		DataFiles json.RawMessage `json:"data_files"`
	}
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("not a list of configs: %w", err)
	}
	var out []config
	for i, e := range entries {
		if e.Name == "" {
			return nil, fmt.Errorf("config %d has no config_name", i)
		}
		c := config{Name: e.Name, Default: e.Default}
		if len(e.DataFiles) > 0 && string(e.DataFiles) != "null" {
			df, err := parseDataFiles(e.DataFiles)
			if err != nil {
				return nil, fmt.Errorf("config %q: data_files: %w", e.Name, err)
			}
			c.DataFiles = df
		}
		out = append(out, c)
	}
	return out, nil
}

func parseDataFiles(raw json.RawMessage) ([]dataFiles, error) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []dataFiles{{Split: "train", Paths: []string{one}}}, nil
	}
	var strs []string
	if json.Unmarshal(raw, &strs) == nil {
		return []dataFiles{{Split: "train", Paths: strs}}, nil
	}
	var items []struct {
		Split string          `json:"split"`
		Path  json.RawMessage `json:"path"`
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("want a string, a list of strings or a list of {split, path}")
	}
	var out []dataFiles
	for _, it := range items {
		if !splitName().MatchString(it.Split) {
			return nil, fmt.Errorf("split %q is not a split name", it.Split)
		}
		d := dataFiles{Split: it.Split}
		if json.Unmarshal(it.Path, &one) == nil {
			d.Paths = []string{one}
		} else if json.Unmarshal(it.Path, &strs) == nil {
			d.Paths = strs
		} else {
			return nil, fmt.Errorf("split %q: path is neither a string nor a list of strings", it.Split)
		}
		out = append(out, d)
	}
	return out, nil
}

// readable reports whether swebuild's loader reads files like p.
func readable(p string) bool {
	for _, ext := range []string{".parquet", ".jsonl", ".json"} {
		if strings.HasSuffix(strings.ToLower(p), ext) {
			return true
		}
	}
	return false
}

// ignored are the files datasets never takes as data (data_files.py,
// FILES_TO_IGNORE), besides hidden ones.
var ignored = map[string]bool{"README.md": true, "config.json": true, "dataset_info.json": true,
	"dataset_infos.json": true, "dummy_data.zip": true, "dataset_dict.json": true}

// dataCandidates are the files the default patterns look at: not ignored,
// not hidden (no component starting with '.' or "__").
func dataCandidates(files []RepoFile) []RepoFile {
	var out []RepoFile
	for _, f := range files {
		if ignored[path.Base(f.Path)] {
			continue
		}
		hidden := false
		for _, part := range strings.Split(f.Path, "/") {
			if strings.HasPrefix(part, ".") || strings.HasPrefix(part, "__") {
				hidden = true
			}
		}
		if !hidden {
			out = append(out, f)
		}
	}
	return out
}

var (
	// shardedSplit is datasets' SPLIT_PATTERN_SHARDED,
	// "data/{split}-[0-9]{5}-of-[0-9]{5}*.*", the layout push_to_hub writes
	// (every SWE-bench dataset has it).
	shardedSplit = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^data/(\w+(?:\.\w+)*)-[0-9]{5}-of-[0-9]{5}[^/]*\.[^/]+$`)
	})
	// convertedSplit is the layout of the hub's parquet conversion branch
	// (refs/convert/parquet): {config}/{split}/{NNNN}.parquet, or
	// {config}/partial-{split}/... when only part of a large split was
	// converted.
	convertedSplit = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^([^/]+)/(partial-)?(\w+(?:\.\w+)*)/[0-9]{4}\.parquet$`)
	})
)

// splitKeywords are datasets' SPLIT_KEYWORDS: names in file or directory
// names that put a file in a split when no pattern above applies.
var splitKeywords = []struct {
	split    string
	keywords []string
}{
	{"train", []string{"train", "training"}},
	{"validation", []string{"validation", "valid", "dev", "val"}},
	{"test", []string{"test", "testing", "eval", "evaluation"}},
}

// splits returns the data files of every split of rev, the way datasets
// finds them (data_files.py), in this order: the default config of the
// dataset card; the sharded layout data/{split}-NNNNN-of-NNNNN.*; the
// parquet conversion layout; split keywords in directory names, then in
// file names; else every file is "train".
func (rev *revision) splits() (map[string][]RepoFile, error) {
	if len(rev.Configs) > 0 {
		def, err := rev.defaultConfig()
		if err != nil {
			return nil, err
		}
		if len(def.DataFiles) > 0 {
			return def.splits(rev.Files), nil
		}
	}
	files := dataCandidates(rev.Files)
	for _, layout := range []func([]RepoFile) (map[string][]RepoFile, error){shardedSplits, convertedSplits, keywordSplits} {
		if out, err := layout(files); err != nil || len(out) > 0 {
			return out, err
		}
	}
	out := map[string][]RepoFile{}
	if len(files) > 0 {
		out["train"] = files
	}
	return out, nil
}

// defaultConfig is the dataset card's default config: the only one, the one
// named "default" or the one marked default.
func (rev *revision) defaultConfig() (*config, error) {
	var def *config
	for i := range rev.Configs {
		c := &rev.Configs[i]
		if len(rev.Configs) == 1 || c.Name == "default" || c.Default {
			if def != nil {
				return nil, fmt.Errorf("the dataset card has several default configs: %q and %q", def.Name, c.Name)
			}
			def = c
		}
	}
	if def == nil {
		var names []string
		for _, c := range rev.Configs {
			names = append(names, c.Name)
		}
		return nil, fmt.Errorf("the dataset card has no default config (configs: %s)", strings.Join(names, ", "))
	}
	return def, nil
}

// splits are the files of each split the config's data_files name; a split
// whose patterns match no file is there with none.
func (c *config) splits(files []RepoFile) map[string][]RepoFile {
	out := map[string][]RepoFile{}
	for _, df := range c.DataFiles {
		for _, f := range files {
			for _, p := range df.Paths {
				if globMatch(strings.TrimPrefix(p, "./"), f.Path) {
					out[df.Split] = append(out[df.Split], f)
					break
				}
			}
		}
		if _, ok := out[df.Split]; !ok {
			out[df.Split] = nil // named by the card, but no file matches
		}
	}
	return out
}

// shardedSplits are the splits of the layout data/{split}-NNNNN-of-NNNNN.*.
func shardedSplits(files []RepoFile) (map[string][]RepoFile, error) {
	out := map[string][]RepoFile{}
	for _, f := range files {
		if m := shardedSplit().FindStringSubmatch(f.Path); m != nil {
			out[m[1]] = append(out[m[1]], f)
		}
	}
	return out, nil
}

// convertedSplits are the splits of the parquet conversion's layout, of its
// "default" config or its only one.
func convertedSplits(files []RepoFile) (map[string][]RepoFile, error) {
	configs := map[string]bool{}
	for _, f := range files {
		if m := convertedSplit().FindStringSubmatch(f.Path); m != nil {
			configs[m[1]] = true
		}
	}
	if len(configs) == 0 {
		return nil, nil
	}
	cfg := "default"
	if !configs[cfg] {
		if len(configs) > 1 {
			names := slices.Sorted(maps.Keys(configs))
			return nil, fmt.Errorf("the parquet conversion has several configs and none is \"default\" (%s)", strings.Join(names, ", "))
		}
		for c := range configs {
			cfg = c
		}
	}
	out := map[string][]RepoFile{}
	for _, f := range files {
		if m := convertedSplit().FindStringSubmatch(f.Path); m != nil && m[1] == cfg {
			out[m[2]+m[3]] = append(out[m[2]+m[3]], f)
		}
	}
	return out, nil
}

// keywordSplits are the splits split keywords give, in directory names
// first, then in file names.
func keywordSplits(files []RepoFile) (map[string][]RepoFile, error) {
	out := map[string][]RepoFile{}
	for _, inDir := range []bool{true, false} {
		for _, sk := range splitKeywords {
			for _, f := range files {
				if keywordMatch(f.Path, sk.keywords, inDir) {
					out[sk.split] = append(out[sk.split], f)
				}
			}
		}
		if len(out) > 0 {
			return out, nil
		}
	}
	return out, nil
}

// nonWord reports whether c is one of datasets' NON_WORDS_CHARS, "-._ 0-9".
func nonWord(c byte) bool {
	return c == '-' || c == '.' || c == '_' || c == ' ' || '0' <= c && c <= '9'
}

// keywordMatch is datasets' KEYWORDS_IN_DIR_NAME_BASE_PATTERNS (inDir:
// some directory is the keyword, starts with it, ends with it, or holds it,
// always set off by a non-word character) or
// KEYWORDS_IN_FILENAME_BASE_PATTERNS (the file name starts with the keyword
// or holds it, followed by a non-word character).
func keywordMatch(p string, keywords []string, inDir bool) bool {
	parts := strings.Split(p, "/")
	if inDir {
		parts = parts[:len(parts)-1]
	} else {
		parts = parts[len(parts)-1:]
	}
	for _, part := range parts {
		for _, kw := range keywords {
			for i := 0; i+len(kw) <= len(part); i++ {
				if part[i:i+len(kw)] != kw {
					continue
				}
				before := i == 0 || nonWord(part[i-1])
				end := i + len(kw)
				var after bool
				if inDir {
					after = end == len(part) || nonWord(part[end])
				} else {
					after = end < len(part) && nonWord(part[end])
				}
				if before && after {
					return true
				}
			}
		}
	}
	return false
}

// globMatch matches a data_files pattern against a repository path: path.Match
// per component, and "**" for any number of components.
func globMatch(pattern, p string) bool {
	return globParts(strings.Split(pattern, "/"), strings.Split(p, "/"))
}

func globParts(pat, parts []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(parts); i++ {
				if globParts(pat[1:], parts[i:]) {
					return true
				}
			}
			return false
		}
		if len(parts) == 0 {
			return false
		}
		if ok, err := path.Match(pat[0], parts[0]); err != nil || !ok {
			return false
		}
		pat, parts = pat[1:], parts[1:]
	}
	return len(parts) == 0
}

// splitNames lists the splits of m, sorted.
func splitNames(m map[string][]RepoFile) []string {
	names := make([]string, 0, len(m))
	for s := range m {
		names = append(names, s)
	}
	sort.Strings(names)
	return names
}
