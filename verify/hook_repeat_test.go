package verify

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/moby/buildkit/client/llb"
	gateway "github.com/moby/buildkit/frontend/gateway/client"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/grading"
)

// scheduleEngine answers gold runs from a schedule (test_fix passes in run
// k when gold[k]) and the control (SkipApply) with test_fix passing only
// when controlPasses; it counts both.
type scheduleEngine struct {
	mu            sync.Mutex
	gold          []bool
	controlPasses bool
	goldRuns      int
	controlRuns   int
}

func (e *scheduleEngine) Run(ctx context.Context, job Job) (*RunOutput, error) {
	e.mu.Lock()
	pass := e.controlPasses
	if job.SkipApply {
		e.controlRuns++
	} else {
		pass = e.gold[e.goldRuns%len(e.gold)]
		e.goldRuns++
	}
	e.mu.Unlock()
	status := "FAILED"
	if pass {
		status = "PASSED"
	}
	return &RunOutput{
		Applied: true, TestRan: true, TestSeconds: 1,
		TestOutput: grading.StartTestOutput + "\n" + status + " tests/test_a.py::test_fix\nPASSED tests/test_a.py::test_old\n" + grading.EndTestOutput + "\n",
		Leak:       LeakDump{BaseTime: "100", Head: "abc tree1\n", Base: "abc tree1\n"},
	}, nil
}

// TestBuilderHookRepeatAndControl: the build's gold check runs the gold
// patch Repeat times and the control once. A gold resolving in 2 of 3 runs
// is flaky (no error: the image is exported labelled) with test_fix failing
// 1 of 3; a control that resolves fails the image (tests do not
// discriminate); a gold never resolving fails it and runs no control. Only
// a clean success is cached, under a key naming the runs and the control
// (a cached single run does not stand for three), and a cache hit brings
// its control back too.
func TestBuilderHookRepeatAndControl(t *testing.T) {
	ctx := context.Background()
	inst := core.Instance{Repo: "o/r", InstanceID: "o__r-1", BaseCommit: "abc", Patch: "diff --git a/x b/x\n",
		FailToPass: []string{"tests/test_a.py::test_fix"}, PassToPass: []string{"tests/test_a.py::test_old"}}
	target := Target{Instance: inst, Platform: core.AMD64, EvalScript: "#!/bin/bash\npytest\n", Parser: "parse_log_pytest"}
	image := llb.Image("docker.io/library/debian@sha256:0000000000000000000000000000000000000000000000000000000000000001")
	cacheDir := filepath.Join(t.TempDir(), "cache")
	hook := func(repeat int, control bool, eng *scheduleEngine) (*Summary, error) {
		r := &Runner{RunDir: t.TempDir(), Cache: &Cache{Dir: cacheDir}, Repeat: repeat, Control: control,
			hookEngine: func(gateway.Client, llb.State) Engine { return eng }}
		sum := &Summary{}
		err := r.BuilderHook([]Target{target}, sum)(ctx, nil, inst.InstanceID, core.AMD64, image)
		return sum, err
	}

	t.Run("flaky", func(t *testing.T) {
		eng := &scheduleEngine{gold: []bool{true, false, true}}
		sum, err := hook(3, true, eng)
		if err != nil {
			t.Fatalf("a flaky gold failed the image: %v", err)
		}
		if eng.goldRuns != 3 || eng.controlRuns != 1 || len(sum.Results) != 2 {
			t.Fatalf("%d gold runs, %d control runs, %d results; want 3, 1, 2", eng.goldRuns, eng.controlRuns, len(sum.Results))
		}
		g, c := sum.Results[0], sum.Results[1]
		if !g.Flaky() || g.OK() || g.ResolvedRuns() != 2 || len(g.Runs) != 3 || g.Discriminates == nil || !*g.Discriminates {
			t.Errorf("gold: flaky %v ok %v resolved %d of %d, discriminates %v", g.Flaky(), g.OK(), g.ResolvedRuns(), len(g.Runs), g.Discriminates)
		}
		if want := []Flake{{Test: "tests/test_a.py::test_fix", Failed: 1, Runs: 3}}; !slices.Equal(g.Flakes, want) {
			t.Errorf("flakes %v, want %v", g.Flakes, want)
		}
		if c.Mode != ModeControl || !c.OK() {
			t.Errorf("control %+v", c)
		}
		v, err := VerdictOf(g, &c, nil)
		if err != nil || v.Runs != 3 || v.ResolvedRuns != 2 || v.ControlUnresolved == nil || !*v.ControlUnresolved || len(v.Flakes) != 1 {
			t.Errorf("verdict %+v, %v", v, err)
		}
		if ents, _ := filepath.Glob(filepath.Join(cacheDir, "*.json")); len(ents) != 0 {
			t.Errorf("a flaky verification was cached: %v", ents)
		}
	})
	t.Run("control resolves", func(t *testing.T) {
		sum, err := hook(3, true, &scheduleEngine{gold: []bool{true}, controlPasses: true})
		if err == nil || !strings.Contains(err.Error(), FailureNotDiscriminating) || sum.Results[0].Flaky() {
			t.Fatalf("err %v, flaky %v; want the image failed: %s", err, sum.Results[0].Flaky(), FailureNotDiscriminating)
		}
	})
	t.Run("never resolves", func(t *testing.T) {
		eng := &scheduleEngine{gold: []bool{false}}
		sum, err := hook(3, true, eng)
		if err == nil || sum.Results[0].Flaky() || eng.controlRuns != 0 {
			t.Fatalf("err %v, flaky %v, %d control runs; want the image failed, no control", err, sum.Results[0].Flaky(), eng.controlRuns)
		}
	})
	t.Run("verified, then cached", func(t *testing.T) {
		eng := &scheduleEngine{gold: []bool{true}}
		if _, err := hook(3, true, eng); err != nil || eng.goldRuns != 3 || eng.controlRuns != 1 {
			t.Fatalf("err %v, %d gold and %d control runs", err, eng.goldRuns, eng.controlRuns)
		}
		// One run without a control is another verification.
		eng = &scheduleEngine{gold: []bool{true}}
		if _, err := hook(1, false, eng); err != nil || eng.goldRuns != 1 {
			t.Fatalf("one run after three cached: err %v, %d runs; want a run", err, eng.goldRuns)
		}
		eng = &scheduleEngine{gold: []bool{false}}
		sum, err := hook(3, true, eng)
		if err != nil || eng.goldRuns+eng.controlRuns != 0 || len(sum.Results) != 2 || !sum.Results[0].Cached || sum.Results[1].Mode != ModeControl || !sum.Results[1].OK() {
			t.Fatalf("three runs and a control again: err %v, %d runs, results %+v; want a cache hit with its control", err, eng.goldRuns+eng.controlRuns, sum.Results)
		}
	})
}
