package dataset

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// refDir returns shared/swebench-reference, which sits beside the
// repository. Without it the test is skipped, or fails when CI is set.
func refDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
	ref := filepath.Join(dir, "..", "shared", "swebench-reference")
	if _, err := os.Stat(ref); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("reference data missing under CI: %v", err)
		}
		t.Skipf("reference data not available: %v", err)
	}
	return ref
}

// fakeKnown is a Known for tests: repo -> versions.
type fakeKnown map[string][]string

func (k fakeKnown) Versions(repo string) ([]string, bool) {
	v, ok := k[repo]
	return v, ok
}

// specsKnown reads the repo/version table of upstream v4.1.0 from
// specs.json (the builder/spec package owns the real one; tests here only
// need its keys).
func specsKnown(t testing.TB) fakeKnown {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(refDir(t), "upstream-v4.1.0", "specs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var specs struct {
		Map map[string]map[string]json.RawMessage `json:"MAP_REPO_VERSION_TO_SPECS"`
	}
	if err := json.Unmarshal(raw, &specs); err != nil {
		t.Fatal(err)
	}
	k := fakeKnown{}
	for repo, versions := range specs.Map {
		for v := range versions {
			k[repo] = append(k[repo], v)
		}
		sort.Strings(k[repo])
	}
	return k
}

// writeFile writes content to a file named name in a fresh temp dir and
// returns its path.
func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPlainRun checks the word-at-a-time scan against a byte loop: every
// kind of attention byte at every offset of a 24-byte buffer (alone and
// with a second one after it), over fills that must not stop the scan,
// from every start.
func TestPlainRun(t *testing.T) {
	slow := func(b []byte, p int) int {
		for p < len(b) && !attention[b[p]] {
			p++
		}
		return p
	}
	stops := []byte{0x00, 0x01, 0x1f, '"', '\\'}
	fills := []byte{'a', 0x20, 0x21, '#', '[', ']', 0x7f, 0x80, 0xa0, 0xdc, 0xff}
	check := func(b []byte) {
		t.Helper()
		for start := 0; start <= len(b); start++ {
			if got, want := plainRun(b, start), slow(b, start); got != want {
				t.Fatalf("plainRun(% x, %d) = %d, want %d", b, start, got, want)
			}
		}
	}
	for _, fill := range fills {
		check(bytes.Repeat([]byte{fill}, 24))
		for _, stop := range stops {
			for at := 0; at < 24; at++ {
				b := bytes.Repeat([]byte{fill}, 24)
				b[at] = stop
				check(b)
				for _, second := range stops {
					for at2 := at + 1; at2 < 24; at2++ {
						b2 := bytes.Clone(b)
						b2[at2] = second
						check(b2)
					}
				}
			}
		}
	}
}
