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

// TestCILedgerPushPull: `ci ledger pull` on a repository with no ledger
// warns that the night rebuilds and re-verifies everything and writes
// nothing; after `ci ledger push` the next pull (another state directory)
// gets the same bytes.
func TestCILedgerPushPull(t *testing.T) {
	reg := regtest.InProcess(t)
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	repo := reg.Host + "/swebench/nightly"
	dir := t.TempDir()
	pulled := filepath.Join(dir, "night2", "ledger.jsonl")
	var stdout, stderr bytes.Buffer
	if err := runCI(context.Background(), []string{"ledger", "pull", "--repo", repo, "--file", pulled}, &stdout, &stderr); err != nil {
		t.Fatalf("pull, none yet: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "rebuilds and re-verifies every instance") {
		t.Errorf("a missing ledger is not reported: %q", stderr.String())
	}
	if _, err := os.Stat(pulled); !os.IsNotExist(err) {
		t.Errorf("a missing ledger wrote %s: %v", pulled, err)
	}
	const content = `{"instance_id":"a__b-1"}` + "\n"
	local := filepath.Join(dir, "ledger.jsonl")
	if err := os.WriteFile(local, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	if err := runCI(context.Background(), []string{"ledger", "push", "--repo", repo, "--file", local}, &stdout, &stderr); err != nil {
		t.Fatalf("push: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), repo+":swebuild-ledger@sha256:") {
		t.Errorf("push printed %q", stdout.String())
	}
	if err := runCI(context.Background(), []string{"ledger", "pull", "--repo", repo, "--file", pulled}, &stdout, &stderr); err != nil {
		t.Fatalf("pull: %v\n%s", err, stderr.String())
	}
	if got, err := os.ReadFile(pulled); err != nil || string(got) != content {
		t.Errorf("pulled %q (%v), want %q", got, err, content)
	}
	stderr.Reset()
	if err := runCI(context.Background(), []string{"ledger", "pull", "--file", pulled}, &stdout, &stderr); err == nil || !strings.Contains(stderr.String(), "--repo and --file are required") {
		t.Errorf("pull without --repo: %v %q", err, stderr.String())
	}
}
