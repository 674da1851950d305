package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/core"
)

// TestCIContexts: `ci contexts` prints the --build-context of an instance's
// env (pushed by its env job, or reused by the plan), prints nothing for an
// image with no env in the plan, and fails naming the env when its job
// failed; `ci envs` refuses a job the plan does not have before building.
func TestCIContexts(t *testing.T) {
	dir := t.TempDir()
	d := "sha256:" + strings.Repeat("ab", 32)
	plan := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(plan, []byte(`{"platforms":["linux/amd64"],"instances":[
 {"instance_id":"a__a-1","targets":[{"platform":"linux/amd64","action":"build","shard":"amd64-0","env":"sweb.env.py.x86_64.e1:latest"}]},
 {"instance_id":"b__b-1","targets":[{"platform":"linux/amd64","action":"build","shard":"amd64-0","env":"sweb.env.py.x86_64.e2:latest"}]},
 {"instance_id":"c__c-1","targets":[{"platform":"linux/amd64","action":"build","shard":"amd64-1","env":"sweb.env.py.x86_64.e3:latest"}]},
 {"instance_id":"d__d-1","targets":[{"platform":"linux/amd64","action":"build","shard":"amd64-1"}]}],
 "envs":[{"key":"sweb.env.py.x86_64.e1:latest","platform":"linux/amd64","action":"build","shard":"envs-amd64-0"},
 {"key":"sweb.env.py.x86_64.e2:latest","platform":"linux/amd64","action":"existing","ref":"r/build-cache@`+d+`"},
 {"key":"sweb.env.py.x86_64.e3:latest","platform":"linux/amd64","action":"build","shard":"envs-amd64-0"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	envs := filepath.Join(dir, "envs", "envs-amd64-0")
	if err := os.MkdirAll(envs, 0o755); err != nil {
		t.Fatal(err)
	}
	recs := `{"kind":"env","key":"sweb.env.py.x86_64.e1:latest","platform":"linux/amd64","digest":"` + d + `","ref":"r/build-cache@` + d + `","spec_key":"k","status":"built"}` + "\n" +
		`{"kind":"env","key":"sweb.env.py.x86_64.e3:latest","platform":"linux/amd64","spec_key":"k","status":"failed","error":"failed: exit 1"}` + "\n"
	if err := os.WriteFile(filepath.Join(envs, "envs.jsonl"), []byte(recs), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		id     string
		code   int
		stdout string
		stderr string
	}{
		{"a__a-1", 0, "sweb.env.py.x86_64.e1:latest=docker-image://r/build-cache@" + d + "\n", ""},
		{"b__b-1", 0, "sweb.env.py.x86_64.e2:latest=docker-image://r/build-cache@" + d + "\n", ""},
		{"d__d-1", 0, "", ""},
		{"c__c-1", 1, "", "env sweb.env.py.x86_64.e3:latest (linux/amd64) failed in env job envs-amd64-0: failed: exit 1"},
	} {
		var stdout, stderr bytes.Buffer
		code := run([]string{"ci", "contexts", "--plan", plan, "--envs", filepath.Join(dir, "envs"), "--platform", "x86_64", "--instance", tt.id}, &stdout, &stderr)
		if code != tt.code || stdout.String() != tt.stdout || !strings.Contains(stderr.String(), tt.stderr) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", tt.id, code, stdout.String(), stderr.String())
		}
	}
	// The shard's metadata file then says why for `ci merge`.
	failed := filepath.Join(dir, "meta", "c__c-1.jsonl")
	if err := os.MkdirAll(filepath.Dir(failed), 0o755); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"ci", "contexts", "--plan", plan, "--envs", filepath.Join(dir, "envs"), "--platform", "linux/amd64", "--instance", "c__c-1", "--failure-record", failed}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d", code)
	}
	got, err := core.ReadFile(failed)
	if err != nil || len(got) != 1 || got[0].InstanceID != "c__c-1" || got[0].Status != core.StatusFailed || !strings.Contains(got[0].Error, "failed in env job envs-amd64-0") {
		t.Errorf("failure record %+v, %v", got, err)
	}
	code := run([]string{"ci", "envs", "--dataset", filepath.Join(dir, "none.jsonl"), "--plan", plan, "--job", "envs-arm64-0",
		"--push", "127.0.0.1:5000/x", "--metadata-file", filepath.Join(dir, "m.jsonl")}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), `no env job named "envs-arm64-0"`) {
		t.Errorf("ci envs of an unknown job: exit %d, stderr %q", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"ci", "envs", "--plan", plan, "--job", "envs-amd64-0"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "--push is required") {
		t.Errorf("ci envs without --push: exit %d, stderr %q", code, stderr.String())
	}
}
