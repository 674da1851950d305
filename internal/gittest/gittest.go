// Package gittest runs the host's git in tests the same way everywhere: no
// user or system configuration, a fixed identity, and a failure that stops
// the test with git's output.
package gittest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Env is the environment of a test's git: the process's, without the user's
// and the system's git configuration, with a fixed author and committer, and
// extra (KEY=VALUE) last so it wins.
func Env(extra ...string) []string {
	env := append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@b", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@b")
	return append(env, extra...)
}

// Run runs git args in dir with Env(extra...) and returns its combined
// output; a git that fails ends the test.
func Run(t testing.TB, dir string, extra []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = Env(extra...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
