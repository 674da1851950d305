package builder

import (
	"context"
	"sync"
	"testing"

	bkclient "github.com/moby/buildkit/client"
	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/core"
)

// TestCacheSharedOnly: registry cache exports are made by base and env
// nodes and by the lead of a flat prefix group only; imports name the
// chain's base and env tags and the group's tag, never an instance's.
func TestCacheSharedOnly(t *testing.T) {
	base := &graph.Node{Key: "base", Kind: graph.KindBase, Platform: core.AMD64}
	env := &graph.Node{Key: "env", Kind: graph.KindEnv, Platform: core.AMD64, Parents: []string{"base"}}
	inst := &graph.Node{Key: "inst", Kind: graph.KindInstance, InstanceID: "i", Platform: core.AMD64, Parents: []string{"env"}}
	flat := &graph.Node{Key: "flat", Kind: graph.KindInstance, InstanceID: "f", Platform: core.AMD64}
	reg := bkclient.CacheOptionsEntry{Type: "registry", Attrs: map[string]string{"ref": "r:5000/cache", "mode": "max"}}
	local := bkclient.CacheOptionsEntry{Type: "local", Attrs: map[string]string{"dest": "/c"}}
	const group = "prefix:linux/amd64:abc"
	refs := func(es []bkclient.CacheOptionsEntry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Type+" "+e.Attrs["ref"]+e.Attrs["dest"])
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		job    Job
		chain  []*graph.Node
		ex, im []string
	}{
		{"base", Job{Node: base}, []*graph.Node{base},
			[]string{"registry r:5000/cache:" + cacheTag(base), "local /c"},
			[]string{"registry r:5000/cache:" + cacheTag(base), "local /c"}},
		{"env", Job{Node: env}, []*graph.Node{base, env},
			[]string{"registry r:5000/cache:" + cacheTag(env), "local /c"},
			[]string{"registry r:5000/cache:" + cacheTag(base), "registry r:5000/cache:" + cacheTag(env), "local /c"}},
		{"instance on an env", Job{Node: inst}, []*graph.Node{base, env, inst},
			[]string{"local /c"},
			[]string{"registry r:5000/cache:" + cacheTag(base), "registry r:5000/cache:" + cacheTag(env), "local /c"}},
		{"flat alone", Job{Node: flat}, []*graph.Node{flat},
			[]string{"local /c"},
			[]string{"local /c"}},
		{"flat group lead", Job{Node: flat, cacheGroup: group, cacheLead: true}, []*graph.Node{flat},
			[]string{"registry r:5000/cache:" + groupTag(group), "local /c"},
			[]string{"registry r:5000/cache:" + groupTag(group), "local /c"}},
		{"flat group member", Job{Node: flat, cacheGroup: group}, []*graph.Node{flat},
			[]string{"local /c"},
			[]string{"registry r:5000/cache:" + groupTag(group), "local /c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entries := []bkclient.CacheOptionsEntry{reg, local}
			if got := refs(cacheExports(entries, tc.job.Node, tc.job)); !equal(got, tc.ex) {
				t.Errorf("exports %q, want %q", got, tc.ex)
			}
			if got := refs(cacheImports(entries, tc.chain, tc.job.cacheGroup)); !equal(got, tc.im) {
				t.Errorf("imports %q, want %q", got, tc.im)
			}
		})
	}
	if reg.Attrs["ref"] != "r:5000/cache" {
		t.Error("input entry modified")
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// groupSolver records each job's prefix group and whether it leads it.
type groupSolver struct {
	mu   sync.Mutex
	jobs map[string]Job
}

func (g *groupSolver) Solve(ctx context.Context, job Job) (Outcome, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.jobs[job.Node.Key] = job
	return Outcome{}, nil
}

// TestSchedulerCacheLead: flat tasks sharing a RUN prefix get one group and
// exactly one lead; a task sharing nothing gets no group.
func TestSchedulerCacheLead(t *testing.T) {
	mk := func(key, df string) *graph.Node {
		return &graph.Node{Key: key, Kind: graph.KindInstance, InstanceID: key, Platform: core.AMD64, Dockerfile: []byte(df)}
	}
	nodes := []*graph.Node{
		mk("a", "FROM scratch\nRUN install\nRUN task-a\n"),
		mk("b", "FROM scratch\nRUN install\nRUN task-b\n"),
		mk("c", "FROM scratch\nRUN install\nRUN task-c\n"),
		mk("d", "FROM scratch\nRUN other\n"),
	}
	g := &groupSolver{jobs: map[string]Job{}}
	for _, r := range (&scheduler{nodes: nodes, solver: g, workers: 2}).run(context.Background()) {
		if r.Status != StatusDone {
			t.Fatalf("%s: %s %v", r.Node.ID(), r.Status, r.Err)
		}
	}
	group, leads := g.jobs["a"].cacheGroup, 0
	for _, k := range []string{"a", "b", "c"} {
		j := g.jobs[k]
		if j.cacheGroup == "" || j.cacheGroup != group {
			t.Errorf("%s: group %q, want the shared group %q", k, j.cacheGroup, group)
		}
		if j.cacheLead {
			leads++
		}
	}
	if leads != 1 {
		t.Errorf("%d leads in the group, want 1", leads)
	}
	if j := g.jobs["d"]; j.cacheGroup != "" || j.cacheLead {
		t.Errorf("d shares nothing but has group %q lead %v", j.cacheGroup, j.cacheLead)
	}
}
