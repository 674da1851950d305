package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTaskRepoCLI: plan and render take --task-repo (the fixture's), and
// --task-repo with --dataset is a usage error.
func TestTaskRepoCLI(t *testing.T) {
	repo := filepath.Join("..", "..", "testdata", "fixture", "taskrepo")
	specs := filepath.Join("..", "..", "testdata", "fixture", "specs.json")
	ctx := context.Background()
	var stdout, stderr bytes.Buffer
	if err := runPlan(ctx, []string{"--task-repo", repo, "--specs", specs, "--cache-dir", t.TempDir()}, &stdout, &stderr); err != nil {
		t.Fatalf("plan: %v\n%s", err, stderr.String())
	}
	// the fixture's 5 Python tasks (profile language "fixture") and 2
	// JavaScript ones; no arm64 rule keeps a fixture Dockerfile off arm64
	want := "LANGUAGE  TASKS  LINUX/AMD64  LINUX/ARM64\nfixture   5      5            5\njs        2      2            2\ntotal     7      7            7\n"
	if stdout.String() != want {
		t.Errorf("plan:\n%s\nwant:\n%s", stdout.String(), want)
	}

	out := t.TempDir()
	stdout.Reset()
	if err := runRender(ctx, []string{"--task-repo", repo, "--instance", "fixture__semver-1", "--arch", "all", "--out", out, "--cache-dir", t.TempDir()}, &stdout, &stderr); err != nil {
		t.Fatalf("render: %v\n%s", err, stderr.String())
	}
	for _, arch := range []string{"x86_64", "arm64"} {
		for _, f := range []string{"Dockerfile", "eval.sh"} {
			got, err := os.ReadFile(filepath.Join(out, "fixture__semver-1", arch, f))
			if err != nil {
				t.Fatal(err)
			}
			src, err := os.ReadFile(filepath.Join(repo, "tasks", "fixture__semver-1", f))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, src) { // no arm64 rule changes the fixture's Dockerfile
				t.Errorf("%s/%s differs from the task's", arch, f)
			}
		}
	}

	stderr.Reset()
	err := runPlan(ctx, []string{"--task-repo", repo, "--dataset", "x.jsonl", "--cache-dir", t.TempDir()}, &stdout, &stderr)
	if !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), "--dataset and --task-repo: give one") {
		t.Errorf("both: %v, %s", err, stderr.String())
	}
}
