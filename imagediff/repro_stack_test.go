package imagediff_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/builder/plan"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/imagediff"
	"github.com/swebuild/swebuild/internal/bkdaemon"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/pipeline"
)

// fixtureNodes plans the layered fixture (every instance) for platforms.
func fixtureNodes(ctx context.Context, t *testing.T, platforms []core.Platform) []*builder.Node {
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
// directory, pushing by digest to repo.
func buildOnFreshDaemon(ctx context.Context, t *testing.T, st stacktest.Stack, name string, nodes []*builder.Node, repo string, repro *builder.Reproducible) built {
	t.Helper()
	d := bkdaemon.Start(t, name, bkdaemon.Options{Platforms: []string{"linux/amd64", "linux/arm64"}, Registries: []string{strings.Split(st.Registry, "/")[0]}, MaxParallelism: 2})
	start := time.Now()
	rep, err := builder.Build(ctx, nodes, builder.Options{
		Builders: []builder.BuilderSpec{{Addr: d.Addr}}, Workers: 2, Push: repo,
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

// TestReproducibleFixture (stack): the fixture's base, env and instance
// images built twice in reproducible mode, each time on a new BuildKit
// daemon with its own empty state directory, pushed by digest to two
// repositories of the local registry: every image manifest digest is the
// same, or the test fails with imagediff's report of every file that
// differs. A third build on a third fresh daemon without the mode gives the
// mode's time cost, and imagediff's report between it and the first shows
// the comparer finding and explaining real differences.
func TestReproducibleFixture(t *testing.T) {
	st := stacktest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	platforms := reproPlatforms(t)
	nodes := fixtureNodes(ctx, t, platforms)
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	repo := func(s string) string { return st.Registry + "/swebuild-test/repro-" + run + "-" + s }
	repro := &builder.Reproducible{SourceDateEpoch: builder.DefaultSourceDateEpoch}

	a := buildOnFreshDaemon(ctx, t, st, "repro-a", nodes, repo("a"), repro)
	b := buildOnFreshDaemon(ctx, t, st, "repro-b", nodes, repo("b"), repro)
	t.Logf("reproducible builds of %d nodes (%v) on fresh daemons: %s and %s", len(nodes), platforms, a.elapsed.Round(time.Second), b.elapsed.Round(time.Second))

	same, kinds := 0, map[core.Kind]int{}
	var differ []string
	for id, ia := range a.images {
		ib, ok := b.images[id]
		if !ok {
			t.Fatalf("%s built in run a, not in run b", id)
		}
		if ia.Digest == ib.Digest {
			same++
			kinds[ia.Kind]++
			continue
		}
		differ = append(differ, id)
		ra, err := imagediff.Open(ctx, imagediff.Source{Ref: ia.Ref})
		if err != nil {
			t.Fatal(err)
		}
		rb, err := imagediff.Open(ctx, imagediff.Source{Ref: ib.Ref})
		if err != nil {
			t.Fatal(err)
		}
		r, err := imagediff.Compare(ctx, ra, rb, ia.Ref, ib.Ref)
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		if err := r.WriteText(&sb); err != nil {
			t.Fatal(err)
		}
		t.Errorf("%s: image manifests differ:\n%s", id, sb.String())
	}
	t.Logf("identical image manifests: %d/%d (base %d, env %d, instance %d)", same, len(a.images), kinds[core.KindBase], kinds[core.KindEnv], kinds[core.KindInstance])
	if len(a.images) != len(nodes) {
		t.Errorf("%d images recorded for %d nodes", len(a.images), len(nodes))
	}

	if os.Getenv("SWEBUILD_REPRO_SKIP_PLAIN") != "" {
		return
	}
	c := buildOnFreshDaemon(ctx, t, st, "plain-c", nodes, repo("c"), nil)
	t.Logf("the same build without the mode on a fresh daemon: %s (reproducible: %s, %s)", c.elapsed.Round(time.Second), a.elapsed.Round(time.Second), b.elapsed.Round(time.Second))
	// The comparer on two images that do differ: the first instance.
	for id, ic := range c.images {
		if ic.Kind != core.KindInstance || !strings.Contains(id, "calc-1") {
			continue
		}
		ia := a.images[id]
		ra, err := imagediff.Open(ctx, imagediff.Source{Ref: ia.Ref})
		if err != nil {
			t.Fatal(err)
		}
		rc, err := imagediff.Open(ctx, imagediff.Source{Ref: ic.Ref})
		if err != nil {
			t.Fatal(err)
		}
		r, err := imagediff.Compare(ctx, rc, ra, ic.Ref, ia.Ref)
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		if err := r.WriteText(&sb); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s, plain (A) vs reproducible (B):\n%s", id, sb.String())
		if r.Identical || len(r.Files) == 0 {
			t.Errorf("%s: the plain and the reproducible image show no file difference", id)
		}
	}
}
