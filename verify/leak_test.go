package verify

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/internal/gittest"
	"github.com/swebuild/swebuild/internal/stacktest"
)

// leakDumpOf runs the wrapper's leak fragment on the repository dir, as the
// container does on /testbed.
func leakDumpOf(t *testing.T, dir, base string) LeakDump {
	t.Helper()
	out := t.TempDir()
	cmd := exec.Command("bash", "-c", "base="+base+"\nout="+out+"\n"+leakScript())
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	// Like the wrapper, go on whatever the commands exit with: the files
	// tell.
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Logf("leak script: %v\n%s", err, b)
	}
	files := map[string]string{}
	ents, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(out, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = string(b)
	}
	return leakDumpFrom(files)
}

// TestLeakCheckOnFixtureRepos runs the leak check on real repositories: a
// clone of the fixture mirror reset to a base commit still holds the later
// commits and tags; after upstream's setup_repo.sh clean-up and its own
// SWE-bench commit, nothing is found; a later commit by someone else, a tag
// on it, and a future commit only kept by the reflog are found again.
func TestLeakCheckOnFixtureRepos(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	repos := stacktest.SharedRepos(t) // read only: cloned
	commits := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(must(os.ReadFile(filepath.Join(repos.Dir, "calc.commits"))))), "\n") {
		f := strings.Fields(l)
		if len(f) == 2 {
			commits[f[0]] = f[1]
		}
	}
	base := commits["002"]
	if base == "" {
		t.Fatalf("calc.commits has no commit 002: %v", commits)
	}
	dir := filepath.Join(t.TempDir(), "testbed")
	gittest.Run(t, "/", nil, "clone", "-q", "-o", "origin", "--single-branch", repos.Mirror("calc"), dir)
	gittest.Run(t, dir, nil, "reset", "-q", "--hard", base)

	// 1. Straight after the reset: the old main is in the reflog and the
	// remote-tracking branch, the release tags are still there.
	rep, err := CheckLeak(leakDumpOf(t, dir, base))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Commits) == 0 || len(rep.Refs) == 0 || len(rep.Reflog) == 0 {
		t.Fatalf("after reset only: %+v, want newer commits, refs and reflog entries", rep)
	}
	if !hasSuffixIn(rep.Refs, "refs/tags/v1.1.0") {
		t.Errorf("refs %v lack refs/tags/v1.1.0 (tagged after the base commit)", rep.Refs)
	}

	// 2. Upstream's clean-up, then its own commit on top.
	baseTime := strings.TrimSpace(gittest.Run(t, dir, nil, "show", "-s", "--format=%ci", base))
	gittest.Run(t, dir, nil, "remote", "remove", "origin")
	for _, tag := range strings.Fields(gittest.Run(t, dir, nil, "tag", "-l")) {
		c := strings.TrimSpace(gittest.Run(t, dir, nil, "rev-list", "-n", "1", tag))
		if strings.TrimSpace(gittest.Run(t, dir, nil, "show", "-s", "--format=%ci", c)) > baseTime {
			gittest.Run(t, dir, nil, "tag", "-d", tag)
		}
	}
	gittest.Run(t, dir, nil, "reflog", "expire", "--expire=now", "--all")
	gittest.Run(t, dir, nil, "gc", "-q", "--prune=now")
	setup := []string{"GIT_AUTHOR_NAME=SWE-bench", "GIT_AUTHOR_EMAIL=" + SetupCommitEmail, "GIT_COMMITTER_NAME=SWE-bench", "GIT_COMMITTER_EMAIL=" + SetupCommitEmail}
	gittest.Run(t, dir, setup, "commit", "-q", "--allow-empty", "-am", "SWE-bench")
	rep, err = CheckLeak(leakDumpOf(t, dir, base))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Leaked() {
		t.Fatalf("after upstream's clean-up: %s", rep)
	}

	// 3. A later commit by someone else (a future fix) is a leak, and so
	// is a tag on it.
	other := []string{"GIT_AUTHOR_NAME=Dev", "GIT_AUTHOR_EMAIL=dev@example.com", "GIT_COMMITTER_NAME=Dev", "GIT_COMMITTER_EMAIL=dev@example.com"}
	gittest.Run(t, dir, other, "commit", "-q", "--allow-empty", "-m", "the fix")
	future := strings.TrimSpace(gittest.Run(t, dir, nil, "rev-parse", "HEAD"))
	gittest.Run(t, dir, nil, "tag", "v9", future)
	rep, err = CheckLeak(leakDumpOf(t, dir, base))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Commits) != 1 || rep.Commits[0] != future || !hasSuffixIn(rep.Refs, "refs/tags/v9") {
		t.Fatalf("future commit on HEAD: %+v, want commit %s and tag v9", rep, future)
	}

	// 4. Moved away from, it is still in the reflog.
	gittest.Run(t, dir, nil, "tag", "-d", "v9")
	gittest.Run(t, dir, nil, "reset", "-q", "--hard", "HEAD~1")
	rep, err = CheckLeak(leakDumpOf(t, dir, base))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Commits) != 1 || len(rep.Reflog) == 0 {
		t.Fatalf("future commit only in the reflog: %+v, want it and its reflog entries", rep)
	}

	// 5. A base commit the repository does not have cannot be judged.
	if _, err := CheckLeak(leakDumpOf(t, dir, strings.Repeat("0", 40))); err == nil {
		t.Fatal("unknown base commit: no error")
	}
}

func hasSuffixIn(list []string, s string) bool {
	for _, x := range list {
		if strings.HasSuffix(x, s) {
			return true
		}
	}
	return false
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestCheckLeakMalformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    LeakDump
	}{
		{"no base time", LeakDump{BaseTime: "", Errors: "fatal: bad object"}},
		{"bad commit time", LeakDump{BaseTime: "10", Commits: "abc notatime x@y\n"}},
		{"short commit line", LeakDump{BaseTime: "10", Commits: "abc\n"}},
		{"bad ref time", LeakDump{BaseTime: "10", Refs: "refs/tags/x abc zz\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := CheckLeak(tc.d); err == nil {
				t.Fatal("no error")
			}
		})
	}
}
