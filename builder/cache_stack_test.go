package builder_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bkclient "github.com/moby/buildkit/client"

	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/bkdaemon"
	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/pipeline"
)

// venvStep is a RUN of the Python flat prefix only.
const venvStep = `echo "source /opt/testbed/bin/activate" > /root/.bashrc`

// flatNodes renders the fixture's tasks as flat (v5) Dockerfiles for
// linux/amd64, bound to the fixture's rootfs tarballs.
func flatNodes(ctx context.Context, t *testing.T) []*graph.Node {
	t.Helper()
	stacktest.Require(t)
	fx := stacktest.RequireBuildFixture(ctx, t)
	loaded, err := pipeline.Load(ctx, pipeline.Inputs{
		Dataset: fx.Dataset, Specs: fx.Specs, Pins: "default",
		CacheDir: t.TempDir(), Offline: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*graph.Node
	for i := range loaded.Instances {
		inst := &loaded.Instances[i]
		res, err := loaded.Renderer.Render(ctx, inst, core.AMD64)
		if err != nil {
			t.Fatal(err)
		}
		flat, err := res.Flat(inst.ImageAssets)
		if err != nil {
			t.Fatal(err)
		}
		n := &graph.Node{Key: "sweb.flat.x86_64." + strings.ToLower(inst.InstanceID) + ":latest", Kind: graph.KindInstance,
			InstanceID: inst.InstanceID, Platform: core.AMD64, Dockerfile: []byte(flat), ContextFiles: map[string]string{}}
		for _, rn := range res.Nodes() {
			for _, ext := range rn.External {
				for _, d := range fx.ContextDirs {
					if _, err := os.Stat(filepath.Join(d, ext)); err == nil {
						n.ContextFiles[ext] = filepath.Join(d, ext)
					}
				}
			}
		}
		nodes = append(nodes, n)
	}
	return nodes
}

func regCache(t *testing.T, ref string) bkclient.CacheOptionsEntry {
	t.Helper()
	e, err := builder.ParseCacheOption("type=registry,ref=" + ref + ",mode=max,registry.insecure=true")
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// steps sums the Dockerfile steps that completed and the cache hits among
// them over a report's done nodes.
func steps(rep *builder.Report) (ran, cached int) {
	for _, r := range rep.Results {
		ran += r.Outcome.Steps - r.Outcome.CachedSteps
		cached += r.Outcome.CachedSteps
	}
	return ran, cached
}

// TestPoolFlatRegistryCache: the fixture's flat Dockerfiles on two amd64
// daemons with a registry cache: the shared Python prefix is solved on one
// daemon only (the daemons' records), and the same tasks built afterwards
// on a fresh third daemon, one task at a time, find the prefix in the
// registry cache: the venv step never runs there and the first task started
// (nothing in the daemon's own cache yet) reports steps CACHED.
func TestPoolFlatRegistryCache(t *testing.T) {
	stacktest.Thorough(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	nodes := flatNodes(ctx, t)
	reg := regtest.Start(t, regtest.Options{})
	cache := regCache(t, reg.Host+"/cache/flat")
	dopts := bkdaemon.Options{Platforms: []core.Platform{core.AMD64}, Registries: []string{reg.Host}, MaxParallelism: 2}
	a1, a2 := bkdaemon.Start(t, "amd64-1", dopts), bkdaemon.Start(t, "amd64-2", dopts)
	rep, err := builder.Build(ctx, nodes, builder.Options{
		Builders: []builder.BuilderSpec{{Platform: core.AMD64, Addr: a1.Addr}, {Platform: core.AMD64, Addr: a2.Addr}},
		Workers:  2, Progress: "quiet", RunDir: t.TempDir(),
		CacheFrom: []bkclient.CacheOptionsEntry{cache}, CacheTo: []bkclient.CacheOptionsEntry{cache},
	})
	if rep == nil {
		t.Fatal(err)
	}
	t.Logf("%s", summary(t, rep))
	if err != nil {
		t.Fatal(err)
	}
	venv := records(t, venvStep, a1, a2)
	ran, cached := steps(rep)
	t.Logf("run 1 (%d tasks, 2 daemons): shared Python prefix step ran per daemon %v; steps ran %d, cached %d", len(nodes), venv, ran, cached)
	if venv["amd64-1"]+venv["amd64-2"] != 1 {
		t.Errorf("the shared Python prefix step ran %v times, want once in the pool", venv)
	}
	a1.Stop()
	a2.Stop()

	a3 := bkdaemon.Start(t, "amd64-3", dopts)
	defer a3.Stop()
	// The same tasks (a prefix group's cache tag is named by the prefix the
	// group's tasks share), one at a time.
	rep, err = builder.Build(ctx, nodes, builder.Options{
		Builders: []builder.BuilderSpec{{Platform: core.AMD64, Addr: a3.Addr}},
		Workers:  1, Progress: "quiet", RunDir: t.TempDir(),
		CacheFrom: []bkclient.CacheOptionsEntry{cache},
	})
	if rep == nil {
		t.Fatal(err)
	}
	t.Logf("%s", summary(t, rep))
	if err != nil {
		t.Fatal(err)
	}
	venv3 := records(t, venvStep, a3)
	ran, cached = steps(rep)
	first := rep.Results[0].Outcome
	for _, r := range rep.Results {
		if r.Started.Before(rep.Results[0].Started) {
			first = r.Outcome
		}
	}
	t.Logf("run 2 (the same tasks on a fresh daemon, one at a time): venv step ran %d times; steps ran %d, cached %d; the first task started: %d of %d steps cached", venv3["amd64-3"], ran, cached, first.CachedSteps, first.Steps)
	if first.CachedSteps == 0 || venv3["amd64-3"] != 0 {
		t.Errorf("fresh daemon: %d steps cached, venv step ran %d times; want the prefix from the registry cache", cached, venv3["amd64-3"])
	}
}

// TestPoolKillRerunFromCache: two amd64 daemons with a registry cache build
// two fixture instances (two envs); one daemon is killed while it runs an
// instance, the run completes on the other; a rerun of the same nodes on a
// fresh daemon completes from the registry cache: the envs' setup step never
// runs there (its records), and the steps that ran and were cached are
// counted.
func TestPoolKillRerunFromCache(t *testing.T) {
	stacktest.Thorough(t)
	nodes := fixtureNodes(t, []core.Platform{core.AMD64}, "fixture__calc-1", "fixture__semver-1")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	reg := regtest.Start(t, regtest.Options{})
	cache := regCache(t, reg.Host+"/cache/loss")
	dopts := bkdaemon.Options{Platforms: []core.Platform{core.AMD64}, Registries: []string{reg.Host}, MaxParallelism: 2}
	a1, a2 := bkdaemon.Start(t, "amd64-1", dopts), bkdaemon.Start(t, "amd64-2", dopts)
	runDir := t.TempDir()
	stop := onSolve(t, runDir, trigger{a1, "sweb.eval.", "killed", a1.Kill})
	rep, err := builder.Build(ctx, nodes, builder.Options{
		Builders: []builder.BuilderSpec{{Platform: core.AMD64, Addr: a1.Addr}, {Platform: core.AMD64, Addr: a2.Addr}},
		Workers:  2, Progress: "quiet", RunDir: runDir, Push: reg.Host + "/cache-loss/img",
		CacheFrom: []bkclient.CacheOptionsEntry{cache}, CacheTo: []bkclient.CacheOptionsEntry{cache},
		Pool: builder.PoolOptions{DownAfter: 10 * time.Second, ProbeEvery: time.Second},
	})
	killed := stop()
	if rep == nil {
		t.Fatal(err)
	}
	t.Logf("build error: %v\n%s", err, summary(t, rep))
	if len(killed) != 1 {
		t.Fatalf("killed %v; the test needs amd64-1 killed mid-solve", killed)
	}
	if err != nil {
		t.Fatal(err)
	}
	ran, cached := steps(rep)
	t.Logf("run 1 (amd64-1 killed): steps ran %d, cached %d; env setup ran per daemon %v", ran, cached, records(t, envRun, a2))
	a2.Stop()

	a3 := bkdaemon.Start(t, "amd64-3", dopts)
	defer a3.Stop()
	rep, err = builder.Build(ctx, nodes, builder.Options{
		Builders: []builder.BuilderSpec{{Platform: core.AMD64, Addr: a3.Addr}},
		Workers:  2, Progress: "quiet", RunDir: t.TempDir(), Push: reg.Host + "/cache-loss/img",
		CacheFrom: []bkclient.CacheOptionsEntry{cache},
	})
	if rep == nil {
		t.Fatal(err)
	}
	t.Logf("%s", summary(t, rep))
	if err != nil {
		t.Fatal(err)
	}
	ran, cached = steps(rep)
	env3 := records(t, envRun, a3)["amd64-3"]
	t.Logf("rerun on a fresh daemon: steps ran %d, cached %d; env setup step ran %d times", ran, cached, env3)
	if cached == 0 || env3 != 0 {
		t.Errorf("rerun: %d steps cached, env setup ran %d times on the fresh daemon; want the envs from the registry cache", cached, env3)
	}
	for _, r := range rep.Results {
		if r.Status != builder.StatusDone {
			t.Errorf("rerun: %s: %s %v", r.Node.ID(), r.Status, r.Err)
		}
	}
}
