package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/builder/plan"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/publish"
)

// fixtureContextDir holds the context files the fixture's profiles name
// (empty: nothing here is built).
func fixtureContextDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "mirror"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"rootfs-amd64.tar", "rootfs-arm64.tar", "rootfs-js-amd64.tar", "rootfs-js-arm64.tar"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestEnvNodes: an env job builds the env nodes of its keys with the base
// nodes they build FROM, parents first, once each; a key the plan lacks is
// named.
func TestEnvNodes(t *testing.T) {
	ctx := context.Background()
	l, err := Load(ctx, fixtureInputs(t))
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(ctx, l.Renderer, l.Instances, core.AllPlatforms())
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := Nodes(p, l.Instances, []string{fixtureContextDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	py, js := fixtureEnvKeys(t)
	const bogus = "sweb.env.fixture.x86_64.0000000000000000000000:latest"
	sel, missing := envNodes(nodes, []string{py[core.ARM64], js[core.ARM64], py[core.ARM64], bogus})
	if !slices.Equal(missing, []string{bogus}) {
		t.Errorf("missing %v, want [%s]", missing, bogus)
	}
	var got []string
	seen := map[string]bool{}
	for _, n := range sel {
		if seen[n.ID()] {
			t.Errorf("%s selected twice", n.ID())
		}
		seen[n.ID()] = true
		if n.Platform != core.ARM64 {
			t.Errorf("%s: an arm64 job selected another platform's node", n.ID())
		}
		for _, pk := range n.Parents {
			if !seen[pk+"@"+n.Platform.String()] {
				t.Errorf("%s selected before its parent %s", n.ID(), pk)
			}
		}
		got = append(got, string(n.Kind))
	}
	// Two envs (Python, JS), each with its own base.
	if !slices.Equal(got, []string{string(graph.KindBase), string(graph.KindEnv), string(graph.KindBase), string(graph.KindEnv)}) {
		t.Errorf("selected kinds %v, want base, env, base, env", got)
	}
	if sel[1].Key != py[core.ARM64] || sel[3].Key != js[core.ARM64] {
		t.Errorf("selected envs %s, %s", sel[1].Key, sel[3].Key)
	}
}

// TestBuildEnvsRefused: an env job is one platform, env images are
// neither verified nor published, it needs keys, and a key the dataset's
// plan does not have is refused before anything is built.
func TestBuildEnvsRefused(t *testing.T) {
	ctx := context.Background()
	py, _ := fixtureEnvKeys(t)
	empty := t.TempDir()
	base := BuildOptions{Inputs: fixtureInputs(t), Platforms: []core.Platform{core.AMD64}, ContextDirs: []string{fixtureContextDir(t)}}
	with := func(f func(*BuildOptions)) BuildOptions {
		o := base
		f(&o)
		return o
	}
	for _, tc := range []struct {
		name string
		o    BuildOptions
		keys []string
		want string
	}{
		{"two platforms", with(func(o *BuildOptions) { o.Platforms = core.AllPlatforms() }), []string{py[core.AMD64]}, "env stage: one platform per job, got 2"},
		{"verify", with(func(o *BuildOptions) { o.Verify = &GoldCheckOptions{} }), []string{py[core.AMD64]}, "env images are neither verified nor published"},
		{"publish", with(func(o *BuildOptions) { o.Publish = &publish.RunOptions{} }), []string{py[core.AMD64]}, "env images are neither verified nor published"},
		{"no keys", base, nil, "env stage: no env keys"},
		{"another platform's key", base, []string{py[core.ARM64]}, "env stage: 1 env key(s) not in the plan of the dataset on linux/amd64: [" + py[core.ARM64] + "]"},
		{"a missing dataset", with(func(o *BuildOptions) { o.Dataset = filepath.Join(t.TempDir(), "absent.jsonl") }), []string{py[core.AMD64]}, "absent.jsonl"},
		{"a missing context file", with(func(o *BuildOptions) { o.ContextDirs = []string{empty} }), []string{py[core.AMD64]}, " not found in " + empty + " (scripts/fixture.sh rootfs makes"},
		// Everything checked, the builder refuses its options: nothing
		// was built, so no report.
		{"the builder's options", with(func(o *BuildOptions) { o.Builder.Progress = "fancy" }), []string{py[core.AMD64]}, `progress mode "fancy"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Builder.RunDir = t.TempDir()
			rep, err := BuildEnvs(ctx, tc.o, tc.keys)
			if rep != nil || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("report %v, err = %v; want no report and an error saying %q", rep != nil, err, tc.want)
			}
		})
	}
}
