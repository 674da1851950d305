package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec/spectest"
)

// TestTaskRepoCLI: plan and render take --task-repo (the fixture's), and
// --task-repo with --dataset is a usage error.
func TestTaskRepoCLI(t *testing.T) {
	repo := filepath.Join("..", "..", "testdata", "fixture", "taskrepo")
	specs := filepath.Join("..", "..", "testdata", "fixture", "specs.json")
	ctx := context.Background()
	var stdout, stderr bytes.Buffer
	if err := runPlan(ctx, []string{"--task-repo", repo, "--specs", specs, "--cache-dir", t.TempDir()}, &stdout, &stderr); err != nil {
		t.Fatalf("plan: %v\n%s", err, stderr.String())
	}
	// the fixture's 5 Python tasks (profile language "fixture") and 2
	// JavaScript ones; no arm64 rule keeps a fixture Dockerfile off arm64,
	// fixture__textutil-2's task.yaml does (x86_only: override, as the
	// dataset path's specs.json x86_only list)
	want := "LANGUAGE  TASKS  LINUX/AMD64  LINUX/ARM64\nfixture   5      5            4\njs        2      2            2\ntotal     7      7            6\n" +
		"\nx86-only (no linux/arm64):\n     1  override\n        e.g. override\n"
	if stdout.String() != want {
		t.Errorf("plan:\n%s\nwant:\n%s", stdout.String(), want)
	}

	out := t.TempDir()
	stdout.Reset()
	if err := runRender(ctx, []string{"--task-repo", repo, "--instance", "fixture__semver-1", "--arch", "all", "--out", out, "--cache-dir", t.TempDir()}, &stdout, &stderr); err != nil {
		t.Fatalf("render: %v\n%s", err, stderr.String())
	}
	for _, arch := range []string{"x86_64", "arm64"} {
		for _, f := range []string{"Dockerfile", "eval.sh"} {
			got, err := os.ReadFile(filepath.Join(out, "fixture__semver-1", arch, f))
			if err != nil {
				t.Fatal(err)
			}
			src, err := os.ReadFile(filepath.Join(repo, "tasks", "fixture__semver-1", f))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, src) { // no arm64 rule changes the fixture's Dockerfile
				t.Errorf("%s/%s differs from the task's", arch, f)
			}
		}
	}

	stderr.Reset()
	err := runPlan(ctx, []string{"--task-repo", repo, "--dataset", "x.jsonl", "--cache-dir", t.TempDir()}, &stdout, &stderr)
	if !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), "--dataset and --task-repo: give one") {
		t.Errorf("both: %v, %s", err, stderr.String())
	}
}

// TestTaskRepoExportPlansAsDataset (issue 26): `render --task-repo-out` of
// SWE-bench Verified, then `plan --task-repo` of the export, gives every
// instance the platforms `plan --dataset` gives it, platform for platform,
// and the same x86-only reason: upstream's USE_X86 ids (django__django-10097
// among them) stay linux/amd64 alone, as task.yaml's x86_only says; before,
// the export lost that and the flat arm64 rules gave them linux/arm64.
func TestTaskRepoExportPlansAsDataset(t *testing.T) {
	ds := filepath.Join(spectest.SharedDir(t), "datasets", "SWE-bench_Verified", "test.jsonl")
	ctx := context.Background()
	cache := t.TempDir()
	repo := filepath.Join(t.TempDir(), "verified")
	var stdout, stderr bytes.Buffer
	if err := runRender(ctx, []string{"--dataset", ds, "--task-repo-out", repo, "--task-repo-dataset", "SWE-bench/SWE-bench_Verified", "--offline", "--cache-dir", cache}, &stdout, &stderr); err != nil {
		t.Fatalf("render --task-repo-out: %v\n%s", err, stderr.String())
	}
	plan := func(args ...string) []byte {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if err := runPlan(ctx, append(args, "--format", "json", "--offline", "--cache-dir", cache), &stdout, &stderr); err != nil {
			t.Fatalf("plan %v: %v\n%s", args, err, stderr.String())
		}
		return stdout.Bytes()
	}
	type decision struct {
		platforms []string
		x86Only   string
	}
	// plan --dataset: the graph; an instance's platforms are those with
	// an instance node naming it.
	var graph struct {
		Platforms []struct {
			Platform string `json:"platform"`
			Nodes    []struct {
				Kind      string   `json:"kind"`
				Instances []string `json:"instances"`
			} `json:"nodes"`
		} `json:"platforms"`
		X86OnlyRule map[string]string `json:"x86_only_rule"`
	}
	if err := json.Unmarshal(plan("--dataset", ds), &graph); err != nil {
		t.Fatal(err)
	}
	fromDataset := map[string]*decision{}
	for _, p := range graph.Platforms {
		for _, n := range p.Nodes {
			if n.Kind != "instance" {
				continue
			}
			for _, id := range n.Instances {
				if fromDataset[id] == nil {
					fromDataset[id] = &decision{x86Only: graph.X86OnlyRule[id]}
				}
				fromDataset[id].platforms = append(fromDataset[id].platforms, p.Platform)
			}
		}
	}
	// plan --task-repo: every task with its platforms.
	var tasks struct {
		Tasks []struct {
			ID        string   `json:"instance_id"`
			Platforms []string `json:"platforms"`
			X86Only   string   `json:"x86_only"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(plan("--task-repo", repo), &tasks); err != nil {
		t.Fatal(err)
	}
	if len(tasks.Tasks) != 500 || len(fromDataset) != 500 {
		t.Fatalf("%d tasks, %d dataset instances planned; want Verified's 500", len(tasks.Tasks), len(fromDataset))
	}
	x86 := 0
	for _, tk := range tasks.Tasks {
		d := fromDataset[tk.ID]
		if d == nil || !slices.Equal(tk.Platforms, d.platforms) || tk.X86Only != d.x86Only {
			t.Errorf("%s: task repo %v (x86-only %q), dataset %+v", tk.ID, tk.Platforms, tk.X86Only, d)
		}
		if tk.X86Only != "" {
			x86++
		}
	}
	if d := fromDataset["django__django-10097"]; d == nil || !slices.Equal(d.platforms, []string{"linux/amd64"}) || d.x86Only != "USE_X86" {
		t.Errorf("django__django-10097 on the dataset path: %+v, want linux/amd64 alone, USE_X86", d)
	}
	if x86 == 0 {
		t.Error("no x86-only task: the comparison does not cover USE_X86")
	}
	t.Logf("500 instances, platform for platform; %d x86-only with the same reason", x86)
}
