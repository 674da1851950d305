package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/swebuild/swebuild/builder/spec/spectest"
)

// BenchmarkStartup runs the built swebuild binary as a user does, one
// process per operation: what every command pays before it does anything
// (loading the binary, the runtime, every linked package's init; see
// GODEBUG=inittrace=1 swebuild --version), and a one-log grade on top of
// it. The binary is built here as `make build` builds it
// (scripts/go-build.sh), so the number is the one users get and follows the
// dependency graph of ./cmd/swebuild, not this test binary's.
func BenchmarkStartup(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "swebuild")
	if out, err := exec.Command(filepath.Join("..", "..", "scripts", "go-build.sh"), "", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("scripts/go-build.sh: %v\n%s", err, out)
	}
	run := func(b *testing.B, args ...string) {
		b.Helper()
		for b.Loop() {
			var stderr bytes.Buffer
			cmd := exec.Command(bin, args...)
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				b.Fatalf("swebuild %v: %v\n%s", args, err, stderr.String())
			}
		}
	}
	b.Run("version", func(b *testing.B) { run(b, "--version") })
	b.Run("grade-one-log", func(b *testing.B) {
		// TestGradeCommandReport's marker-era pair, the log copied out of
		// the read-only shared tree.
		shared := spectest.SharedDir(b)
		vexp := filepath.Join(shared, "eval-logs", "Vexp-ai__vexp-swe-bench", "logs", "run_evaluation",
			"vexp-swebench-1774184993333", "vexp-swebench-1774184993333", "django__django-16333")
		dir := b.TempDir()
		for _, f := range []string{"test_output.txt", "patch.diff"} {
			data, err := os.ReadFile(filepath.Join(vexp, f))
			if err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		run(b, "grade", "--dataset", filepath.Join(shared, "datasets", "SWE-bench_Verified", "test.jsonl"),
			"--instance", "django__django-16333", "--log", filepath.Join(dir, "test_output.txt"),
			"--patch", filepath.Join(dir, "patch.diff"), "--grading", "v4.1")
	})
}
