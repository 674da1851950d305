package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/plan"
	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
)

// TestBuildNodesX86Only plans a real x86-only instance (django__django-10097,
// USE_X86) and a multi-arch one from SWE-bench Verified and checks the
// builder nodes: no arm64 node for the x86-only id whatever --platform says,
// the x86-only env and instance marked X86Only, parents wired by key.
func TestBuildNodesX86Only(t *testing.T) {
	shared := spectest.SharedDir(t)
	for _, platforms := range [][]string{{"linux/amd64", "linux/arm64"}, {"linux/arm64"}} {
		g := genInputs{
			datasetFlags: datasetFlags{dataset: filepath.Join(shared, "datasets", "SWE-bench_Verified", "test.jsonl"), cacheDir: t.TempDir()},
			instances:    []string{"django__django-10097", "django__django-11099"},
			pins:         "none",
		}
		var stderr bytes.Buffer
		r, insts, err := g.load(context.Background(), &stderr)
		if err != nil {
			t.Fatalf("load: %v\n%s", err, stderr.String())
		}
		plats, err := core.ParsePlatforms(platforms)
		if err != nil {
			t.Fatal(err)
		}
		p, err := plan.Build(context.Background(), r, insts, plats)
		if err != nil {
			t.Fatal(err)
		}
		nodes, err := buildNodes(p, insts, nil)
		if err != nil {
			t.Fatal(err)
		}
		byID := map[string]bool{}
		for _, n := range nodes {
			byID[n.ID()] = true
			if n.Platform == "linux/arm64" && strings.Contains(n.Key, "10097") {
				t.Errorf("--platform %v: arm64 node %s for an x86-only instance", platforms, n.ID())
			}
			if n.Kind != "base" && len(n.Parents) != 1 {
				t.Errorf("%s: parents %v", n.ID(), n.Parents)
			}
			if len(n.Dockerfile) == 0 {
				t.Errorf("%s: no Dockerfile", n.ID())
			}
		}
		for _, n := range nodes {
			for _, pk := range n.Parents {
				if !byID[pk+"@"+n.Platform] {
					t.Errorf("%s: parent %s not among the nodes", n.ID(), pk)
				}
			}
			wantX86 := strings.Contains(n.Key, "10097") || n.Key == "sweb.env.py.x86_64.c3979ef1a8e3bd18ed3b97:latest"
			if n.X86Only != wantX86 {
				t.Errorf("%s: X86Only %v, want %v", n.ID(), n.X86Only, wantX86)
			}
			if n.Kind == "instance" && (n.InstanceID == "" || n.BaseCommit == "") {
				t.Errorf("%s: instance id %q base commit %q", n.ID(), n.InstanceID, n.BaseCommit)
			}
			if n.Kind == "env" && string(n.Context["setup_env.sh"]) == "" {
				t.Errorf("%s: no setup_env.sh in context", n.ID())
			}
		}
		want := 8
		if len(platforms) == 1 {
			want = 3
		}
		if len(nodes) != want {
			t.Errorf("--platform %v: %d nodes, want %d", platforms, len(nodes), want)
		}
	}
}

func TestBuildCLIErrors(t *testing.T) {
	shared := spectest.SharedDir(t)
	ds := filepath.Join(shared, "datasets", "SWE-bench_Verified", "test.jsonl")
	t.Setenv("BUILDKIT_HOST", "")
	tests := []struct {
		args      []string
		wantUsage bool
		want      string
	}{
		{args: []string{"--dataset", ds, "--builder", "linux/amd64="}, wantUsage: true, want: "empty address"},
		{args: []string{"--dataset", ds, "--cache-to", "mode=max"}, wantUsage: true, want: "type= is required"},
		{args: []string{"--dataset", ds, "--workers", "0"}, wantUsage: true, want: "--workers 0"},
		{args: []string{"--dataset", ds, "--publish", "127.0.0.1:5000/x"}, wantUsage: true, want: "--publish needs --push"},
		{args: []string{"--instance", "x"}, wantUsage: true, want: "--dataset is required"},
		{args: []string{"--dataset", ds, "--instance", "django__django-11099", "--pins", "none", "--run-dir", t.TempDir()}, want: "no builder"},
		{args: []string{"--dataset", ds, "--instance", "django__django-11099", "--pins", "none", "--run-dir", t.TempDir(), "--progress", "fancy"}, want: `--progress "fancy"`},
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
