package builder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/core"
)

// fakeSolver records calls and fails the keys listed in fail. It checks that
// every parent finished before its child started.
type fakeSolver struct {
	mu      sync.Mutex
	fail    map[string]bool
	done    map[string]bool
	order   []string
	running int
	peak    int
	delay   time.Duration
	badDeps []string
}

func (f *fakeSolver) Solve(ctx context.Context, job Job) (Outcome, error) {
	f.mu.Lock()
	for _, a := range job.Ancestors {
		if !f.done[a.ID()] {
			f.badDeps = append(f.badDeps, job.Node.ID()+" before "+a.ID())
		}
	}
	f.order = append(f.order, job.Node.ID())
	f.running++
	f.peak = max(f.peak, f.running)
	f.mu.Unlock()

	time.Sleep(f.delay)
	fmt.Fprintf(job.Log, "building %s\n", job.Node.ID())

	f.mu.Lock()
	defer f.mu.Unlock()
	f.running--
	if f.fail[job.Node.Key] {
		return Outcome{}, errors.New("RUN exited with 1")
	}
	f.done[job.Node.ID()] = true
	return Outcome{Digest: "sha256:" + job.Node.Key}, nil
}

func node(key string, kind graph.Kind, platform core.Platform, parents ...string) *graph.Node {
	n := &graph.Node{Key: key, Kind: kind, Platform: platform, Parents: parents, Dockerfile: []byte("FROM scratch\n")}
	if kind == graph.KindInstance {
		n.InstanceID = key
	}
	return n
}

// fixtureGraph: one base per platform, two envs, four instances; env.b is
// x86-only so it has no arm64 node.
func fixtureGraph() []*graph.Node {
	var nodes []*graph.Node
	for _, p := range core.AllPlatforms() {
		nodes = append(nodes, node("base", graph.KindBase, p))
		nodes = append(nodes, node("env.a", graph.KindEnv, p, "base"))
		nodes = append(nodes, node("inst.a1", graph.KindInstance, p, "env.a"), node("inst.a2", graph.KindInstance, p, "env.a"))
	}
	nodes = append(nodes, node("env.b", graph.KindEnv, core.AMD64, "base"))
	nodes = append(nodes, node("inst.b1", graph.KindInstance, core.AMD64, "env.b"), node("inst.b2", graph.KindInstance, core.AMD64, "env.b"))
	return nodes
}

func TestSchedulerStatuses(t *testing.T) {
	tests := []struct {
		name    string
		nodes   []*graph.Node
		fail    []string
		workers int
		want    map[string]string // node ID -> status (all nodes listed)
		wantErr map[string]string // node ID -> substring of its error
	}{
		{
			name:    "all succeed",
			nodes:   fixtureGraph(),
			workers: 3,
			want: map[string]string{
				"base@linux/amd64": "done", "env.a@linux/amd64": "done", "inst.a1@linux/amd64": "done", "inst.a2@linux/amd64": "done",
				"base@linux/arm64": "done", "env.a@linux/arm64": "done", "inst.a1@linux/arm64": "done", "inst.a2@linux/arm64": "done",
				"env.b@linux/amd64": "done", "inst.b1@linux/amd64": "done", "inst.b2@linux/amd64": "done",
			},
		},
		{
			name:    "failing env fails only its own instances",
			nodes:   fixtureGraph(),
			fail:    []string{"env.b"},
			workers: 2,
			want: map[string]string{
				"base@linux/amd64": "done", "env.a@linux/amd64": "done", "inst.a1@linux/amd64": "done", "inst.a2@linux/amd64": "done",
				"base@linux/arm64": "done", "env.a@linux/arm64": "done", "inst.a1@linux/arm64": "done", "inst.a2@linux/arm64": "done",
				"env.b@linux/amd64": "failed", "inst.b1@linux/amd64": "skipped", "inst.b2@linux/amd64": "skipped",
			},
			wantErr: map[string]string{
				"env.b@linux/amd64":   "RUN exited with 1",
				"inst.b1@linux/amd64": "dependency env.b@linux/amd64 failed: RUN exited with 1",
			},
		},
		{
			name:    "failing base skips grandchildren naming the base",
			nodes:   fixtureGraph(),
			fail:    []string{"base"},
			workers: 1,
			want: map[string]string{
				"base@linux/amd64": "failed", "env.a@linux/amd64": "skipped", "inst.a1@linux/amd64": "skipped", "inst.a2@linux/amd64": "skipped",
				"base@linux/arm64": "failed", "env.a@linux/arm64": "skipped", "inst.a1@linux/arm64": "skipped", "inst.a2@linux/arm64": "skipped",
				"env.b@linux/amd64": "skipped", "inst.b1@linux/amd64": "skipped", "inst.b2@linux/amd64": "skipped",
			},
			wantErr: map[string]string{"inst.b2@linux/amd64": "dependency base@linux/amd64 failed"},
		},
		{
			name: "missing parent and x86-only arm64 node fail without building",
			nodes: []*graph.Node{
				node("base", graph.KindBase, core.AMD64),
				node("env", graph.KindEnv, core.AMD64, "nobase"),
				node("inst", graph.KindInstance, core.AMD64, "env"),
				{Key: "x86inst", Kind: graph.KindInstance, InstanceID: "x86inst", Platform: core.ARM64, X86Only: true, Dockerfile: []byte("FROM scratch")},
			},
			workers: 4,
			want: map[string]string{
				"base@linux/amd64": "done", "env@linux/amd64": "failed", "inst@linux/amd64": "skipped",
				"x86inst@linux/arm64": "failed",
			},
			wantErr: map[string]string{
				"env@linux/amd64":     "parent nobase is not in the build graph",
				"x86inst@linux/arm64": "x86-only",
			},
		},
		{
			// Two records whose ids differ only in case get one key
			// (keys lower-case the id): neither may write it. Ids that
			// differ only in case under different keys would get one
			// published name: neither is built either.
			name: "instances claiming one image name",
			nodes: []*graph.Node{
				node("base", graph.KindBase, core.AMD64),
				node("env", graph.KindEnv, core.AMD64, "base"),
				{Key: "sweb.eval.x86_64.a__b-1:latest", Kind: graph.KindInstance, InstanceID: "a__b-1", Platform: core.AMD64, Parents: []string{"env"}, Dockerfile: []byte("FROM env")},
				{Key: "sweb.eval.x86_64.a__b-1:latest", Kind: graph.KindInstance, InstanceID: "A__b-1", Platform: core.AMD64, Parents: []string{"env"}, Dockerfile: []byte("FROM env")},
				{Key: "k.c-1", Kind: graph.KindInstance, InstanceID: "c-1", Platform: core.AMD64, Parents: []string{"env"}, Dockerfile: []byte("FROM env")},
				{Key: "k.C-1", Kind: graph.KindInstance, InstanceID: "C-1", Platform: core.AMD64, Parents: []string{"env"}, Dockerfile: []byte("FROM env")},
				{Key: "k.c-1", Kind: graph.KindInstance, InstanceID: "c-1", Platform: core.ARM64, Dockerfile: []byte("FROM scratch")},
				node("inst", graph.KindInstance, core.AMD64, "env"),
				{Key: "noid", Kind: graph.KindInstance, Platform: core.AMD64, Parents: []string{"env"}, Dockerfile: []byte("FROM env")},
				{Key: "envwithid", Kind: graph.KindEnv, InstanceID: "x", Platform: core.AMD64, Parents: []string{"base"}, Dockerfile: []byte("FROM base")},
			},
			workers: 2,
			want: map[string]string{
				"base@linux/amd64": "done", "env@linux/amd64": "done", "inst@linux/amd64": "done",
				"sweb.eval.x86_64.a__b-1:latest@linux/amd64": "failed",
				"k.c-1@linux/amd64":                          "failed", "k.C-1@linux/amd64": "failed", "k.c-1@linux/arm64": "done",
				"noid@linux/amd64": "failed", "envwithid@linux/amd64": "failed",
			},
			wantErr: map[string]string{
				"sweb.eval.x86_64.a__b-1:latest@linux/amd64": `instances "A__b-1" and "a__b-1" would write one image name (sweb.eval.x86_64.a__b-1:latest on linux/amd64)`,
				"k.C-1@linux/amd64":                          `instances "C-1" and "c-1" would write one image name (k.C-1, k.c-1 on linux/amd64)`,
				"noid@linux/amd64":                           "instance id: empty",
				"envwithid@linux/amd64":                      `instance id: "x" set on a env node`,
			},
		},
		{
			name:    "cycle",
			nodes:   []*graph.Node{node("a", graph.KindEnv, core.AMD64, "b"), node("b", graph.KindEnv, core.AMD64, "a"), node("c", graph.KindBase, core.AMD64)},
			workers: 2,
			want:    map[string]string{"a@linux/amd64": "skipped", "b@linux/amd64": "skipped", "c@linux/amd64": "done"},
			wantErr: map[string]string{"a@linux/amd64": "dependency cycle"},
		},
		{
			name:    "bad kind and no platform",
			nodes:   []*graph.Node{node("a", "weird", core.AMD64), node("b", graph.KindBase, core.Platform{})},
			workers: 1,
			want:    map[string]string{"a@linux/amd64": "failed", "b@": "failed"},
			wantErr: map[string]string{"a@linux/amd64": "kind", "b@": "platform"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeSolver{fail: map[string]bool{}, done: map[string]bool{}, delay: time.Millisecond}
			for _, k := range tt.fail {
				f.fail[k] = true
			}
			s := &scheduler{nodes: tt.nodes, solver: f, workers: tt.workers}
			results := s.run(context.Background())
			if len(results) != len(tt.nodes) {
				t.Fatalf("got %d results for %d nodes", len(results), len(tt.nodes))
			}
			got := map[string]string{}
			for i, r := range results {
				if r.Node != tt.nodes[i] {
					t.Errorf("result %d is for %s, want %s (input order)", i, r.Node.ID(), tt.nodes[i].ID())
				}
				got[r.Node.ID()] = r.Status
				if want, ok := tt.wantErr[r.Node.ID()]; ok && (r.Err == nil || !strings.Contains(r.Err.Error(), want)) {
					t.Errorf("%s: error %v, want it to contain %q", r.Node.ID(), r.Err, want)
				}
				if r.Status == StatusDone && r.Err != nil {
					t.Errorf("%s: done with error %v", r.Node.ID(), r.Err)
				}
				if r.Status != StatusDone && r.Err == nil {
					t.Errorf("%s: %s without an error", r.Node.ID(), r.Status)
				}
			}
			for id, st := range tt.want {
				if got[id] != st {
					t.Errorf("%s: status %q, want %q", id, got[id], st)
				}
			}
			if len(f.badDeps) > 0 {
				t.Errorf("children started before parents: %v", f.badDeps)
			}
			if f.peak > tt.workers {
				t.Errorf("peak concurrency %d > workers %d", f.peak, tt.workers)
			}
			// Skipped and invalid nodes are never handed to the solver.
			for _, id := range f.order {
				if got[id] == StatusSkipped {
					t.Errorf("%s was solved but reported skipped", id)
				}
			}
		})
	}
}

func TestSchedulerRunsInParallel(t *testing.T) {
	// Eight independent bases, four workers and a 50ms solve: four must run
	// at once (a scheduler running them one by one would peak at 1).
	var nodes []*graph.Node
	for i := range 8 {
		nodes = append(nodes, node(fmt.Sprintf("b%d", i), graph.KindBase, core.AMD64))
	}
	f := &fakeSolver{done: map[string]bool{}, delay: 50 * time.Millisecond}
	s := &scheduler{nodes: nodes, solver: f, workers: 4}
	s.run(context.Background())
	if f.peak != 4 {
		t.Errorf("peak concurrency %d, want 4", f.peak)
	}
}

func TestSchedulerAncestorsAndLogs(t *testing.T) {
	nodes := fixtureGraph()
	var mu sync.Mutex
	logs := map[string]*strings.Builder{}
	jobs := map[string][]string{}
	s := &scheduler{
		nodes: nodes,
		solver: solverFunc(func(ctx context.Context, job Job) (Outcome, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, a := range job.Ancestors {
				jobs[job.Node.ID()] = append(jobs[job.Node.ID()], a.ID())
			}
			fmt.Fprint(job.Log, "hello")
			return Outcome{}, nil
		}),
		workers: 2,
		openLog: func(n *graph.Node) (io.WriteCloser, string, error) {
			mu.Lock()
			defer mu.Unlock()
			b := &strings.Builder{}
			logs[n.ID()] = b
			return nopCloser{b}, "/logs/" + n.Key, nil
		},
	}
	results := s.run(context.Background())
	if got, want := jobs["inst.b1@linux/amd64"], []string{"base@linux/amd64", "env.b@linux/amd64"}; !slices.Equal(got, want) {
		t.Errorf("ancestors of inst.b1: %v, want %v", got, want)
	}
	if got := jobs["base@linux/arm64"]; len(got) != 0 {
		t.Errorf("ancestors of base: %v, want none", got)
	}
	for _, r := range results {
		if r.LogPath != "/logs/"+r.Node.Key {
			t.Errorf("%s: log path %q", r.Node.ID(), r.LogPath)
		}
		if l := logs[r.Node.ID()].String(); !strings.HasPrefix(l, "hello") || !strings.Contains(l, "DONE") {
			t.Errorf("%s: log %q", r.Node.ID(), l)
		}
	}
}

func TestSchedulerCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	nodes := fixtureGraph()
	s := &scheduler{
		nodes: nodes,
		solver: solverFunc(func(ctx context.Context, job Job) (Outcome, error) {
			cancel()
			return Outcome{}, ctx.Err()
		}),
		workers: 1,
	}
	for _, r := range s.run(ctx) {
		if r.Status == StatusDone {
			t.Errorf("%s done after cancel", r.Node.ID())
		}
		if r.Err == nil {
			t.Errorf("%s: no error after cancel", r.Node.ID())
		}
	}
}

type solverFunc func(ctx context.Context, job Job) (Outcome, error)

func (f solverFunc) Solve(ctx context.Context, job Job) (Outcome, error) { return f(ctx, job) }

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// Both instances of a colliding pair fail, neither reaches the solver, and
// the error names both ids.
func TestSchedulerInstanceClaimsFailBoth(t *testing.T) {
	nodes := []*graph.Node{
		node("base", graph.KindBase, core.AMD64),
		{Key: "sweb.eval.x86_64.a__b-1:latest", Kind: graph.KindInstance, InstanceID: "a__b-1", Platform: core.AMD64, Parents: []string{"base"}, Dockerfile: []byte("FROM base")},
		{Key: "sweb.eval.x86_64.a__b-1:latest", Kind: graph.KindInstance, InstanceID: "A__b-1", Platform: core.AMD64, Parents: []string{"base"}, Dockerfile: []byte("FROM base")},
	}
	f := &fakeSolver{fail: map[string]bool{}, done: map[string]bool{}}
	results := (&scheduler{nodes: nodes, solver: f, workers: 2}).run(context.Background())
	for _, r := range results[1:] {
		if r.Status != StatusFailed || r.Err == nil || !strings.Contains(r.Err.Error(), `"A__b-1" and "a__b-1"`) {
			t.Errorf("%s (%s): %s %v", r.Node.ID(), r.Node.InstanceID, r.Status, r.Err)
		}
	}
	if !slices.Equal(f.order, []string{"base@linux/amd64"}) {
		t.Errorf("solved %v, want only the base", f.order)
	}
}

// What the metadata file gets after a build with colliding and id-less
// instance nodes: every record reads back through the codec, none has an
// empty instance id, and no two built records share an image name.
func TestClaimsLeaveNoBadRecords(t *testing.T) {
	nodes := []*graph.Node{
		node("sweb.base.py.x86_64:latest", graph.KindBase, core.AMD64),
		{Key: "sweb.eval.x86_64.a__b-1:latest", Kind: graph.KindInstance, InstanceID: "a__b-1", Platform: core.AMD64, Parents: []string{"sweb.base.py.x86_64:latest"}, Dockerfile: []byte("FROM base")},
		{Key: "sweb.eval.x86_64.a__b-1:latest", Kind: graph.KindInstance, InstanceID: "A__b-1", Platform: core.AMD64, Parents: []string{"sweb.base.py.x86_64:latest"}, Dockerfile: []byte("FROM base")},
		{Key: "sweb.eval.x86_64.noid:latest", Kind: graph.KindInstance, Platform: core.AMD64, Parents: []string{"sweb.base.py.x86_64:latest"}, Dockerfile: []byte("FROM base")},
	}
	// The fake solver's digests are not real ones: the base fails too.
	f := &fakeSolver{fail: map[string]bool{"sweb.base.py.x86_64:latest": true}, done: map[string]bool{}}
	r := &Report{Results: (&scheduler{nodes: nodes, solver: f, workers: 2}).run(context.Background())}
	if r.Failed() != 4 {
		t.Errorf("%d failed, want 4", r.Failed())
	}
	path := filepath.Join(t.TempDir(), "md.jsonl")
	if err := core.WriteFile(path, r.Records()); err != nil {
		t.Fatal(err)
	}
	recs, err := core.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, rec := range recs {
		if rec.Kind != core.KindInstance {
			continue
		}
		if rec.InstanceID == "" || rec.OK() {
			t.Errorf("instance record %+v", rec)
		}
		ids = append(ids, rec.InstanceID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"A__b-1", "a__b-1"}) {
		t.Errorf("instance records for %v, want the two colliding ids, failed", ids)
	}
}
