package imagediff

import (
	"bytes"
	"github.com/swebuild/swebuild/internal/gittest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gitRepo makes a repository in a new directory with a few files (one in a
// sub-directory, one with a long name), commits them with fixed dates, and
// sets its index version (2, 3 through an intent-to-add entry, or 4).
func gitRepo(t *testing.T, version string) string {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(git, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@b", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@b",
			"GIT_AUTHOR_DATE=@946684800 +0000", "GIT_COMMITTER_DATE=@946684800 +0000")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("init", "-q", "-b", "main")
	for name, body := range map[string]string{"setup.py": "x\n", "src/calc/__init__.py": "", "tests/" + strings.Repeat("long_", 30) + ".py": "y\n"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run("add", ".")
	run("commit", "-q", "-m", "one")
	switch version {
	case "3":
		if err := os.WriteFile(filepath.Join(dir, "new.py"), []byte("z\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		run("add", "-N", "new.py") // intent-to-add: an extended flag
	case "4":
		run("update-index", "--index-version", "4")
	}
	run("status", "--porcelain") // refreshes: real stat data in every entry
	return dir
}

// TestZeroIndexStat: for index versions 2, 3 and 4 written by git itself,
// the zeroed index has ctime, mtime, dev and ino 0 in every entry (as git
// ls-files --debug reads them), git accepts its checksum, git status says
// what it said before, and two checkouts made apart in time and on other
// inodes give the same bytes.
func TestZeroIndexStat(t *testing.T) {
	for _, version := range []string{"2", "3", "4"} {
		t.Run("v"+version, func(t *testing.T) {
			a := gitRepo(t, version)
			time.Sleep(1100 * time.Millisecond) // other ctime/mtime seconds
			b := gitRepo(t, version)
			var zeroed [2][]byte
			for i, dir := range []string{a, b} {
				idx := filepath.Join(dir, ".git", "index")
				data, err := os.ReadFile(idx)
				if err != nil {
					t.Fatal(err)
				}
				if got := string(data[4:8]); got != "\x00\x00\x00"+string(rune(version[0]-'0')) {
					t.Fatalf("index version bytes %q, want %s", got, version)
				}
				before := gittest.Run(t, dir, nil, "status", "--porcelain")
				out, changed, err := zeroIndexStat(data)
				if err != nil {
					t.Fatal(err)
				}
				if !changed {
					t.Fatal("nothing zeroed in a fresh checkout's index")
				}
				if err := os.WriteFile(idx, out, 0o644); err != nil {
					t.Fatal(err)
				}
				debug := gittest.Run(t, dir, nil, "ls-files", "--debug")
				if n := strings.Count(debug, "ctime: 0:0"); n == 0 || n != strings.Count(debug, "mtime: 0:0") || n != strings.Count(debug, "dev: 0\tino: 0") {
					t.Errorf("ls-files --debug after zeroing:\n%s", debug)
				}
				if after := gittest.Run(t, dir, nil, "status", "--porcelain"); after != before {
					t.Errorf("git status changed: %q, was %q", after, before)
				}
				if again, changed, err := zeroIndexStat(out); err != nil || changed || !bytes.Equal(again, out) {
					t.Errorf("zeroing twice: changed %v, err %v", changed, err)
				}
				zeroed[i] = out
			}
			if !bytes.Equal(zeroed[0], zeroed[1]) {
				t.Error("two checkouts of the same commit give different zeroed indexes")
			}
		})
	}
	for _, bad := range [][]byte{nil, []byte("DIRC"), append([]byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x00"), make([]byte, 20)...)} {
		if _, _, err := zeroIndexStat(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
