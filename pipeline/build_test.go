package pipeline

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
