package builder

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/swebuild/swebuild/core"
)

// symlinkAt makes link point at target with t as the link's own times.
func symlinkAt(target, link string, t time.Time) error {
	if err := os.Symlink(target, link); err != nil {
		return err
	}
	tv := unix.NsecToTimeval(t.UnixNano())
	return unix.Lutimes(link, []unix.Timeval{tv, tv})
}

// TestFingerprintTree: the hash a context directory's reuse is decided on
// changes with what BuildKit's local transfer compares (a file's size, mode,
// modification time, a symlink's target, a file added) and with nothing else
// (the same tree hashes the same; the content at the same size and time does
// not count, as BuildKit's transfer does not read it).
func TestFingerprintTree(t *testing.T) {
	t0 := time.Date(2024, 1, 8, 10, 0, 0, 0, time.UTC)
	mk := func(t *testing.T) string {
		t.Helper()
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, body := range map[string]string{"a.txt": "alpha", "sub/b.txt": "beta"} {
			p := filepath.Join(root, name)
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(p, t0, t0); err != nil {
				t.Fatal(err)
			}
		}
		if err := symlinkAt("a.txt", filepath.Join(root, "link"), t0); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{"sub", "."} {
			if err := os.Chtimes(filepath.Join(root, d), t0, t0); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	hash := func(t *testing.T, root string) string {
		t.Helper()
		h, err := fingerprintTree(root)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	base := hash(t, mk(t))
	if again := hash(t, mk(t)); again != base {
		t.Fatalf("two identical trees hash differently: %s vs %s", base, again)
	}
	for _, c := range []struct {
		name    string
		change  func(root string) error
		changes bool
	}{
		{"same size and time, other bytes", func(r string) error {
			p := filepath.Join(r, "a.txt")
			if err := os.WriteFile(p, []byte("ALPHA"), 0o644); err != nil {
				return err
			}
			return os.Chtimes(p, t0, t0)
		}, false},
		{"size", func(r string) error {
			p := filepath.Join(r, "a.txt")
			if err := os.WriteFile(p, []byte("alpha!"), 0o644); err != nil {
				return err
			}
			return os.Chtimes(p, t0, t0)
		}, true},
		{"modification time", func(r string) error {
			return os.Chtimes(filepath.Join(r, "sub", "b.txt"), t0, t0.Add(time.Second))
		}, true},
		{"mode", func(r string) error { return os.Chmod(filepath.Join(r, "sub", "b.txt"), 0o755) }, true},
		{"symlink target (same length)", func(r string) error {
			if err := os.Remove(filepath.Join(r, "link")); err != nil {
				return err
			}
			return symlinkAt("z.txt", filepath.Join(r, "link"), t0) // as long as "a.txt": only the target differs
		}, true},
	} {
		root := mk(t)
		if err := c.change(root); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{"sub", "."} { // adding or editing touched the directories
			if err := os.Chtimes(filepath.Join(root, d), t0, t0); err != nil {
				t.Fatal(err)
			}
		}
		if got := hash(t, root) != base; got != c.changes {
			t.Errorf("%s: hash changed %v, want %v", c.name, got, c.changes)
		}
	}
	if _, err := fingerprintTree(filepath.Join(t.TempDir(), "absent")); err == nil {
		t.Error("a missing tree hashed without an error")
	}
}

// TestReadPoolFile: a pool file read from disk, its comments and blank lines
// skipped; a missing file is an error saying what was being read.
func TestReadPoolFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "pool")
	body := "# the x86 node\n\nlinux/amd64=tcp://10.0.0.5:1234\nunix:///run/buildkit/buildkitd.sock\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	specs, err := ReadPoolFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || specs[0].Addr != "tcp://10.0.0.5:1234" || specs[0].Platform != core.AMD64 || !specs[1].Platform.IsZero() || specs[1].Addr != "unix:///run/buildkit/buildkitd.sock" {
		t.Errorf("pool %+v", specs)
	}
	if _, err := ReadPoolFile(filepath.Join(t.TempDir(), "absent")); err == nil || !strings.HasPrefix(err.Error(), "reading pool file: ") {
		t.Errorf("a missing pool file: %v", err)
	}
}
