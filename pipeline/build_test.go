package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/builder/plan"
	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/publish"
)

// TestBuildNodesX86Only plans a real x86-only instance (django__django-10097,
// USE_X86) and a multi-arch one from SWE-bench Verified and checks the
// builder nodes (Nodes): no arm64 node for the x86-only id whatever --platform says,
// the x86-only env and instance marked X86Only, parents wired by key.
func TestBuildNodesX86Only(t *testing.T) {
	shared := spectest.SharedDir(t)
	for _, platforms := range [][]string{{"linux/amd64", "linux/arm64"}, {"linux/arm64"}} {
		var stderr bytes.Buffer
		l, err := Load(context.Background(), Inputs{
			Dataset:   filepath.Join(shared, "datasets", "SWE-bench_Verified", "test.jsonl"),
			CacheDir:  t.TempDir(),
			Instances: []string{"django__django-10097", "django__django-11099"},
			Pins:      "none",
			Log:       &stderr,
		})
		if err != nil {
			t.Fatalf("load: %v\n%s", err, stderr.String())
		}
		r, insts := l.Renderer, l.Instances
		plats, err := core.ParsePlatforms(platforms)
		if err != nil {
			t.Fatal(err)
		}
		p, err := plan.Build(context.Background(), r, insts, plats)
		if err != nil {
			t.Fatal(err)
		}
		nodes, err := Nodes(p, insts, nil)
		if err != nil {
			t.Fatal(err)
		}
		byID := map[string]bool{}
		for _, n := range nodes {
			byID[n.ID()] = true
			if n.Platform == core.ARM64 && strings.Contains(n.Key, "10097") {
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
				if !byID[pk+"@"+n.Platform.String()] {
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

// TestNodesUntil plans the offline fixture for both platforms and keeps
// the nodes up to a kind: its two base images (py and js) per platform, then
// those and the two env images per platform (the Python projects share
// one); every kept node's parents are kept too, so the builder can solve
// them alone.
func TestNodesUntil(t *testing.T) {
	fx := filepath.Join("..", "testdata", "fixture")
	l, err := Load(context.Background(), Inputs{Dataset: filepath.Join(fx, "dataset.jsonl"), Specs: filepath.Join(fx, "specs.json"),
		Pins: "default", CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(context.Background(), l.Renderer, l.Instances, core.AllPlatforms())
	if err != nil {
		t.Fatal(err)
	}
	// The context files the fixture's profiles name, empty: nothing is built.
	ctxDir := t.TempDir()
	if err := os.Mkdir(filepath.Join(ctxDir, "mirror"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"rootfs-amd64.tar", "rootfs-arm64.tar", "rootfs-js-amd64.tar", "rootfs-js-arm64.tar"} {
		if err := os.WriteFile(filepath.Join(ctxDir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	nodes, err := Nodes(p, l.Instances, []string{ctxDir})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		until string
		want  map[graph.Kind]int // kind -> nodes
	}{
		{"", map[graph.Kind]int{"base": 4, "env": 4, "instance": 13}},
		{"base", map[graph.Kind]int{"base": 4}},
		{"env", map[graph.Kind]int{"base": 4, "env": 4}},
	} {
		kept := NodesUntil(nodes, graph.Kind(tc.until))
		got := map[graph.Kind]int{}
		ids := map[string]bool{}
		for _, n := range kept {
			got[n.Kind]++
			ids[n.ID()] = true
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("until %q: %v, want %v", tc.until, got, tc.want)
		}
		for _, n := range kept {
			for _, pk := range n.Parents {
				if !ids[pk+"@"+n.Platform.String()] {
					t.Errorf("until %q: %s kept without its parent %s", tc.until, n.ID(), pk)
				}
			}
		}
	}
}

// TestBuildUntilRefused: Until names base or env, and is refused with what
// needs instance images (a task repo, Verify, Publish) before anything is
// loaded or built.
func TestBuildUntilRefused(t *testing.T) {
	for _, tc := range []struct {
		o    BuildOptions
		want string
	}{
		{BuildOptions{Until: "instance"}, `until "instance": want base or env`},
		{BuildOptions{Until: "base", Inputs: Inputs{TaskRepo: "tasks"}}, "a task repo has only task images"},
		{BuildOptions{Until: "env", Verify: &GoldCheckOptions{}}, "no gold patch to verify"},
		{BuildOptions{Until: "base", Publish: &publish.RunOptions{}}, "nothing to publish"},
	} {
		_, err := Build(context.Background(), tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error saying %q", tc.o.Until, err, tc.want)
		}
	}
}
