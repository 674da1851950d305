package taskwrite

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/dataset"
	"github.com/swebuild/swebuild/taskrepo"
	"github.com/swebuild/swebuild/taskrepo/layout"
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
		m := filepath.Join(ref, "tasks", id, layout.TaskFile)
		if _, err := os.Stat(m); err == nil && readYAML(t, m)["split"] == "dev" {
			insts = append(insts, *inst)
		}
	}
	sort.Slice(insts, func(i, j int) bool { return insts[i].InstanceID < insts[j].InstanceID })
	out := t.TempDir()
	r := newRenderer(t)
	n, failed := Write(context.Background(), r, insts, Options{Out: out, Datasets: []string{multimodal}, Split: "dev"})
	for _, f := range failed {
		t.Errorf("%v", f)
	}
	if n != len(insts) || n != 52 {
		t.Fatalf("wrote %d of %d tasks, want 52 (the dev tasks of this half)", n, len(insts))
	}
	same := map[string]int{}
	x86 := 0
	for _, inst := range insts {
		id := inst.InstanceID
		// An instance the tables keep off arm64 (the p5.js puppeteer rule)
		// says so in one more line, the last key sorted: upstream's repo,
		// x86-only throughout, has no such key.
		rule := r.Tables.X86OnlyRule(&inst)
		for _, name := range []string{layout.GoldPatch, layout.TestPatch, layout.ProblemFile, layout.HintsFile, layout.TestsFile, layout.TaskFile, layout.EvalFile, layout.Dockerfile} {
			want, werr := os.ReadFile(filepath.Join(ref, "tasks", id, name))
			got, gerr := os.ReadFile(filepath.Join(out, layout.TasksDir, id, name))
			if os.IsNotExist(werr) != os.IsNotExist(gerr) {
				t.Errorf("%s/%s: exists upstream %v, here %v", id, name, werr == nil, gerr == nil)
				continue
			}
			if name == layout.TaskFile && rule != "" {
				want = append(want, "x86_only: "+rule+"\n"...)
			}
			if bytes.Equal(want, got) {
				same[name]++
			}
		}
		w, g := readYAML(t, filepath.Join(ref, "tasks", id, layout.TaskFile)), readYAML(t, filepath.Join(out, layout.TasksDir, id, layout.TaskFile))
		if rule != "" {
			x86++
			if g[X86OnlyKey] != rule {
				t.Errorf("%s: x86_only %v, want %s", id, g[X86OnlyKey], rule)
			}
			delete(g, X86OnlyKey)
		}
		if !reflect.DeepEqual(w, g) {
			t.Errorf("%s: task.yaml loads to\n%v\nwant\n%v", id, g, w)
		}
	}
	if x86 == 0 {
		t.Error("no x86-only instance among the dev tasks: the x86_only line is not exercised")
	}
	for _, name := range []string{layout.GoldPatch, layout.TestPatch, layout.ProblemFile, layout.HintsFile, layout.TestsFile, layout.TaskFile} {
		if same[name] != n {
			t.Errorf("%s: %d of %d byte-identical", name, same[name], n)
		}
	}
	// Writing the test split into the same repo adds it to sweb.yaml,
	// which then is upstream's byte for byte.
	if _, failed := Write(context.Background(), newRenderer(t), nil, Options{Out: out, Datasets: []string{multimodal}, Split: "test"}); len(failed) > 0 {
		t.Fatal(failed[0])
	}
	want, _ := os.ReadFile(filepath.Join(ref, layout.ConfigFile))
	if got, _ := os.ReadFile(filepath.Join(out, layout.ConfigFile)); !bytes.Equal(got, want) {
		t.Errorf("sweb.yaml:\n%s\nwant\n%s", got, want)
	}
	t.Logf("byte-identical to upstream's task repo over %d dev tasks (%d with the x86_only line): %v", n, x86, same)
}

// TestVerifiedColumnsAndX86Only writes SWE-bench Verified as a task repo
// and reads it back with package taskrepo: every record's other columns
// (Verified's difficulty) are task.yaml keys and come back as they were;
// the USE_X86 ids (django__django-10097 among them) say x86_only: USE_X86
// and no other does; writing the records read back gives the same
// task.yaml files, byte for byte. A column named like a key of task.yaml's
// own is an error for its task, naming the column.
func TestVerifiedColumnsAndX86Only(t *testing.T) {
	shared := spectest.SharedDir(t)
	insts, err := dataset.Load(context.Background(), filepath.Join(shared, "datasets", "SWE-bench_Verified", "test.jsonl"), dataset.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(insts, func(i, j int) bool { return insts[i].InstanceID < insts[j].InstanceID })
	// upstream's USE_X86, as the reference lists it
	useX86 := map[string]bool{}
	list, err := os.ReadFile(filepath.Join(shared, "USE_X86_PY.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range strings.Fields(string(list)) {
		useX86[id] = true
	}
	r := newRenderer(t)
	out := t.TempDir()
	ctx := context.Background()
	if n, failed := Write(ctx, r, insts, Options{Out: out, Datasets: []string{"SWE-bench/SWE-bench_Verified"}}); len(failed) > 0 || n != 500 {
		t.Fatalf("wrote %d, failures %v", n, failed)
	}
	repo, err := taskrepo.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(repo.Tasks) != len(insts) {
		t.Fatalf("read back %d tasks of %d", len(repo.Tasks), len(insts))
	}
	x86, withDifficulty := 0, 0
	back := make([]core.Instance, len(insts))
	for i, task := range repo.Tasks {
		in := insts[i]
		if task.Instance.InstanceID != in.InstanceID {
			t.Fatalf("task %d is %s, want %s", i, task.Instance.InstanceID, in.InstanceID)
		}
		if !sameColumns(t, task.Instance.Extra, in.Extra) {
			t.Errorf("%s: other columns %q, want %q", in.InstanceID, task.Instance.Extra, in.Extra)
		}
		if len(in.Extra) == 1 && in.Extra[0].Name == "difficulty" {
			withDifficulty++
		}
		want := ""
		if useX86[in.InstanceID] {
			want, x86 = "USE_X86", x86+1
		}
		if task.X86Only != want {
			t.Errorf("%s: x86_only %q, want %q", in.InstanceID, task.X86Only, want)
		}
		back[i] = task.Instance
	}
	if x86 == 0 || withDifficulty != len(insts) {
		t.Errorf("%d USE_X86 tasks, %d with a difficulty; want some, and all %d", x86, withDifficulty, len(insts))
	}
	b, err := os.ReadFile(filepath.Join(out, layout.TasksDir, "django__django-10097", layout.TaskFile))
	if err != nil || !bytes.Contains(b, []byte("\nx86_only: USE_X86\n")) || !bytes.Contains(b, []byte("\ndifficulty: ")) {
		t.Errorf("django__django-10097's task.yaml:\n%s", b)
	}
	again := t.TempDir()
	if _, failed := Write(ctx, r, back, Options{Out: again, Datasets: []string{"SWE-bench/SWE-bench_Verified"}}); len(failed) > 0 {
		t.Fatal(failed[0])
	}
	for _, in := range insts {
		first, _ := os.ReadFile(filepath.Join(out, layout.TasksDir, in.InstanceID, layout.TaskFile))
		second, _ := os.ReadFile(filepath.Join(again, layout.TasksDir, in.InstanceID, layout.TaskFile))
		if !bytes.Equal(first, second) {
			t.Errorf("%s: task.yaml written from the records read back differs:\n%s\nfirst\n%s", in.InstanceID, second, first)
		}
	}
	t.Logf("%d tasks: %d say x86_only: USE_X86; difficulty kept in all", len(insts), x86)

	bad := insts[0]
	bad.Extra = append(bad.Extra, core.Column{Name: "split", Value: `"train"`})
	if _, failed := Write(ctx, r, []core.Instance{bad}, Options{Out: t.TempDir(), Datasets: []string{"x/y"}}); len(failed) != 1 ||
		!strings.Contains(failed[0].Error(), `column "split": a task.yaml key of its own`) {
		t.Errorf("a column named split: %v", failed)
	}
}

// sameColumns compares other columns by name and JSON value.
func sameColumns(t *testing.T, a, b []core.Column) bool {
	t.Helper()
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		var x, y any
		if a[i].Name != b[i].Name || json.Unmarshal([]byte(a[i].Value), &x) != nil || json.Unmarshal([]byte(b[i].Value), &y) != nil || !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// TestFixtureLogParsersFromProfile exports the fixture dataset (records
// without log_parser, repos upstream has no parser for) with the fixture's
// spec profile: each task.yaml names the parser the profile does, as the
// fixture's own task repo (scripts/fixture.sh taskrepo) does. It failed
// before: "the record has none and repo fixture/calc has no upstream parser".
func TestFixtureLogParsersFromProfile(t *testing.T) {
	fx := filepath.Join("..", "..", "..", "testdata", "fixture")
	tables, err := spec.LoadVersion(spec.VersionFinal)
	if err != nil {
		t.Fatal(err)
	}
	if err := tables.LoadExtra(filepath.Join(fx, "specs.json")); err != nil {
		t.Fatal(err)
	}
	insts, err := dataset.Load(context.Background(), filepath.Join(fx, "dataset.jsonl"), dataset.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	n, errs := Write(context.Background(), &render.Renderer{Tables: tables}, insts, Options{Out: out, Datasets: []string{"fixture"}})
	if len(errs) > 0 {
		t.Fatalf("writing the fixture's task repo: %v", errs[0])
	}
	if n != len(insts) || n != 7 {
		t.Fatalf("wrote %d tasks of %d records, want 7", n, len(insts))
	}
	for _, inst := range insts {
		got := readYAML(t, filepath.Join(out, layout.TasksDir, inst.InstanceID, layout.TaskFile))["log_parser"]
		want := readYAML(t, filepath.Join(fx, "taskrepo", layout.TasksDir, inst.InstanceID, layout.TaskFile))["log_parser"]
		if got != want || want == nil {
			t.Errorf("%s: log_parser %v, the fixture's task repo says %v", inst.InstanceID, got, want)
		}
	}
}
