package gittest

import (
	"os/exec"
	"strings"
	"testing"
)

func TestRunUsesTheFixedIdentityAndNoUserConfig(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	Run(t, dir, nil, "init", "-q")
	Run(t, dir, []string{"GIT_COMMITTER_DATE=@946684800 +0000", "GIT_AUTHOR_DATE=@946684800 +0000"}, "commit", "-q", "--allow-empty", "-m", "x")
	got := strings.TrimSpace(Run(t, dir, nil, "log", "-1", "--format=%an <%ae> %ct"))
	if got != "a <a@b> 946684800" {
		t.Errorf("commit made as %q, want the fixed identity at the given date", got)
	}
	// Nothing from a user's or the system's configuration: no user.name.
	cmd := exec.Command("git", "config", "--get", "user.name")
	cmd.Dir = dir
	cmd.Env = Env()
	if out, err := cmd.Output(); err == nil {
		t.Errorf("git config user.name = %q under Env, want none", out)
	}
}
