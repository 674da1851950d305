package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/dataset/hub/hubtest"
)

// TestDatasetHubCLI: `--dataset NAME:SPLIT` against the stand-in hub serving
// the real SWE-bench_Lite dev parquet: the first run downloads, the second
// is served from the cache without a request (counted at the server), and
// an offline run works from the cache; a dataset or split that does not
// exist, an offline run with nothing cached and a truncated download each
// fail with an error saying so.
func TestDatasetHubCLI(t *testing.T) {
	shared := spectest.SharedDir(t)
	dev, err := os.ReadFile(filepath.Join(shared, "datasets", "SWE-bench_Lite", "dev.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	s := hubtest.New(t)
	sha := s.Commit("SWE-bench/SWE-bench_Lite", "main", map[string][]byte{
		"README.md":                       []byte("---\nconfigs: ...\n---\n"),
		"data/dev-00000-of-00001.parquet": dev,
	}, hubtest.Card(map[string]string{"dev": "data/dev-*"}))
	t.Setenv("HF_ENDPOINT", s.URL)
	t.Setenv("HF_HUB_OFFLINE", "")
	cache := t.TempDir()
	matrix := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"ci", "matrix", "--platform", "linux/amd64", "--shards", "1", "--github-output", ""}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	ids := func(out string) int {
		var m struct {
			Include []struct{ IDs string } `json:"include"`
		}
		if err := json.Unmarshal([]byte(out), &m); err != nil || len(m.Include) != 1 {
			t.Fatalf("matrix output %q: %v", out, err)
		}
		return len(strings.Split(m.Include[0].IDs, ","))
	}
	for i, args := range [][]string{
		{"--dataset", "SWE-bench/SWE-bench_Lite:dev", "--cache-dir", cache},
		{"--dataset", "SWE-bench/SWE-bench_Lite:dev", "--cache-dir", cache},
		{"--dataset", "SWE-bench/SWE-bench_Lite:dev", "--cache-dir", cache, "--offline"},
		{"--dataset", "SWE-bench/SWE-bench_Lite@" + sha + ":dev", "--cache-dir", cache, "--offline"},
	} {
		before := s.Requests()
		code, out, errOut := matrix(args...)
		if code != 0 {
			t.Fatalf("run %d %v: exit %d\n%s", i+1, args, code, errOut)
		}
		t.Logf("run %d %v: %d instances, %d requests at the hub", i+1, args[1:], ids(out), s.Requests()-before)
		if n := ids(out); n != 23 {
			t.Errorf("run %d: %d instances, want 23", i+1, n)
		}
		want := 0
		if i == 0 {
			want = 3 // the revision, the file's resolve (a redirect), the CDN
		}
		if got := s.Requests() - before; got != want {
			t.Errorf("run %d: %d requests at the hub, want %d", i+1, got, want)
		}
	}

	obj := hubtest.ObjectPath(dev)
	s.SetFault(obj, hubtest.Fault{Truncate: 1000})
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no such dataset", []string{"--dataset", "SWE-bench/SWE-bench_Nope", "--cache-dir", cache},
			"dataset SWE-bench/SWE-bench_Nope not found on " + s.URL + " (a private or gated dataset needs a token)"},
		{"no such split", []string{"--dataset", "SWE-bench/SWE-bench_Lite:nope", "--cache-dir", cache},
			`dataset SWE-bench/SWE-bench_Lite@` + sha + `: no such split "nope"; its splits: dev`},
		{"offline, not cached", []string{"--dataset", "SWE-bench/SWE-bench_Lite:dev", "--cache-dir", cache + "-empty", "--offline"},
			"offline: dataset SWE-bench/SWE-bench_Lite revision main is not in the cache (" + filepath.Join(cache+"-empty", "hub")},
		{"truncated download", []string{"--dataset", "SWE-bench/SWE-bench_Lite:dev", "--cache-dir", t.TempDir()},
			"dataset SWE-bench/SWE-bench_Lite@" + sha + ":dev: data/dev-00000-of-00001.parquet: downloading: truncated: 65133 of 130267 bytes (unexpected EOF), after 5 attempts"},
	} {
		code, _, errOut := matrix(tc.args...)
		t.Logf("%s: exit %d: %s", tc.name, code, strings.TrimSpace(errOut))
		if code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 and %q", tc.name, code, errOut, tc.want)
		}
	}
}

// TestDatasetIDChecksCLI (issue 12, rows 6 and 12): `plan` over the fixture
// dataset plus a record whose id differs from another's only in case and
// one whose id ends in '-' fails, naming both colliding ids with file and
// line, and plans the other records, none with an empty instance_id.
func TestDatasetIDChecksCLI(t *testing.T) {
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	fixture := filepath.Join(root, "testdata", "fixture")
	src, err := os.ReadFile(filepath.Join(fixture, "dataset.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(src)), "\n")
	if len(lines) < 2 || !strings.Contains(lines[0], `"instance_id":"fixture__calc-1"`) || !strings.Contains(lines[1], `"instance_id":"fixture__calc-2"`) {
		t.Fatalf("fixture dataset changed: want fixture__calc-1 and -2 first")
	}
	var ids []string
	for _, l := range lines {
		var r struct {
			ID string `json:"instance_id"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	upper := strings.Replace(lines[0], `"instance_id":"fixture__calc-1"`, `"instance_id":"FIXTURE__Calc-1"`, 1)
	dash := strings.Replace(lines[1], `"instance_id":"fixture__calc-2"`, `"instance_id":"fixture__calc-2-"`, 1)
	path := filepath.Join(t.TempDir(), "ds.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(append(lines, upper, dash), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"plan", "--dataset", path, "--specs", filepath.Join(fixture, "specs.json"), "--platform", "linux/amd64", "--format", "json", "--cache-dir", t.TempDir()}, &stdout, &stderr)
	for _, want := range []string{
		fmt.Sprintf("%s:%d: field \"instance_id\": \"FIXTURE__Calc-1\" (this record) and \"fixture__calc-1\" (%s:1) get the same image names, sweb.eval.fixture_1776_calc-1", path, len(lines)+1, path),
		fmt.Sprintf("%s:%d: field \"instance_id\": \"fixture__calc-2-\" ends with '-'", path, len(lines)+2),
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	var p struct {
		Platforms []struct {
			Nodes []struct {
				Kind      string   `json:"kind"`
				Instances []string `json:"instances"`
			} `json:"nodes"`
		} `json:"platforms"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &p); err != nil || len(p.Platforms) != 1 {
		t.Fatalf("plan output: %v\n%s", err, stdout.String())
	}
	var got []string
	for _, n := range p.Platforms[0].Nodes {
		if n.Kind == "instance" {
			got = append(got, n.Instances...)
		}
	}
	if strings.Join(got, " ") != strings.Join(ids, " ") {
		t.Errorf("planned %q, want the fixture's %q", got, ids)
	}
}
