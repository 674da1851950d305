package taskwrite

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
)

const multimodal = "SWE-bench/SWE-bench_Multimodal"

func newRenderer(t *testing.T) *render.Renderer {
	t.Helper()
	tables, err := spec.LoadVersion(spec.VersionFinal)
	if err != nil {
		t.Fatal(err)
	}
	return &render.Renderer{Tables: tables}
}

func readYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// TestMultimodalDevAgainstUpstream writes the Multimodal dev records that
// have a task dir in the reference copy of upstream's multimodal task repo
// (8d3ed32f) and compares each file with upstream's. Files the record
// fully determines must be byte-identical; task.yaml must load to the same
// mapping; eval.sh and Dockerfile come from other generators upstream (the
// repo's own, NOTES §2) and are only counted.
func TestMultimodalDevAgainstUpstream(t *testing.T) {
	shared := spectest.SharedDir(t)
	ref := filepath.Join(shared, "upstream-v5", "task-repo-multimodal")
	recs := spectest.Records(t, shared, "SWE-bench_Multimodal/dev")["SWE-bench_Multimodal/dev"]
	var insts []core.Instance
	for id, inst := range recs {
		m := filepath.Join(ref, "tasks", id, TaskFile)
		if _, err := os.Stat(m); err == nil && readYAML(t, m)["split"] == "dev" {
			insts = append(insts, *inst)
		}
	}
	sort.Slice(insts, func(i, j int) bool { return insts[i].InstanceID < insts[j].InstanceID })
	out := t.TempDir()
	n, failed := Write(context.Background(), newRenderer(t), insts, Options{Out: out, Datasets: []string{multimodal}, Split: "dev"})
	for _, f := range failed {
		t.Errorf("%v", f)
	}
	if n != len(insts) || n != 52 {
		t.Fatalf("wrote %d of %d tasks, want 52 (the dev tasks of this half)", n, len(insts))
	}
	same := map[string]int{}
	for _, inst := range insts {
		id := inst.InstanceID
		for _, name := range []string{GoldPatch, TestPatch, ProblemFile, HintsFile, TestsFile, TaskFile, EvalFile, Dockerfile} {
			want, werr := os.ReadFile(filepath.Join(ref, "tasks", id, name))
			got, gerr := os.ReadFile(filepath.Join(out, TasksDir, id, name))
			if os.IsNotExist(werr) != os.IsNotExist(gerr) {
				t.Errorf("%s/%s: exists upstream %v, here %v", id, name, werr == nil, gerr == nil)
				continue
			}
			if bytes.Equal(want, got) {
				same[name]++
			}
		}
		if w, g := readYAML(t, filepath.Join(ref, "tasks", id, TaskFile)), readYAML(t, filepath.Join(out, TasksDir, id, TaskFile)); !reflect.DeepEqual(w, g) {
			t.Errorf("%s: task.yaml loads to\n%v\nwant\n%v", id, g, w)
		}
	}
	for _, name := range []string{GoldPatch, TestPatch, ProblemFile, HintsFile, TestsFile, TaskFile} {
		if same[name] != n {
			t.Errorf("%s: %d of %d byte-identical", name, same[name], n)
		}
	}
	// Writing the test split into the same repo adds it to sweb.yaml,
	// which then is upstream's byte for byte.
	if _, failed := Write(context.Background(), newRenderer(t), nil, Options{Out: out, Datasets: []string{multimodal}, Split: "test"}); len(failed) > 0 {
		t.Fatal(failed[0])
	}
	want, _ := os.ReadFile(filepath.Join(ref, ConfigFile))
	if got, _ := os.ReadFile(filepath.Join(out, ConfigFile)); !bytes.Equal(got, want) {
		t.Errorf("sweb.yaml:\n%s\nwant\n%s", got, want)
	}
	t.Logf("byte-identical to upstream's task repo over %d dev tasks: %v", n, same)
}
