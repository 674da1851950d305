package dataset

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/dataset/hub"
	"github.com/swebuild/swebuild/dataset/hub/hubtest"
)

func hubClient(t *testing.T, s *hubtest.Server, offline bool) *hub.Client {
	t.Helper()
	c, err := hub.New(hub.Options{Endpoint: s.URL, CacheDir: filepath.Join(t.TempDir(), "hub"), Offline: offline})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestOpenHub reads a split of a hub dataset (the real Lite dev parquet, on
// the stand-in hub) into the same records as the file, with sources naming
// the dataset revision and file.
func TestOpenHub(t *testing.T) {
	path := filepath.Join(refDir(t), "datasets", "SWE-bench_Lite", "dev.parquet")
	dev, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := hubtest.New(t)
	sha := s.Commit("SWE-bench/SWE-bench_Lite", "main", map[string][]byte{"data/dev-00000-of-00001.parquet": dev}, nil)
	got, src, err := Open(context.Background(), "SWE-bench/SWE-bench_Lite:dev", OpenOptions{Hub: hubClient(t, s, false)})
	if err != nil {
		t.Fatal(err)
	}
	want, err := Load(context.Background(), path, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 23 || !equalInstances(withoutSource(got), withoutSource(want)) {
		t.Fatalf("%d records, differing from the file's", len(got))
	}
	uri := "hf://datasets/SWE-bench/SWE-bench_Lite@" + sha + "/data/dev-00000-of-00001.parquet"
	if got[5].Source != uri+":row 5" {
		t.Errorf("source %q", got[5].Source)
	}
	if src.String() != "SWE-bench/SWE-bench_Lite@"+sha+":dev" || !src.FromHub() || len(src.Files) != 1 || src.Files[0] != uri {
		t.Errorf("source %+v", src)
	}
	// A file stays a file.
	_, fsrc, err := Open(context.Background(), path, OpenOptions{Hub: hubClient(t, s, false)})
	if err != nil || fsrc.String() != path || fsrc.FromHub() {
		t.Errorf("file: %+v, %v", fsrc, err)
	}
	// Without a hub client, a name is an error saying what it looks like.
	if _, _, err := Open(context.Background(), "SWE-bench/SWE-bench_Lite:dev", OpenOptions{}); !errors.Is(err, ErrHubDataset) {
		t.Errorf("no hub client: %v", err)
	}
	// A missing file with a dataset extension is never looked up on the hub.
	_, _, err = Open(context.Background(), "SWE-bench/SWE-bench_Lite.jsonl", OpenOptions{Hub: hubClient(t, s, false)})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing .jsonl: %v", err)
	}
	if _, _, err := Open(context.Background(), "a/b/c", OpenOptions{Hub: hubClient(t, s, false)}); err == nil || !strings.Contains(err.Error(), "no such file, and not a hub dataset name") {
		t.Errorf("a/b/c: %v", err)
	}
}

// TestOpenHubCollisionsAcrossFiles: a split in two files whose second file
// repeats an id of the first in another case: the second record is a
// problem naming both files, the other records load.
func TestOpenHubCollisionsAcrossFiles(t *testing.T) {
	a := rec("acme__widget-1", nil) + "\n" + rec("acme__widget-2", nil) + "\n"
	b := rec("ACME__widget-1", nil) + "\n" + rec("acme__widget-3", nil) + "\n"
	s := hubtest.New(t)
	sha := s.Commit("acme/widgets", "main", map[string][]byte{
		"data/test-00000-of-00002.jsonl": []byte(a), "data/test-00001-of-00002.jsonl": []byte(b)}, nil)
	got, _, err := Open(context.Background(), "acme/widgets", OpenOptions{Hub: hubClient(t, s, false)})
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 {
		t.Fatalf("err = %v, want one problem", err)
	}
	base := "hf://datasets/acme/widgets@" + sha + "/data/"
	want := base + `test-00001-of-00002.jsonl:1: field "instance_id": "ACME__widget-1" (this record) and "acme__widget-1" (` + base + "test-00000-of-00002.jsonl:1) get the same image names"
	if p := ve.Problems[0].Error(); !strings.HasPrefix(p, want) {
		t.Errorf("problem %q\nwant prefix %q", p, want)
	}
	if len(got) != 3 {
		t.Errorf("%d records, want 3", len(got))
	}
}

func equalInstances(a, b []core.Instance) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if brief(a[i]) != brief(b[i]) || a[i].Patch != b[i].Patch || a[i].TestPatch != b[i].TestPatch {
			return false
		}
	}
	return true
}
