package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCICommands runs matrix -> merge -> summary through the CLI: a shard
// that reports one verified image and one failed gold patch fails the merge
// and the summary names the failed instance.
func TestCICommands(t *testing.T) {
	dir := t.TempDir()
	ids := filepath.Join(dir, "ids.txt")
	if err := os.WriteFile(ids, []byte("good__good-1\nbad__bad-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := filepath.Join(dir, "plan.json")
	ghOut := filepath.Join(dir, "github-output")
	var stdout, stderr bytes.Buffer
	code := run([]string{"ci", "matrix", "--ids", ids, "--platform", "linux/amd64", "--shards", "2", "--plan-out", plan, "--github-output", ghOut}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("ci matrix exit %d: %s", code, stderr.String())
	}
	var m struct {
		Include []struct {
			Name, Platform, IDs string
		} `json:"include"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &m); err != nil {
		t.Fatalf("matrix output: %v\n%s", err, stdout.String())
	}
	if len(m.Include) != 2 || m.Include[0].IDs != "bad__bad-1" || m.Include[1].IDs != "good__good-1" {
		t.Fatalf("matrix %+v", m.Include)
	}
	gh, err := os.ReadFile(ghOut)
	if err != nil || !strings.Contains(string(gh), "\njobs=2\n") || !strings.HasPrefix(string(gh), "matrix={\"include\"") {
		t.Fatalf("github output %q, %v", gh, err)
	}

	shards := filepath.Join(dir, "shards")
	if err := os.MkdirAll(filepath.Join(shards, "amd64-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	d := "sha256:" + strings.Repeat("ab", 32)
	meta := `{"kind":"instance","instance_id":"good__good-1","platform":"linux/amd64","digest":"` + d + `","ref":"r/c@` + d + `","spec_key":"k","verified":true,"status":"built"}` + "\n" +
		`{"kind":"instance","instance_id":"bad__bad-1","platform":"linux/amd64","digest":"` + d + `","ref":"r/c@` + d + `","spec_key":"k","verified":false,"status":"built"}` + "\n"
	if err := os.WriteFile(filepath.Join(shards, "amd64-0", "meta.jsonl"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	merge := filepath.Join(dir, "merge.json")
	pub := filepath.Join(dir, "publish.jsonl")
	stdout.Reset()
	stderr.Reset()
	code = run([]string{"ci", "merge", "--plan", plan, "--results", shards, "--out", merge, "--publish-metadata", pub, "--github-output", ghOut}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stdout.String(), "FAILED bad__bad-1 linux/amd64: gold patch did not verify") {
		t.Fatalf("ci merge exit %d\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
	if gh, _ := os.ReadFile(ghOut); !strings.Contains(string(gh), "indexed=1\nregressed=0\nfailed=1\n") {
		t.Errorf("merge github output %q", gh)
	}
	if b, err := os.ReadFile(pub); err != nil || !strings.Contains(string(b), "good__good-1") || strings.Contains(string(b), "bad__bad-1") {
		t.Errorf("publish metadata %s, %v", b, err)
	}

	summary := filepath.Join(dir, "summary.md")
	stdout.Reset()
	stderr.Reset()
	code = run([]string{"ci", "summary", "--merge", merge, "-o", summary}, &stdout, &stderr)
	b, _ := os.ReadFile(summary)
	if code != 1 || !strings.Contains(string(b), "| `bad__bad-1` | linux/amd64 | amd64-0 | gold patch did not verify |") {
		t.Fatalf("ci summary exit %d, summary:\n%s\nstderr: %s", code, b, stderr.String())
	}

	if code := run([]string{"ci", "matrix"}, &stdout, &stderr); code != 2 {
		t.Errorf("ci matrix without input: exit %d, want 2", code)
	}
}
