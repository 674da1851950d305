package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bkclient "github.com/moby/buildkit/client"

	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/dataset"
	"github.com/swebuild/swebuild/grading"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/pins"
	"github.com/swebuild/swebuild/verify"
)

// benchFixture builds (or finds cached) the fixture images once and returns
// the gold targets of both platforms and a runner on the local BuildKit.
var benchOnce struct {
	sync.Once
	targets []verify.Target
	err     error
}

func benchTargets(b *testing.B) []verify.Target {
	f := newFixtureStack(b)
	benchOnce.Do(func() {
		ctx := context.Background()
		// The mirror context lives in the cache, so that a second benchmark
		// run finds every image built (a fresh clone differs in git's
		// bookkeeping files and would rebuild the instance images).
		cache, err := stacktest.CacheDir()
		if err != nil {
			benchOnce.err = err
			return
		}
		f.ctxDir = filepath.Join(cache, "verify-bench")
		if _, err := os.Stat(filepath.Join(f.ctxDir, "mirror")); err != nil {
			if err := stacktest.MakeRepos(ctx, filepath.Join(f.ctxDir, "mirror")); err != nil {
				benchOnce.err = err
				return
			}
		}
		md := filepath.Join(os.TempDir(), fmt.Sprintf("swebuild-verify-bench-%d.jsonl", os.Getpid()))
		defer os.Remove(md)
		if _, err := f.build(b, ctx, f.dataset, f.reg+"/swebuild-test/verify", md); err != nil {
			benchOnce.err = err
			return
		}
		tables, err := spec.Load()
		if err != nil {
			benchOnce.err = err
			return
		}
		if err = tables.LoadExtra(f.specs); err != nil {
			benchOnce.err = err
			return
		}
		set, err := pins.Named("default")
		if err != nil {
			benchOnce.err = err
			return
		}
		insts, err := dataset.Load(ctx, f.dataset, dataset.LoadOptions{Known: tables})
		if err != nil {
			benchOnce.err = err
			return
		}
		m, err := core.ReadFile(md)
		if err != nil {
			benchOnce.err = err
			return
		}
		ts, errs := verify.Targets(ctx, &render.Renderer{Tables: tables, Pins: set}, insts, verify.TargetOptions{Images: verify.ImagesFromRecords(m, md)})
		if len(errs) > 0 {
			benchOnce.err = errs[0]
			return
		}
		benchOnce.targets = ts
	})
	if benchOnce.err != nil {
		b.Fatal(benchOnce.err)
	}
	return benchOnce.targets
}

func benchRunner(b *testing.B, workers int) (*verify.Runner, func()) {
	c, err := bkclient.New(context.Background(), os.Getenv("BUILDKIT_HOST"))
	if err != nil {
		b.Fatal(err)
	}
	return &verify.Runner{
		Engine: &verify.BuildKitEngine{Client: c}, Workers: workers, Timeout: 10 * time.Minute,
		RunDir: b.TempDir(), Grade: grading.GradeOptions{Parser: "parse_log_pytest"}, Progress: io.Discard,
	}, func() { c.Close() }
}

// BenchmarkVerifyOverhead runs the gold patch of the fixture instances that
// have both platforms, one at a time, and reports per instance the wall time
// of a run (container start, patch apply, eval.sh, reading results back,
// grading, files), the test command's own time measured inside the
// container, their difference (the overhead), for native amd64 and emulated
// arm64, and the arm64/amd64 ratios.
func BenchmarkVerifyOverhead(b *testing.B) {
	all := benchTargets(b)
	byPlatform := map[core.Platform][]verify.Target{}
	both := map[string]int{}
	for _, t := range all {
		both[t.Instance.InstanceID]++
	}
	for _, t := range all {
		if both[t.Instance.InstanceID] == 2 {
			byPlatform[t.Platform] = append(byPlatform[t.Platform], t)
		}
	}
	r, done := benchRunner(b, 1)
	defer done()
	type acc struct{ wall, test, inside float64 }
	sums := map[core.Platform]*acc{}
	n := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, p := range core.AllPlatforms() {
			sum, err := r.Verify(context.Background(), byPlatform[p], true, false, nil)
			if err != nil {
				b.Fatal(err)
			}
			if sums[p] == nil {
				sums[p] = &acc{}
			}
			for _, res := range sum.Results {
				if !res.OK() {
					b.Fatalf("%s %s: %s", res.InstanceID, res.Platform, res.Why())
				}
				sums[p].wall += res.Seconds
				sums[p].test += res.TestSeconds
				for _, a := range res.Runs {
					sums[p].inside += a.InContainerSeconds / float64(len(res.Runs))
				}
			}
		}
		n += len(byPlatform[core.AMD64])
	}
	b.StopTimer()
	for _, p := range core.AllPlatforms() {
		arch := p.Arch()
		a := sums[p]
		b.ReportMetric(a.wall/float64(n), arch+"-wall-s/inst")
		b.ReportMetric(a.test/float64(n), arch+"-test-s/inst")
		b.ReportMetric((a.wall-a.test)/float64(n), arch+"-overhead-s/inst")
		// The overhead split: in the container around the tests (leak
		// check, apply, diffs) and outside it (solve, container start,
		// reading results back, grading, files).
		b.ReportMetric((a.inside-a.test)/float64(n), arch+"-in-container-overhead-s/inst")
		b.ReportMetric((a.wall-a.inside)/float64(n), arch+"-outside-overhead-s/inst")
	}
	x, y := sums[core.AMD64], sums[core.ARM64]
	b.ReportMetric(y.wall/x.wall, "arm64/amd64-wall")
	b.ReportMetric(y.test/x.test, "arm64/amd64-test")
}

// BenchmarkVerifyWorkers runs the gold patches of every amd64 fixture
// instance with 1 and 2 workers and reports the throughput.
func BenchmarkVerifyWorkers(b *testing.B) {
	var amd []verify.Target
	for _, t := range benchTargets(b) {
		if t.Platform == core.AMD64 {
			amd = append(amd, t)
		}
	}
	for _, w := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
			r, done := benchRunner(b, w)
			defer done()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				sum, err := r.Verify(context.Background(), amd, true, false, nil)
				if err != nil {
					b.Fatal(err)
				}
				if f := sum.Failed(); len(f) > 0 {
					b.Fatalf("%s: %s", f[0].InstanceID, f[0].Why())
				}
			}
			b.ReportMetric(float64(len(amd)*b.N)/time.Since(start).Seconds(), "inst/s")
		})
	}
}
