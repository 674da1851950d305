package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/pins"
)

// TestRenderCLIPinsNoneMatchesUpstream runs `swebuild render --pins none`
// over all of Verified, both arches, and compares every file and key.
func TestRenderCLIPinsNoneMatchesUpstream(t *testing.T) {
	shared := spectest.SharedDir(t)
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	err := runRender(context.Background(), []string{
		"--dataset", filepath.Join(shared, "datasets", "SWE-bench_Verified", "test.jsonl"),
		"--arch", "x86_64", "--arch", "arm64", "--pins", "none", "--out", out,
	}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("render: %v\n%s", err, stderr.String())
	}
	ref := filepath.Join(shared, "upstream-v4.1.0", "instances")
	ids, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 500 {
		t.Fatalf("%d instance dirs", len(ids))
	}
	for _, id := range ids {
		for _, arch := range []string{"x86_64", "arm64"} {
			for _, f := range []string{"Dockerfile.base", "Dockerfile.env", "Dockerfile.instance", "setup_env.sh", "setup_repo.sh", "eval.sh"} {
				got, err := os.ReadFile(filepath.Join(out, id.Name(), arch, f))
				if err != nil {
					t.Fatal(err)
				}
				want, err := os.ReadFile(filepath.Join(ref, id.Name(), arch, f))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s/%s/%s differs from upstream", id.Name(), arch, f)
				}
			}
			var got, want map[string]any
			for p, m := range map[string]*map[string]any{filepath.Join(out, id.Name(), arch, "meta.json"): &got, filepath.Join(ref, id.Name(), arch, "meta.json"): &want} {
				raw, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(raw, m); err != nil {
					t.Fatal(err)
				}
			}
			for _, k := range []string{"base_image_key", "env_image_key", "instance_image_key", "platform"} {
				if got[k] != want[k] {
					t.Errorf("%s %s: meta %s = %v, want %v", id.Name(), arch, k, got[k], want[k])
				}
			}
		}
	}
}

func TestRenderCLIErrors(t *testing.T) {
	shared := spectest.SharedDir(t)
	ds := filepath.Join(shared, "datasets", "SWE-bench_Lite", "test.jsonl")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no arch", []string{"--dataset", ds, "--out", t.TempDir()}, "--arch is required"},
		{"bad arch", []string{"--dataset", ds, "--arch", "s390x", "--out", t.TempDir()}, "s390x"},
		{"no out", []string{"--dataset", ds, "--arch", "all"}, "--out is required"},
	} {
		var stdout, stderr bytes.Buffer
		err := runRender(context.Background(), tc.args, &stdout, &stderr)
		if err != errUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%s: err %v, stderr %q", tc.name, err, stderr.String())
		}
	}
	// Offline with an empty cache, a network-needing instance fails naming
	// the URL; the other one is written.
	t.Setenv("SWEBUILD_CACHE", t.TempDir())
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	err := runRender(context.Background(), []string{"--dataset", ds, "--instance", "django__django-10924",
		"--instance", "astropy__astropy-12907", "--arch", "all", "--offline", "--out", out}, &stdout, &stderr)
	if err == nil || !strings.Contains(stderr.String(), "https://raw.githubusercontent.com/django/django/419a78300f7cd27611196e1e464d50fd0385ff27/tests/requirements/py3.txt") {
		t.Errorf("err %v, stderr %q", err, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(out, "astropy__astropy-12907", "arm64", "eval.sh")); err != nil {
		t.Errorf("other instance not written: %v", err)
	}
}

func TestPlanCLIVerified(t *testing.T) {
	shared := spectest.SharedDir(t)
	var stdout, stderr bytes.Buffer
	err := runPlan(context.Background(), []string{"--dataset", filepath.Join(shared, "datasets", "SWE-bench_Verified", "test.jsonl"), "--pins", "none"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{
		"linux/amd64: 1 base, 63 env, 500 instance nodes (564 total)",
		"linux/arm64: 1 base, 47 env, 414 instance nodes (462 total); 86 x86-only instances have no linux/arm64 node",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("plan output lacks %q", want)
		}
	}
	stdout.Reset()
	if err := runPlan(context.Background(), []string{"--dataset", filepath.Join(shared, "datasets", "SWE-bench_Verified", "test.jsonl"),
		"--platform", "linux/arm64", "--format", "json", "--instance", "astropy__astropy-12907"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	var p struct {
		Platforms []struct {
			Platform string
			Nodes    []struct{ Kind, Key, Parent string }
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Platforms) != 1 || len(p.Platforms[0].Nodes) != 3 || p.Platforms[0].Nodes[2].Key != "sweb.eval.arm64.astropy__astropy-12907:latest" {
		t.Errorf("json plan %+v", p)
	}
}

func TestPinsList(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := runPins(context.Background(), []string{"list"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	for _, r := range pins.All() {
		for _, s := range []string{r.ID, r.Match, r.Change, r.Reason, r.Evidence} {
			if !strings.Contains(stdout.String(), s) {
				t.Errorf("pins list lacks %q", s)
			}
		}
	}
	for _, r := range spec.X86Rules() {
		for _, s := range []string{r.ID, r.Match, r.Reason, r.Evidence} {
			if !strings.Contains(stdout.String(), s) {
				t.Errorf("pins list lacks x86-only rule text %q", s)
			}
		}
	}
	for _, r := range pins.FlatRules() {
		for _, s := range []string{r.ID, r.Match, r.Change, r.Reason, r.Evidence} {
			if !strings.Contains(stdout.String(), s) {
				t.Errorf("pins list lacks flat rule text %q", s)
			}
		}
	}
	if err := runPins(context.Background(), nil, &stdout, &stderr); err != errUsage {
		t.Errorf("pins without list: %v", err)
	}
}

// BenchmarkRenderProcess is the whole `swebuild render` over Verified, both
// arches, default pins: dataset load, 1,000 renders and 7,000 files written
// (into $SWEBUILD_BENCH_OUT if set, e.g. a tmpfs, else a temp dir).
func BenchmarkRenderProcess(b *testing.B) {
	shared := spectest.SharedDir(b)
	ds := filepath.Join(shared, "datasets", "SWE-bench_Verified", "test.jsonl")
	base := os.Getenv("SWEBUILD_BENCH_OUT")
	if base == "" {
		base = b.TempDir()
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		out := filepath.Join(base, "render-bench-"+strconv.Itoa(i))
		var stdout, stderr bytes.Buffer
		if err := runRender(context.Background(), []string{"--dataset", ds, "--arch", "all", "--out", out}, &stdout, &stderr); err != nil {
			b.Fatalf("%v\n%s", err, stderr.String())
		}
		b.StopTimer()
		if err := os.RemoveAll(out); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
