package pipeline

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/builder/plan"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/stacktest"
)

// fixtureBases builds the layered fixture's base images (Debian rootfs
// tarballs, py and js flavours) for both platforms, pushes them by digest to
// the stack's registry and returns them as the named contexts the fixture
// task repo's Dockerfiles start FROM: swebuild-fixture-base-<py|js>-<arch>.
func fixtureBases(t *testing.T, ctx context.Context, st stacktest.Stack) map[string]string {
	t.Helper()
	fx := stacktest.RequireBuildFixture(ctx, t)
	loaded, err := Load(ctx, Inputs{Dataset: fx.Dataset, Specs: fx.Specs, Pins: "default", CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(ctx, loaded.Renderer, loaded.Instances, core.AllPlatforms())
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := Nodes(p, loaded.Instances, fx.ContextDirs)
	if err != nil {
		t.Fatal(err)
	}
	var bases []*graph.Node
	for _, n := range nodes {
		if n.Kind == graph.KindBase {
			bases = append(bases, n)
		}
	}
	rep, err := builder.Build(ctx, bases, builder.Options{Builders: []builder.BuilderSpec{{Addr: st.BuildkitHost}}, Workers: 2,
		Push: st.Registry + "/swebuild-test/taskrepo-base", RunDir: t.TempDir(), Progress: "quiet"})
	if err != nil {
		t.Fatalf("building the fixture bases: %v", err)
	}
	images := map[string]string{}
	for _, r := range rep.Records() {
		// sweb.base.fixture.<arch> is the py flavour, sweb.base.js.<arch> the js one
		flavour := map[string]string{"fixture": "py", "js": "js"}[strings.Split(r.Key, ".")[2]]
		images[fmt.Sprintf("swebuild-fixture-base-%s-%s", flavour, r.Platform.GOARCH())] = r.Ref
	}
	if len(images) != 4 {
		t.Fatalf("base images %v, want py and js for amd64 and arm64", images)
	}
	return images
}

// fixtureTaskRepoInputs are the inputs of a build of the fixture task repo
// (testdata/fixture/taskrepo with the fixture's specs and default pins).
func fixtureTaskRepoInputs(t *testing.T) Inputs {
	t.Helper()
	root, err := stacktest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	fx := filepath.Join(root, "testdata", "fixture")
	return Inputs{TaskRepo: filepath.Join(fx, "taskrepo"), Specs: filepath.Join(fx, "specs.json"), Pins: "default", CacheDir: t.TempDir()}
}

// TestBuildFixtureTaskRepo builds the fixture task repo (testdata/fixture/
// taskrepo, scripts/fixture.sh taskrepo) on the stack for linux/amd64 and
// linux/arm64 (QEMU), each task's flat Dockerfile with its task directory as
// the context and the fixture bases bound by digest, verifies every gold
// patch inside the build with the task's own eval.sh and log parser, and
// pushes by digest: 7 tasks on amd64 and the 6 not x86-only on arm64, all built,
// verified and pushed.
func TestBuildFixtureTaskRepo(t *testing.T) {
	stacktest.Thorough(t)
	st := stacktest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	images := fixtureBases(t, ctx, st)

	var out strings.Builder
	res, err := Build(ctx, BuildOptions{
		Inputs:    fixtureTaskRepoInputs(t),
		Platforms: core.AllPlatforms(),
		Builder: builder.Options{Builders: []builder.BuilderSpec{{Addr: st.BuildkitHost}}, Workers: 2, Images: images,
			Push: st.Registry + "/swebuild-test/taskrepo", RunDir: t.TempDir(), Progress: "quiet"},
		Verify: &GoldCheckOptions{Progress: io.Discard},
		Out:    &out,
	})
	t.Logf("%s", out.String())
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if len(res.Plan.Records) != 7 {
		t.Fatalf("%d tasks planned, want the fixture's 7", len(res.Plan.Records))
	}
	built := map[string]bool{}
	for _, r := range res.Records {
		if r.Kind != core.KindInstance || r.Status != core.StatusBuilt || !strings.HasPrefix(r.Ref, st.Registry+"/swebuild-test/taskrepo@sha256:") || r.Verified == nil || !*r.Verified {
			t.Errorf("%s %s: status %s, ref %q, verified %v", r.InstanceID, r.Platform, r.Status, r.Ref, r.Verified)
			continue
		}
		built[r.InstanceID+"@"+r.Platform.String()] = true
	}
	// fixture__textutil-2 is x86-only (task.yaml's x86_only, as specs.json's
	// x86_only list keeps it off arm64 on the dataset path): no arm64 image.
	for _, pr := range res.Plan.Records {
		for _, p := range core.AllPlatforms() {
			want := pr.InstanceID != fixtureX86Only || p == core.AMD64
			if built[pr.InstanceID+"@"+p.String()] != want {
				t.Errorf("%s: verified %s image built %v, want %v", pr.InstanceID, p, !want, want)
			}
		}
	}
	resolved := 0
	for _, r := range res.Gold.Summary().Results {
		if r.Resolved {
			resolved++
		}
	}
	if resolved != 13 {
		t.Errorf("%d gold checks resolved, want 13 (7 tasks on amd64, 6 on arm64)", resolved)
	}
}
