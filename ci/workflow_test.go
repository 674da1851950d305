package ci

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// actionlintPath finds actionlint: $ACTIONLINT, the swebuild cache where
// scripts/install-actionlint.sh puts it, then PATH.
func actionlintPath() string {
	if p := os.Getenv("ACTIONLINT"); p != "" {
		return p
	}
	cache := os.Getenv("SWEBUILD_CACHE")
	if cache == "" {
		if home, err := os.UserHomeDir(); err == nil {
			cache = filepath.Join(home, ".cache", "swebuild")
		}
	}
	if cache != "" {
		p := filepath.Join(cache, "bin", "actionlint")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	if p, err := exec.LookPath("actionlint"); err == nil {
		return p
	}
	return ""
}

func workflowFiles(t *testing.T) []string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, pat := range []string{"*.yml", "*.yaml"} {
		m, err := filepath.Glob(filepath.Join(root, ".github", "workflows", pat))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatal("no workflow files under .github/workflows")
	}
	return files
}

// TestActionlint runs actionlint on every workflow. Without actionlint the
// test skips, or fails when CI is set (scripts/install-actionlint.sh).
func TestActionlint(t *testing.T) {
	bin := actionlintPath()
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("actionlint not found: run scripts/install-actionlint.sh (or set ACTIONLINT)")
		}
		t.Skip("actionlint not found: run scripts/install-actionlint.sh")
	}
	files := workflowFiles(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-no-color"}, files...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("actionlint %v: %v\n%s", files, err, out)
	}
}

var (
	usesLine  = regexp.MustCompile(`^\s*(?:-\s+)?uses:\s*(\S+)(.*)$`)
	pinnedRef = regexp.MustCompile(`^[\w.-]+/[\w./-]+@[0-9a-f]{40}$`)
	versionRe = regexp.MustCompile(`^\s*#\s*v\d+(\.\d+)*\s*$`)
)

// TestWorkflowPinsAndPermissions checks every action is pinned to a full
// commit SHA with a version comment, the workflow grants nothing at the top
// level, and secrets are only read through secrets.*.
func TestWorkflowPinsAndPermissions(t *testing.T) {
	for _, f := range workflowFiles(t) {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		line := 0
		topPermissions := false
		for sc.Scan() {
			line++
			text := sc.Text()
			if text == "permissions: {}" {
				topPermissions = true
			}
			if m := usesLine.FindStringSubmatch(text); m != nil {
				if strings.HasPrefix(m[1], "./") {
					continue
				}
				if !pinnedRef.MatchString(m[1]) {
					t.Errorf("%s:%d: %s is not pinned to a full commit SHA", f, line, m[1])
				}
				if !versionRe.MatchString(m[2]) {
					t.Errorf("%s:%d: %s has no version comment (# vX.Y.Z)", f, line, m[1])
				}
			}
			if strings.Contains(text, "TOKEN") && strings.Contains(text, "${{") && !strings.Contains(text, "secrets.") {
				t.Errorf("%s:%d: a token not read through secrets.*: %s", f, line, strings.TrimSpace(text))
			}
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		if !topPermissions {
			t.Errorf("%s: no top-level `permissions: {}` (each job must ask for what it needs)", f)
		}
	}
}
