package builder

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/core"
)

func TestContextFingerprint(t *testing.T) {
	dir := t.TempDir()
	tar := filepath.Join(dir, "rootfs.tar")
	mirror := filepath.Join(dir, "mirror")
	if err := os.WriteFile(tar, []byte("rootfs v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(mirror, "objects"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mirror, "objects", "a"), []byte("obj"), 0o644); err != nil {
		t.Fatal(err)
	}
	chain := []*graph.Node{
		{Key: "base", Platform: core.AMD64, ContextFiles: map[string]string{"rootfs.tar": tar}},
		{Key: "inst", Platform: core.AMD64, ContextFiles: map[string]string{"mirror": mirror}},
	}
	fp := func() string {
		t.Helper()
		s, err := contextFingerprint(chain)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	first := fp()
	if again := fp(); again != first {
		t.Fatalf("unchanged files: %s then %s", first, again)
	}
	seen := map[string]string{first: "initial"}
	step := func(name string, change func() error) {
		t.Helper()
		if err := change(); err != nil {
			t.Fatal(err)
		}
		s := fp()
		if prev, ok := seen[s]; ok {
			t.Errorf("%s: fingerprint equals the one after %s", name, prev)
		}
		seen[s] = name
	}
	later := time.Now().Add(time.Hour)
	step("tarball rewritten, same size", func() error {
		if err := os.WriteFile(tar, []byte("rootfs v2"), 0o644); err != nil {
			return err
		}
		return os.Chtimes(tar, later, later)
	})
	step("file added in a directory", func() error {
		return os.WriteFile(filepath.Join(mirror, "objects", "b"), []byte("obj2"), 0o644)
	})
	step("file grown", func() error {
		return os.WriteFile(filepath.Join(mirror, "objects", "a"), []byte("obj-longer"), 0o644)
	})
	step("mode", func() error { return os.Chmod(tar, 0o600) })
	chain[0].ContextFiles = map[string]string{"rootfs.tar": filepath.Join(dir, "missing.tar")}
	if _, err := contextFingerprint(chain); err == nil {
		t.Error("missing context file: no error")
	}
}
