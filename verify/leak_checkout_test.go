package verify

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/internal/gittest"
)

// checkoutRepo makes a repository with two commits, old and base, each with
// a fixed date, and returns its directory and their hashes.
func checkoutRepo(t *testing.T) (dir, old, base string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "testbed")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	gittest.Run(t, dir, nil, "init", "-q", "-b", "main")
	commit := func(date, content string) string {
		if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		gittest.Run(t, dir, nil, "add", "a.txt")
		gittest.Run(t, dir, devAt(date), "commit", "-q", "-m", content)
		return strings.TrimSpace(gittest.Run(t, dir, nil, "rev-parse", "HEAD"))
	}
	old = commit("2020-01-01T00:00:00Z", "one\n")
	base = commit("2020-02-01T00:00:00Z", "two\n")
	return dir, old, base
}

func devAt(date string) []string {
	return []string{"GIT_AUTHOR_NAME=Dev", "GIT_AUTHOR_EMAIL=dev@example.com", "GIT_COMMITTER_NAME=Dev", "GIT_COMMITTER_EMAIL=dev@example.com",
		"GIT_AUTHOR_DATE=" + date, "GIT_COMMITTER_DATE=" + date}
}

// setupIdentity is upstream setup_repo.sh's committer, committing now.
var setupIdentity = []string{"GIT_AUTHOR_NAME=SWE-bench", "GIT_AUTHOR_EMAIL=" + SetupCommitEmail, "GIT_COMMITTER_NAME=SWE-bench", "GIT_COMMITTER_EMAIL=" + SetupCommitEmail}

// TestCheckoutAtBase runs the wrapper's dump on real repositories in
// different states and checks where the work tree is found.
func TestCheckoutAtBase(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	write := func(t *testing.T, dir, name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		// change alters the repository sitting at base (HEAD = base).
		change func(t *testing.T, dir, old, base string)
		atBase bool
		setup  bool
		// problem, dirty and untracked are substrings / entries expected.
		problem   []string
		dirty     []string
		untracked []string
	}{
		{name: "at base", change: func(t *testing.T, dir, old, base string) {}, atBase: true},
		{name: "base and the setup commit", change: func(t *testing.T, dir, old, base string) {
			gittest.Run(t, dir, setupIdentity, "commit", "-q", "--allow-empty", "-am", "SWE-bench")
		}, atBase: true, setup: true},
		{name: "setup commit and untracked build output", change: func(t *testing.T, dir, old, base string) {
			write(t, dir, "pkg.egg-info/PKG-INFO", "Name: pkg\n")
			gittest.Run(t, dir, setupIdentity, "commit", "-q", "--allow-empty", "-am", "SWE-bench")
		}, atBase: true, setup: true, untracked: []string{"pkg.egg-info/"}},
		{name: "setup commit that changes a file", change: func(t *testing.T, dir, old, base string) {
			write(t, dir, "a.txt", "changed by the install\n")
			gittest.Run(t, dir, setupIdentity, "commit", "-q", "--allow-empty", "-am", "SWE-bench")
		}, problem: []string{"changes the tree"}},
		{name: "someone's commit changing a file", change: func(t *testing.T, dir, old, base string) {
			write(t, dir, "a.txt", "the fix\n")
			gittest.Run(t, dir, devAt("2020-03-01T00:00:00Z"), "commit", "-q", "-am", "the fix")
		}, problem: []string{"changes the tree"}},
		{name: "two commits on base", change: func(t *testing.T, dir, old, base string) {
			gittest.Run(t, dir, setupIdentity, "commit", "-q", "--allow-empty", "-m", "SWE-bench")
			gittest.Run(t, dir, setupIdentity, "commit", "-q", "--allow-empty", "-m", "SWE-bench")
		}, problem: []string{"is neither base_commit"}},
		{name: "modified tracked file", change: func(t *testing.T, dir, old, base string) {
			write(t, dir, "a.txt", "edited\n")
		}, problem: []string{"1 changed tracked file(s) before the patch (HEAD ", " M a.txt"}, dirty: []string{" M a.txt"}},
		{name: "staged new file on the setup commit", change: func(t *testing.T, dir, old, base string) {
			gittest.Run(t, dir, setupIdentity, "commit", "-q", "--allow-empty", "-am", "SWE-bench")
			write(t, dir, "b.txt", "new\n")
			gittest.Run(t, dir, nil, "add", "b.txt")
		}, setup: true, problem: []string{"A  b.txt"}, dirty: []string{"A  b.txt"}},
		{name: "HEAD at an older commit", change: func(t *testing.T, dir, old, base string) {
			gittest.Run(t, dir, nil, "reset", "-q", "--hard", old)
		}, problem: []string{"is neither base_commit", "parents: none"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, old, base := checkoutRepo(t)
			tc.change(t, dir, old, base)
			head := strings.TrimSpace(gittest.Run(t, dir, nil, "rev-parse", "HEAD"))
			rep, err := CheckLeak(leakDumpOf(t, dir, base))
			if err != nil {
				t.Fatal(err)
			}
			c := rep.Checkout
			if c == nil {
				t.Fatal("no checkout in the report")
			}
			if c.AtBase != tc.atBase || rep.AtBase() != tc.atBase || c.SetupCommit != tc.setup || c.Base != base || c.Head != head {
				t.Errorf("checkout %+v, want at_base=%v setup_commit=%v base %s head %s", c, tc.atBase, tc.setup, base, head)
			}
			// A wrong checkout fails the check (the history_leak class).
			if rep.Leaked() == tc.atBase {
				t.Errorf("Leaked()=%v with the checkout at_base=%v: %s", rep.Leaked(), tc.atBase, rep)
			}
			if tc.atBase && c.Problem != "" {
				t.Errorf("at base with problem %q", c.Problem)
			}
			if !tc.atBase {
				if !strings.Contains(rep.String(), "wrong checkout: ") || !strings.Contains(rep.String(), head) {
					t.Errorf("report %q does not name the wrong checkout and HEAD %s", rep, head)
				}
			}
			for _, p := range tc.problem {
				if !strings.Contains(c.Problem, p) {
					t.Errorf("problem %q lacks %q", c.Problem, p)
				}
			}
			if strings.Join(c.Dirty, "|") != strings.Join(tc.dirty, "|") {
				t.Errorf("dirty %q, want %q", c.Dirty, tc.dirty)
			}
			if strings.Join(c.Untracked, "|") != strings.Join(tc.untracked, "|") {
				t.Errorf("untracked %q, want %q", c.Untracked, tc.untracked)
			}
			if len(c.HeadParents) > 0 && c.HeadParents[0] != strings.TrimSpace(gittest.Run(t, dir, nil, "rev-parse", "HEAD^")) {
				t.Errorf("parents %v", c.HeadParents)
			}
		})
	}
}

func TestCheckoutMalformed(t *testing.T) {
	base := "1111111111111111111111111111111111111111 2222222222222222222222222222222222222222"
	for _, tc := range []struct {
		name string
		d    LeakDump
	}{
		{"no HEAD", LeakDump{BaseTime: "10", Base: base, Errors: "fatal: ambiguous argument 'HEAD'"}},
		{"HEAD without tree", LeakDump{BaseTime: "10", Head: "abc\n", Base: base}},
		{"no base line", LeakDump{BaseTime: "10", Head: "abc def\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := CheckLeak(tc.d); err == nil || !strings.Contains(err.Error(), "checkout check") {
				t.Fatalf("error %v, want a checkout check error", err)
			}
		})
	}
}
