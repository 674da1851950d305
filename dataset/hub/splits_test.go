package hub

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func files(paths ...string) []RepoFile {
	out := make([]RepoFile, len(paths))
	for i, p := range paths {
		out[i] = RepoFile{Path: p}
	}
	return out
}

// TestSplits: how the files of each split are found, layout by layout, as
// datasets' data_files.py finds them.
func TestSplits(t *testing.T) {
	card := func(s string) []config {
		var raw struct {
			Configs json.RawMessage `json:"configs"`
		}
		if err := json.Unmarshal([]byte(s), &raw); err != nil {
			t.Fatal(err)
		}
		cs, err := parseConfigs(raw.Configs)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	for _, tc := range []struct {
		name    string
		files   []RepoFile
		configs []config
		want    map[string][]string
		err     string
	}{
		{name: "card: split per pattern (the SWE-bench datasets)",
			files:   files("README.md", "data/dev-00000-of-00001.parquet", "data/test-00000-of-00001.parquet"),
			configs: card(`{"configs":[{"config_name":"default","data_files":[{"split":"dev","path":"data/dev-*"},{"split":"test","path":"data/test-*"}]}]}`),
			want:    map[string][]string{"dev": {"data/dev-00000-of-00001.parquet"}, "test": {"data/test-00000-of-00001.parquet"}}},
		{name: "card: a path list, ** and a string",
			files:   files("a/x.jsonl", "a/b/y.jsonl", "z.parquet"),
			configs: card(`{"configs":[{"config_name":"main","default":true,"data_files":[{"split":"test","path":["**/*.jsonl"]}]},{"config_name":"other","data_files":"z.parquet"}]}`),
			want:    map[string][]string{"test": {"a/x.jsonl", "a/b/y.jsonl"}}},
		{name: "card: data_files a string is the train split",
			files:   files("z.parquet"),
			configs: card(`{"configs":[{"config_name":"default","data_files":"z.parquet"}]}`),
			want:    map[string][]string{"train": {"z.parquet"}}},
		{name: "card: a split naming no file is still a split",
			files:   files("data/test-00000-of-00001.parquet"),
			configs: card(`{"configs":[{"config_name":"default","data_files":[{"split":"dev","path":"data/dev-*"},{"split":"test","path":"data/test-*"}]}]}`),
			want:    map[string][]string{"dev": nil, "test": {"data/test-00000-of-00001.parquet"}}},
		{name: "card: two defaults",
			files:   files("a.parquet"),
			configs: card(`{"configs":[{"config_name":"default"},{"config_name":"b","default":true}]}`),
			err:     `several default configs: "default" and "b"`},
		{name: "card: no default",
			files:   files("a.parquet"),
			configs: card(`{"configs":[{"config_name":"a"},{"config_name":"b"}]}`),
			err:     "no default config (configs: a, b)"},
		{name: "sharded names, any split name",
			files: files("README.md", "data/test-00000-of-00002.parquet", "data/test-00001-of-00002.parquet", "data/dev-00000-of-00001.parquet", "data/notes.txt"),
			want:  map[string][]string{"dev": {"data/dev-00000-of-00001.parquet"}, "test": {"data/test-00000-of-00002.parquet", "data/test-00001-of-00002.parquet"}}},
		{name: "parquet conversion layout",
			files: files(".gitattributes", "default/test/0000.parquet", "default/test/0001.parquet", "default/dev/0000.parquet", "other/test/0000.parquet"),
			want:  map[string][]string{"test": {"default/test/0000.parquet", "default/test/0001.parquet"}, "dev": {"default/dev/0000.parquet"}}},
		{name: "parquet conversion, partial split",
			files: files("default/partial-train/0000.parquet"),
			want:  map[string][]string{"partial-train": {"default/partial-train/0000.parquet"}}},
		{name: "keywords in directory names first",
			files: files("dev/a.jsonl", "test-set/b.jsonl", "x/my_eval/c.jsonl", "train.jsonl"),
			want:  map[string][]string{"validation": {"dev/a.jsonl"}, "test": {"test-set/b.jsonl", "x/my_eval/c.jsonl"}}},
		{name: "keywords in file names",
			files: files("swe_test.jsonl", "testing-1.parquet", "latest.json", "dev.jsonl", "contest.jsonl"),
			want:  map[string][]string{"test": {"swe_test.jsonl", "testing-1.parquet"}, "validation": {"dev.jsonl"}}},
		{name: "else train; hidden and ignored files are not data",
			files: files("README.md", ".hidden/a.jsonl", "__pycache__/b.json", "records.jsonl"),
			want:  map[string][]string{"train": {"records.jsonl"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := (&revision{Files: tc.files, Configs: tc.configs}).splits()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			paths := map[string][]string{}
			for s, fs := range got {
				paths[s] = nil
				for _, f := range fs {
					paths[s] = append(paths[s], f.Path)
				}
			}
			if !reflect.DeepEqual(paths, tc.want) {
				t.Errorf("splits %v, want %v", paths, tc.want)
			}
		})
	}
}

func TestParseInfoRefusesUnsafePaths(t *testing.T) {
	const sha = "0123456789abcdef0123456789abcdef01234567"
	for _, p := range []string{"../x.parquet", "/etc/passwd", "a//b", "a/./b", "a\\b", ""} {
		body, _ := json.Marshal(map[string]any{"sha": sha, "siblings": []map[string]any{{"rfilename": p}}})
		if _, err := parseInfo(body); err == nil || !strings.Contains(err.Error(), "not a plain relative path") {
			t.Errorf("%q: %v", p, err)
		}
	}
	if _, err := parseInfo([]byte(`{"sha": "main", "siblings": []}`)); err == nil {
		t.Error("a non-commit sha accepted")
	}
	rev, err := parseInfo([]byte(`{"sha": "` + sha + `", "siblings": [{"rfilename": "b.parquet", "size": 9, "lfs": {"size": 10, "sha256": "ab", "pointerSize": 134}}, {"rfilename": "a.md", "size": 3}]}`))
	if err != nil || !reflect.DeepEqual(rev.Files, []RepoFile{{Path: "a.md", Size: 3}, {Path: "b.parquet", Size: 10, SHA256: "ab"}}) {
		t.Errorf("parseInfo = %+v, %v", rev, err)
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, path string
		want          bool
	}{
		{"data/test-*", "data/test-00000-of-00001.parquet", true},
		{"data/test-*", "data/x/test-0.parquet", false},
		{"**/*.jsonl", "a.jsonl", true},
		{"**/*.jsonl", "a/b/c.jsonl", true},
		{"a/**/c.json", "a/c.json", true},
		{"a/**/c.json", "a/x/y/c.json", true},
		{"a/**/c.json", "b/x/c.json", false},
		{"data/[", "data/[", false},
	} {
		if got := globMatch(tc.pattern, tc.path); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v", tc.pattern, tc.path, got)
		}
	}
}
