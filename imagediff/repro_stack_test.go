package imagediff_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/builder/plan"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/imagediff"
	"github.com/swebuild/swebuild/internal/bkdaemon"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/pipeline"
	"github.com/swebuild/swebuild/publication"
	"github.com/swebuild/swebuild/registry"
)

// fixtureNodes plans the layered fixture (every instance) for platforms.
func fixtureNodes(ctx context.Context, t *testing.T, platforms []core.Platform) []*graph.Node {
	t.Helper()
	fx := stacktest.RequireBuildFixture(ctx, t)
	loaded, err := pipeline.Load(ctx, pipeline.Inputs{Dataset: fx.Dataset, Specs: fx.Specs, Pins: "default", CacheDir: t.TempDir(), Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(ctx, loaded.Renderer, loaded.Instances, platforms)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := pipeline.Nodes(p, loaded.Instances, fx.ContextDirs)
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

// reproPlatforms are the platforms TestReproducibleFixture builds:
// $SWEBUILD_REPRO_PLATFORMS (e.g. linux/amd64,linux/arm64), else
// linux/amd64.
func reproPlatforms(t *testing.T) []core.Platform {
	v := os.Getenv("SWEBUILD_REPRO_PLATFORMS")
	if v == "" {
		v = "linux/amd64"
	}
	ps, err := core.ParsePlatforms([]string{v})
	if err != nil {
		t.Fatalf("$SWEBUILD_REPRO_PLATFORMS: %v", err)
	}
	return ps
}

type built struct {
	images  map[string]core.Image // by node id (key on platform)
	elapsed time.Duration
}

// buildOnFreshDaemon builds nodes on a new buildkitd with an empty state
// directory, pushing by digest to repo; bound are Options.Images.
func buildOnFreshDaemon(ctx context.Context, t *testing.T, st stacktest.Stack, name string, nodes []*graph.Node, bound map[string]string, repo string, repro *builder.Reproducible) built {
	t.Helper()
	d := bkdaemon.Start(t, name, bkdaemon.Options{Platforms: []core.Platform{core.AMD64, core.ARM64}, Registries: []string{st.Registry}, MaxParallelism: 2})
	start := time.Now()
	rep, err := builder.Build(ctx, nodes, builder.Options{
		Builders: []builder.BuilderSpec{{Addr: d.Addr}}, Workers: 2, Push: repo, Images: bound,
		RunDir: t.TempDir(), Progress: "quiet", Reproducible: repro,
	})
	if err != nil {
		t.Fatalf("build %s: %v", name, err)
	}
	b := built{images: map[string]core.Image{}, elapsed: time.Since(start)}
	for _, r := range rep.Records() {
		b.images[r.Key+" "+r.Platform.String()] = r
	}
	d.Stop()
	return b
}

// compareRuns compares every image of run x with the same node's image of
// run y: every image manifest must be identical; an image that differs
// fails the test with imagediff's report of every file that differs.
func compareRuns(ctx context.Context, t *testing.T, what string, x, y built) {
	t.Helper()
	same, kinds := 0, map[core.Kind]int{}
	for id, ix := range x.images {
		iy, ok := y.images[id]
		if !ok {
			t.Fatalf("%s: %s built in one run only", what, id)
		}
		if ix.Digest == iy.Digest {
			same++
			kinds[ix.Kind]++
			continue
		}
		r := compare(ctx, t, ix.Ref, iy.Ref)
		var sb strings.Builder
		if err := r.WriteText(&sb); err != nil {
			t.Fatal(err)
		}
		t.Errorf("%s: %s: image manifests differ:\n%s", what, id, sb.String())
	}
	t.Logf("%s: identical image manifests %d/%d (base %d, env %d, instance %d)",
		what, same, len(x.images), kinds[core.KindBase], kinds[core.KindEnv], kinds[core.KindInstance])
}

func compare(ctx context.Context, t *testing.T, refA, refB string) *imagediff.Report {
	t.Helper()
	c, err := registry.New(registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reader := publication.New(c)
	a, err := imagediff.Open(ctx, imagediff.Source{Ref: refA, Reader: reader})
	if err != nil {
		t.Fatal(err)
	}
	b, err := imagediff.Open(ctx, imagediff.Source{Ref: refB, Reader: reader})
	if err != nil {
		t.Fatal(err)
	}
	r, err := imagediff.Compare(ctx, a, b, refA, refB)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestReproducibleFixture (stack): the fixture's base, env and instance
// images built twice in reproducible mode, each time on a new BuildKit
// daemon with its own empty state directory, pushed by digest to
// repositories of this run in the local registry: every base, env and
// instance image manifest is identical, or the test fails with imagediff's
// report of every file that differs (compareRuns). Then the
// nightly's shape: the instances alone, built FROM the first run's env
// images bound by digest, twice more on fresh daemons, the same check, and
// the same images as the whole-graph build's.
// Plain builds (without the mode) between them on fresh daemons give the
// mode's time cost, and imagediff between a plain and a reproducible
// instance image must find file differences and name their causes.
func TestReproducibleFixture(t *testing.T) {
	stacktest.Thorough(t)
	st := stacktest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	platforms := reproPlatforms(t)
	nodes := fixtureNodes(ctx, t, platforms)
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	repo := func(s string) string { return st.Registry + "/swebuild-test/repro-" + run + "-" + s }
	repro := &builder.Reproducible{SourceDateEpoch: builder.DefaultSourceDateEpoch}
	plain := os.Getenv("SWEBUILD_REPRO_SKIP_PLAIN") == ""

	// Plain, reproducible, plain, reproducible: the machine's other load
	// falls on both modes alike.
	var c1, c2 built
	if plain {
		c1 = buildOnFreshDaemon(ctx, t, st, "plain-1", nodes, nil, repo("c1"), nil)
	}
	a := buildOnFreshDaemon(ctx, t, st, "repro-a", nodes, nil, repo("a"), repro)
	if plain {
		c2 = buildOnFreshDaemon(ctx, t, st, "plain-2", nodes, nil, repo("c2"), nil)
	}
	b := buildOnFreshDaemon(ctx, t, st, "repro-b", nodes, nil, repo("b"), repro)
	t.Logf("whole graph, %d nodes (%v), fresh daemons: reproducible %s and %s", len(nodes), platforms, a.elapsed.Round(time.Second), b.elapsed.Round(time.Second))
	if plain {
		t.Logf("whole graph without the mode: %s and %s", c1.elapsed.Round(time.Second), c2.elapsed.Round(time.Second))
	}
	if len(a.images) != len(nodes) {
		t.Errorf("%d images recorded for %d nodes", len(a.images), len(nodes))
	}
	compareRuns(ctx, t, "whole graph", a, b)

	// Instances FROM run a's env images, bound by digest.
	var insts []*graph.Node
	bound := map[string]string{}
	for _, n := range nodes {
		if n.Kind != graph.KindInstance {
			continue
		}
		insts = append(insts, n)
		for _, pk := range n.Parents {
			bound[pk] = a.images[pk+" "+n.Platform.String()].Ref
		}
	}
	var p1 built
	if plain {
		p1 = buildOnFreshDaemon(ctx, t, st, "plain-bound", insts, bound, repo("p1"), nil)
	}
	d := buildOnFreshDaemon(ctx, t, st, "repro-bound-d", insts, bound, repo("d"), repro)
	e := buildOnFreshDaemon(ctx, t, st, "repro-bound-e", insts, bound, repo("e"), repro)
	t.Logf("instances FROM bound env images, %d nodes: reproducible %s and %s", len(insts), d.elapsed.Round(time.Second), e.elapsed.Round(time.Second))
	if plain {
		t.Logf("instances FROM bound env images without the mode: %s", p1.elapsed.Round(time.Second))
	}
	compareRuns(ctx, t, "bound envs", d, e)
	// The same instances from the whole-graph build: the same images.
	aInsts := built{images: map[string]core.Image{}}
	for id, im := range a.images {
		if im.Kind == core.KindInstance {
			aInsts.images[id] = im
		}
	}
	compareRuns(ctx, t, "whole graph vs bound envs", aInsts, d)

	if !plain {
		return
	}
	// The comparer on two images that do differ: an instance built
	// without and with the mode.
	for id, ic := range c1.images {
		if ic.Kind != core.KindInstance || !strings.Contains(id, "calc-1") {
			continue
		}
		r := compare(ctx, t, ic.Ref, a.images[id].Ref)
		var sb strings.Builder
		if err := r.WriteText(&sb); err != nil {
			t.Fatal(err)
		}
		causes := map[string]int{}
		for _, f := range r.Files {
			causes[strings.SplitN(f.Cause, ":", 2)[0]]++
		}
		t.Logf("%s, plain (A) vs reproducible (B): %d files differ; by cause: %v\n%s", id, len(r.Files), causes, sb.String())
		if r.Identical || len(r.Files) == 0 {
			t.Errorf("%s: the plain and the reproducible image show no file difference", id)
		}
	}
}
