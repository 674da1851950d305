package stacktest

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTaskRepoIsUpToDate regenerates the fixture task repo (scripts/fixture.sh
// taskrepo) and compares it with testdata/fixture/taskrepo: every file byte
// for byte, except the git bundles, which are compared by their heads (a
// pack's bytes may differ between git versions; the commits may not).
func TestTaskRepoIsUpToDate(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil && os.Getenv(EnvPython) == "" {
		missing(t, "scripts/fixture.sh taskrepo needs /usr/bin/python3: %v", err)
	}
	out := filepath.Join(t.TempDir(), "taskrepo")
	if _, err := RunFixtureScript(context.Background(), "taskrepo", out); err != nil {
		t.Fatal(err)
	}
	committed := filepath.Join(FixtureDir(t), "taskrepo")
	files := func(root string) map[string]bool {
		m := map[string]bool{}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(root, p)
				m[rel] = true
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	got, want := files(out), files(committed)
	for rel := range want {
		if !got[rel] {
			t.Errorf("%s: not made by scripts/fixture.sh taskrepo", rel)
		}
	}
	for rel := range got {
		if !want[rel] {
			t.Errorf("%s: made by scripts/fixture.sh taskrepo but not committed", rel)
			continue
		}
		a, b := filepath.Join(out, rel), filepath.Join(committed, rel)
		if strings.HasSuffix(rel, ".bundle") {
			if ha, hb := bundleHeads(t, a), bundleHeads(t, b); ha != hb {
				t.Errorf("%s: heads %q, committed %q", rel, ha, hb)
			}
			continue
		}
		ba, err := os.ReadFile(a)
		if err != nil {
			t.Fatal(err)
		}
		bb, err := os.ReadFile(b)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ba, bb) {
			t.Errorf("%s differs from what scripts/fixture.sh taskrepo makes; run it and commit", rel)
		}
	}
}

func bundleHeads(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("git", "bundle", "list-heads", path).Output()
	if err != nil {
		t.Fatalf("git bundle list-heads %s: %v", path, err)
	}
	return string(out)
}
