package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec/spectest"
)

func TestBuildCLIErrors(t *testing.T) {
	shared := spectest.SharedDir(t)
	ds := filepath.Join(shared, "datasets", "SWE-bench_Verified", "test.jsonl")
	t.Setenv("BUILDKIT_HOST", "")
	pool := filepath.Join(t.TempDir(), "pool.txt")
	if err := os.WriteFile(pool, []byte("# two nodes\nlinux/amd64=unix:///run/a.sock\nlinux/amd64=tcp://h:1?tlscert=/c.pem\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args      []string
		wantUsage bool
		want      string
	}{
		{args: []string{"--dataset", ds, "--builder", "linux/amd64="}, wantUsage: true, want: "empty address"},
		{args: []string{"--dataset", ds, "--pool", pool}, wantUsage: true, want: "--pool: " + pool + ":3: builder \"linux/amd64=tcp://h:1?tlscert=/c.pem\": address \"tcp://h:1?tlscert=/c.pem\": tlscert and tlskey go together"},
		{args: []string{"--dataset", ds, "--pool", pool + ".missing"}, wantUsage: true, want: "--pool: reading pool file"},
		{args: []string{"--dataset", ds, "--node-down-after", "0s"}, wantUsage: true, want: "--node-down-after 0s"},
		{args: []string{"--dataset", ds, "--cache-to", "mode=max"}, wantUsage: true, want: "type= is required"},
		{args: []string{"--dataset", ds, "--workers", "0"}, wantUsage: true, want: "--workers 0"},
		{args: []string{"--dataset", ds, "--source-date-epoch", "5"}, wantUsage: true, want: "--source-date-epoch is only used with --reproducible"},
		{args: []string{"--dataset", ds, "--reproducible", "--source-date-epoch", "-1"}, wantUsage: true, want: `--source-date-epoch: "-1" is before 1970`},
		{args: []string{"--dataset", ds, "--build-context", "sweb.base.py.x86_64=oci-layout:///x"}, wantUsage: true, want: "want KEY=docker-image://REF"},
		{args: []string{"--dataset", ds, "--publish", "127.0.0.1:5000/x"}, wantUsage: true, want: "--publish needs --push"},
		{args: []string{"--dataset", ds, "--output", "type=oci"}, wantUsage: true, want: "--output: \"type=oci\": dest= is required"},
		{args: []string{"--dataset", ds, "--output", "out"}, wantUsage: true, want: "--output: \"out\": a bare path"},
		{args: []string{"--dataset", ds, "--output", "type=oci,dest=a", "--output", "type=oci,dest=b"}, wantUsage: true, want: "--output given 2 times"},
		{args: []string{"--dataset", ds, "--until", "instance"}, wantUsage: true, want: `--until "instance": want base or env`},
		{args: []string{"--dataset", ds, "--until", "base", "--verify"}, wantUsage: true, want: "--until base builds no instance images: not with --verify"},
		{args: []string{"--task-repo", "tasks", "--until", "env"}, wantUsage: true, want: "--until env builds no instance images"},
		{args: []string{"--instance", "x"}, wantUsage: true, want: "--dataset is required"},
		{args: []string{"--dataset", ds, "--instance", "django__django-11099", "--pins", "none", "--run-dir", t.TempDir()}, wantUsage: true, want: "no builder"},
		{args: []string{"--dataset", ds, "--instance", "django__django-11099", "--pins", "none", "--run-dir", t.TempDir(), "--progress", "fancy"}, wantUsage: true, want: `--progress "fancy"`},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		err := runBuild(context.Background(), tt.args, &stdout, &stderr)
		if err == nil {
			t.Errorf("%v: no error", tt.args)
			continue
		}
		if got := err == errUsage; got != tt.wantUsage {
			t.Errorf("%v: usage error %v, want %v (%v)", tt.args, got, tt.wantUsage, err)
		}
		if !strings.Contains(err.Error()+stderr.String(), tt.want) {
			t.Errorf("%v: error %v, stderr %q; want %q", tt.args, err, stderr.String(), tt.want)
		}
	}
}
