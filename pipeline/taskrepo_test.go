package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/verify"
)

func fixtureTaskRepo(t *testing.T) string {
	t.Helper()
	return filepath.Join("..", "testdata", "fixture", "taskrepo")
}

// TestLoadTaskRepo: Load with a task repo gives its tasks as instances and
// targets that run each task's own eval.sh with its log parser; the build
// nodes use the task directory as the whole context.
func TestLoadTaskRepo(t *testing.T) {
	ctx := context.Background()
	l, err := Load(ctx, Inputs{TaskRepo: fixtureTaskRepo(t), Pins: "default", CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Instances) != 7 {
		t.Fatalf("%d instances; want 7", len(l.Instances))
	}
	targets, errs := l.Targets(ctx, core.AllPlatforms(), nil, "")
	// fixture__textutil-2 is x86-only (its task.yaml's x86_only)
	if len(errs) > 0 || len(targets) != 13 {
		t.Fatalf("%d targets, errors %v; want 7 tasks on linux/amd64 and 6 on linux/arm64", len(targets), errs)
	}
	byID := map[string]core.Instance{}
	for _, in := range l.Instances {
		byID[in.InstanceID] = in
	}
	for i, tg := range targets {
		task := byID[tg.Instance.InstanceID]
		if tg.Instance.InstanceID == fixtureX86Only && tg.Platform != core.AMD64 {
			t.Errorf("target %d: the x86-only %s on %s", i, tg.Instance.InstanceID, tg.Platform)
		}
		// The task's own eval.sh as upstream v5 runs it: with the test
		// command's exit status recorded after the end marker.
		want, recorded := verify.EvalScriptV5(task.EvalScript)
		if tg.EvalScript != want || !recorded || !tg.RecordsExit || tg.Parser != task.LogParser || tg.Instance.InstanceID != task.InstanceID {
			t.Errorf("target %d (%s %s): not the task's own eval.sh (exit status recorded) and parser", i, tg.Instance.InstanceID, tg.Platform)
		}
		if !strings.Contains(tg.EvalScript, "SWEBENCH_TEST_EXIT_CODE=$?\n: '>>>>> End Test Output'\necho \">>>>> Test Exit Code: $SWEBENCH_TEST_EXIT_CODE\"\n") {
			t.Errorf("target %d: the script run does not record the test exit status once after the end marker:\n%s", i, tg.EvalScript)
		}
	}
	p, err := l.Plan(ctx, core.AllPlatforms())
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := p.Nodes(nil)
	if err != nil || len(nodes) != 13 {
		t.Fatalf("%d nodes (%v), want 13", len(nodes), err)
	}
	for _, n := range nodes {
		if !filepath.IsAbs(n.ContextDir) || filepath.Base(n.ContextDir) != n.InstanceID || len(n.Context)+len(n.ContextFiles) != 0 {
			t.Errorf("%s: context dir %q", n.ID(), n.ContextDir)
		}
		if n.Inventory == nil || len(n.Inventory.Commands) != 3 || len(n.Inventory.InstanceIDs) != 1 || n.Inventory.InstanceIDs[0] != n.InstanceID {
			t.Errorf("%s: inventory %+v, want the default task listing (dpkg-query, conda, pip) of its instance", n.ID(), n.Inventory)
		}
	}
}

func TestLoadTaskRepoErrors(t *testing.T) {
	ctx := context.Background()
	broken := t.TempDir()
	if err := os.CopyFS(broken, os.DirFS(fixtureTaskRepo(t))); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(broken, "tasks", "fixture__calc-1", "eval.sh")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		in      Inputs
		loaded  int // tasks loaded; -1: no Loaded
		wantErr string
	}{
		{"dataset and task repo", Inputs{Dataset: "x.jsonl", TaskRepo: fixtureTaskRepo(t)}, -1, "a dataset and a task repo given"},
		{"no sweb.yaml", Inputs{TaskRepo: t.TempDir()}, -1, "sweb.yaml"},
		{"a task with a problem", Inputs{TaskRepo: broken}, 6, "1 task(s) left out for problems"},
		{"unknown id", Inputs{TaskRepo: fixtureTaskRepo(t), Instances: []string{"fixture__calc-1", "nope__x-1"}}, 1, "nope__x-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Pins, tc.in.CacheDir = "default", t.TempDir()
			var log strings.Builder
			tc.in.Log = &log
			l, err := Load(ctx, tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if tc.loaded < 0 {
				if l != nil {
					t.Fatalf("got %d tasks, want no Loaded", len(l.Instances))
				}
				return
			}
			if l == nil || len(l.Instances) != tc.loaded {
				t.Fatalf("got %v, want %d tasks", l, tc.loaded)
			}
		})
	}
}

// TestLoadedSelectTaskRepo: selecting instances of a loaded task repo (as
// verify does after loading the whole repo to check prediction ids) selects
// its tasks too, so the targets are those of the selected tasks only.
// Before, verify --task-repo --instance ID made targets of every task and
// reported the others' missing images as errors.
func TestLoadedSelectTaskRepo(t *testing.T) {
	ctx := context.Background()
	l, err := Load(ctx, Inputs{TaskRepo: fixtureTaskRepo(t), Pins: "default", CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Select([]string{"fixture__semver-1", "fixture__calc-1"}); err != nil {
		t.Fatal(err)
	}
	if len(l.Instances) != 2 || l.Instances[0].InstanceID != "fixture__calc-1" || l.Instances[1].InstanceID != "fixture__semver-1" {
		t.Fatalf("selected %d instances; want calc-1 then semver-1 (the repo's order)", len(l.Instances))
	}
	p, err := l.Plan(ctx, core.AllPlatforms())
	if err != nil {
		t.Fatal(err)
	}
	if nodes, _ := p.Nodes(nil); len(p.Records) != 2 || len(nodes) != 4 {
		t.Fatalf("plan of the selection: %d records, %d nodes; want 2 tasks x 2 platforms", len(p.Records), len(nodes))
	}
	targets, errs := l.Targets(ctx, core.AllPlatforms(), nil, "")
	if len(errs) > 0 || len(targets) != 4 {
		t.Fatalf("%d targets, errors %v; want 2 tasks x 2 platforms", len(targets), errs)
	}
	for _, tg := range targets {
		if id := tg.Instance.InstanceID; id != "fixture__semver-1" && id != "fixture__calc-1" {
			t.Errorf("target of %s, not selected", id)
		}
	}
	if err := l.Select([]string{"fixture__nope-1"}); err == nil {
		t.Error("selecting an id not loaded: no error")
	}
}
