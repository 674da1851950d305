package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/internal/regtest"
)

// TestCheckCLI runs `swebuild check` on the offline fixture against an
// empty registry (in-process: the registry is not what is tested): every
// reference is a gap (20: 7 indexes, 7 amd64 names, 6 arm64 names,
// fixture__textutil-2 being x86-only), the command fails, and --digests
// still writes one line per instance. The
// all-present and deleted-manifest cases are check's own test
// (TestCheckRealRegistry).
func TestCheckCLI(t *testing.T) {
	reg := regtest.InProcess(t)
	root := filepath.Join("..", "..", "testdata", "fixture")
	digests := filepath.Join(t.TempDir(), "digests.jsonl")
	var stdout, stderr bytes.Buffer
	err := runCheck(context.Background(), []string{"--dataset", filepath.Join(root, "dataset.jsonl"), "--specs", filepath.Join(root, "specs.json"),
		"--repo", reg.Host + "/demo", "--offline", "--cache-dir", t.TempDir(), "--digests", digests}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "20 of 20 images missing") {
		t.Fatalf("err %v; stdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "0/20 images present (7 instances)") ||
		strings.Contains(stdout.String(), "sweb.eval.arm64.fixture_1776_textutil-2") ||
		!strings.Contains(stdout.String(), reg.Host+"/demo/sweb.eval.fixture_1776_textutil-2:latest\tmissing") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
	b, err := os.ReadFile(digests)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n != 7 || !strings.HasPrefix(string(b), `{"instance_id":"fixture__calc-1","platforms":{}}`) {
		t.Errorf("digests file (%d lines):\n%s", n, b)
	}
	if err := runCheck(context.Background(), []string{"--dataset", "x.jsonl"}, &stdout, &stderr); err != errUsage {
		t.Errorf("no --repo: %v", err)
	}
}
