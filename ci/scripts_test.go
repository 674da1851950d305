package ci

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestBenchFirstDemoWorkdir (issue 20 row 15): scripts/bench-first-demo.sh
// must never remove a fixed shared path. Its default work directory comes from
// mktemp -d, a given WORKDIR that already holds files is refused (and left
// alone), and no rm -rf appears in the script at all.
func TestBenchFirstDemoWorkdir(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "scripts", "bench-first-demo.sh")
	if out, err := exec.Command("bash", "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("bash -n %s: %v\n%s", script, err, out)
	}
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(src), "\n") {
		code, _, _ := strings.Cut(line, "#")
		if regexp.MustCompile(`\brm\s+-[a-zA-Z]*r`).MatchString(code) {
			t.Errorf("%s:%d: recursive rm: %s", script, i+1, strings.TrimSpace(line))
		}
		if strings.Contains(code, "/tmp/") {
			t.Errorf("%s:%d: fixed /tmp path: %s", script, i+1, strings.TrimSpace(line))
		}
	}
	if !regexp.MustCompile(`(?m)^[^#]*mktemp -d`).Match(src) {
		t.Errorf("%s: default work directory not made with mktemp -d", script)
	}

	if t.Failed() {
		// Running a script that may still remove its WORKDIR and go on to
		// a full make demo is not a test.
		return
	}
	// A WORKDIR with files in it is refused before anything else happens,
	// and its files stay.
	dir := t.TempDir()
	keep := filepath.Join(dir, "keep")
	if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script, dir)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("bench-first-demo.sh %s (not empty) succeeded:\n%s", dir, out)
	}
	if !strings.Contains(string(out), "not empty") {
		t.Errorf("refusal does not say why:\n%s", out)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("the non-empty WORKDIR was touched: %v", err)
	}
}
