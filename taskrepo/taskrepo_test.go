package taskrepo

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/dataset"
	"github.com/swebuild/swebuild/taskrepo/layout"
)

const crlfPatch = "diff --git a/x b/x\r\n--- a/x\r\n+++ b/x\r\n+one\r\n"

// writeRepo makes a task repo in a temporary directory: sweb.yaml and one
// task per id, each as upstream's tests/test_task_repo.py makes them, with
// edit applied to the files of the task it names.
func writeRepo(t *testing.T, config string, tasks map[string]map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if config != "" {
		write(t, filepath.Join(dir, layout.ConfigFile), config)
	}
	for id, edits := range tasks {
		files := map[string]string{
			layout.TaskFile: "instance_id: " + id + "\nrepo: x/y\nversion: '1.0'\nbase_commit: abc\nsplit: test\ndatasets:\n- x/y-dataset\n" +
				"image: " + ExpectedImage(id) + "\nlog_parser: parse_log_pytest\neval_type: pass_and_fail\ncreated_at: '2020-01-01T00:00:00Z'\n",
			layout.TestsFile:   `{"FAIL_TO_PASS": ["test_a"], "PASS_TO_PASS": []}`,
			layout.GoldPatch:   "diff --git a/y b/y\n",
			layout.TestPatch:   crlfPatch,
			layout.ProblemFile: "the issue for " + id,
			layout.EvalFile:    "#!/bin/bash\n: '>>>>> Start Test Output'\npytest\n: '>>>>> End Test Output'\n",
			layout.Dockerfile:  "FROM scratch\n",
		}
		for name, content := range edits {
			if content == "<delete>" {
				delete(files, name)
				continue
			}
			files[name] = content
		}
		for name, content := range files {
			write(t, filepath.Join(dir, layout.TasksDir, id, name), content)
		}
	}
	return dir
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

const config = "datasets:\n- x/y-dataset\nsplits:\n- dev\n- test\n"

func TestLoadTask(t *testing.T) {
	dir := writeRepo(t, config, map[string]map[string]string{"a__a-1": {layout.HintsFile: "a hint\r\n"}, "b__b-2": nil})
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Tasks) != 2 {
		t.Fatalf("got %d tasks, want 2", len(r.Tasks))
	}
	a := r.Tasks[0]
	in := a.Instance
	want := core.Instance{
		Repo: "x/y", InstanceID: "a__a-1", BaseCommit: "abc", Patch: "diff --git a/y b/y\n", TestPatch: crlfPatch,
		ProblemStatement: "the issue for a__a-1", HintsText: "a hint\r\n", CreatedAt: "2020-01-01T00:00:00Z", Version: "1.0",
		FailToPass: []string{"test_a"}, PassToPass: []string{}, EvalScript: "#!/bin/bash\n: '>>>>> Start Test Output'\npytest\n: '>>>>> End Test Output'\n",
		LogParser: "parse_log_pytest", EvalType: "pass_and_fail", Image: "swebench/sweb.eval.x86_64.a_1776_a-1:latest",
		Source: "tasks/a__a-1/task.yaml",
	}
	gotJSON, _ := json.Marshal(in)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) || in.Source != want.Source {
		t.Errorf("instance:\n got %s %s\nwant %s %s", gotJSON, in.Source, wantJSON, want.Source)
	}
	if a.Dir != filepath.Join(dir, layout.TasksDir, "a__a-1") || string(a.Dockerfile) != "FROM scratch\n" || a.Split != "test" {
		t.Errorf("task: dir %s, Dockerfile %q, split %q", a.Dir, a.Dockerfile, a.Split)
	}
	if r.Tasks[1].Instance.HintsText != "" {
		t.Errorf("no hints.md: got hints %q", r.Tasks[1].Instance.HintsText)
	}
}

// TestCheck holds Open to upstream's checks (swebench/task/checks.py): each
// case breaks one task, whose problem must name the task, the file and
// what is wrong, while the good task still loads.
func TestCheck(t *testing.T) {
	tests := []struct {
		name  string
		edits map[string]string
		want  string // substring of the one error
	}{
		{"missing file", map[string]string{layout.EvalFile: "<delete>", layout.Dockerfile: "<delete>"}, "tasks/bad__x-1/: missing Dockerfile, eval.sh"},
		{"task.yaml not YAML", map[string]string{layout.TaskFile: "a: [\n"}, "tasks/bad__x-1/task.yaml: not valid YAML"},
		{"missing key", map[string]string{layout.TaskFile: "instance_id: bad__x-1\nrepo: x/y\nversion: '1'\nbase_commit: abc\nsplit: test\ndatasets: [x/y-dataset]\nimage: swebench/sweb.eval.x86_64.bad_1776_x-1:latest\nlog_parser: p\n"}, `tasks/bad__x-1/task.yaml: field "eval_type": missing`},
		{"instance_id not the directory", map[string]string{layout.TaskFile: "instance_id: other__x-1\nrepo: x/y\nversion: '1'\nbase_commit: abc\nsplit: test\ndatasets: [x/y-dataset]\nimage: swebench/sweb.eval.x86_64.bad_1776_x-1:latest\nlog_parser: p\neval_type: e\n"}, `tasks/bad__x-1/task.yaml:1: field "instance_id": is "other__x-1"`},
		{"split not in sweb.yaml", map[string]string{layout.TaskFile: "instance_id: bad__x-1\nrepo: x/y\nversion: '1'\nbase_commit: abc\nsplit: py_noop\ndatasets: [x/y-dataset]\nimage: swebench/sweb.eval.x86_64.bad_1776_x-1:latest\nlog_parser: p\neval_type: e\n"}, `task.yaml:5: field "split": "py_noop" is not in sweb.yaml`},
		{"unknown dataset", map[string]string{layout.TaskFile: "instance_id: bad__x-1\nrepo: x/y\nversion: '1'\nbase_commit: abc\nsplit: test\ndatasets: [x/other]\nimage: swebench/sweb.eval.x86_64.bad_1776_x-1:latest\nlog_parser: p\neval_type: e\n"}, `field "datasets": not published by sweb.yaml: x/other`},
		{"no datasets", map[string]string{layout.TaskFile: "instance_id: bad__x-1\nrepo: x/y\nversion: '1'\nbase_commit: abc\nsplit: test\nimage: swebench/sweb.eval.x86_64.bad_1776_x-1:latest\nlog_parser: p\neval_type: e\n"}, `field "datasets": does not say which datasets it belongs to`},
		{"image not derived", map[string]string{layout.TaskFile: "instance_id: bad__x-1\nrepo: x/y\nversion: '1'\nbase_commit: abc\nsplit: test\ndatasets: [x/y-dataset]\nimage: swebench/sweb.eval.x86_64.bad__x-1:latest\nlog_parser: p\neval_type: e\n"}, `task.yaml:7: field "image": "swebench/sweb.eval.x86_64.bad__x-1:latest" is not the derived name`},
		{"tests.json not JSON", map[string]string{layout.TestsFile: "{"}, "tasks/bad__x-1/tests.json: not valid JSON"},
		{"tests.json list of non-strings", map[string]string{layout.TestsFile: `{"FAIL_TO_PASS": [1], "PASS_TO_PASS": []}`}, `tests.json: field "FAIL_TO_PASS": not a list of strings`},
		{"empty FAIL_TO_PASS", map[string]string{layout.TestsFile: `{"FAIL_TO_PASS": [], "PASS_TO_PASS": []}`}, `field "FAIL_TO_PASS": empty, so nothing grades this task`},
		{"eval.sh without end marker", map[string]string{layout.EvalFile: ": '>>>>> Start Test Output'\n"}, `tasks/bad__x-1/eval.sh: has no ">>>>> End Test Output" marker`},
		{"patch not a diff", map[string]string{layout.GoldPatch: "gold"}, "tasks/bad__x-1/gold.patch: does not look like a diff"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeRepo(t, config, map[string]map[string]string{"bad__x-1": tc.edits, "good__x-2": nil})
			r, err := Open(dir)
			var ce *CheckError
			if !errors.As(err, &ce) {
				t.Fatalf("got error %v, want a *CheckError", err)
			}
			if len(ce.Problems) != 1 || !strings.Contains(ce.Problems[0].Error(), tc.want) || ce.Problems[0].Task != "bad__x-1" {
				t.Fatalf("got problems %v, want one for bad__x-1 containing %q", ce.Problems, tc.want)
			}
			if r == nil || len(r.Tasks) != 1 || r.Tasks[0].Instance.InstanceID != "good__x-2" || !slices.Equal(r.Invalid, []string{"bad__x-1"}) {
				t.Fatalf("the good task must load and the bad one be left out: %+v", r)
			}
			if _, err := r.Select([]string{"bad__x-1"}); err == nil || !strings.Contains(err.Error(), "bad__x-1") {
				t.Errorf("selecting the bad task: got %v", err)
			}
		})
	}
}

func TestRepoProblems(t *testing.T) {
	tests := []struct {
		name   string
		config string
		tasks  map[string]map[string]string
		want   string
	}{
		{"no sweb.yaml", "", map[string]map[string]string{"a__a-1": nil}, "sweb.yaml"},
		{"no datasets", "splits: [test]\n", map[string]map[string]string{"a__a-1": nil}, `sweb.yaml: field "datasets": does not name any datasets`},
		{"no tasks dir", config, nil, "has no tasks/ directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeRepo(t, tc.config, tc.tasks)
			r, err := Open(dir)
			if r != nil || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, %v; want no repo and %q", r, err, tc.want)
			}
		})
	}
	// a directory without task.yaml is reported and is no task
	dir := writeRepo(t, config, map[string]map[string]string{"a__a-1": nil})
	if err := os.Mkdir(filepath.Join(dir, layout.TasksDir, "scratch"), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir)
	if err == nil || !strings.Contains(err.Error(), "tasks/scratch/: no task.yaml, so it is not a task") || len(r.Tasks) != 1 {
		t.Fatalf("stray directory: got %v", err)
	}
}

func TestSelect(t *testing.T) {
	dev := map[string]string{layout.TaskFile: "instance_id: b__b-2\nrepo: x/y\nversion: '1'\nbase_commit: abc\nsplit: dev\ndatasets: [x/y-dataset]\nimage: swebench/sweb.eval.x86_64.b_1776_b-2:latest\nlog_parser: p\neval_type: e\n"}
	dep := map[string]string{layout.TaskFile: "instance_id: c__c-3\nrepo: x/y\nversion: '1'\nbase_commit: abc\nsplit: deprecated\nimage: swebench/sweb.eval.x86_64.c_1776_c-3:latest\nlog_parser: p\neval_type: e\n",
		layout.TestsFile: `{"FAIL_TO_PASS": [], "PASS_TO_PASS": []}`}
	dir := writeRepo(t, config, map[string]map[string]string{"a__a-1": nil, "b__b-2": dev, "c__c-3": dep})
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(ts []Task) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Instance.InstanceID)
		}
		return out
	}
	tests := []struct {
		ask     []string
		want    []string
		wantErr string
	}{
		{nil, []string{"a__a-1", "b__b-2"}, ""},                          // published splits only: no deprecated task
		{[]string{"c__c-3"}, []string{"c__c-3"}, ""},                     // by id from any split
		{[]string{"b__b-2", "a__a-1"}, []string{"b__b-2", "a__a-1"}, ""}, // the order asked
		{[]string{"a__a-1", "nope__nope-1"}, []string{"a__a-1"}, "nope__nope-1"},
	}
	for _, tc := range tests {
		got, err := r.Select(tc.ask)
		if !slices.Equal(ids(got), tc.want) || (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("Select(%v) = %v, %v; want %v, %q", tc.ask, ids(got), err, tc.want, tc.wantErr)
		}
	}
	only := writeRepo(t, "datasets: [x/y-dataset]\n", map[string]map[string]string{"c__c-3": dep})
	r, err = Open(only)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Select(nil); err == nil || !strings.Contains(err.Error(), "no task in the published splits test; the tree holds deprecated (1)") {
		t.Errorf("empty selection: got %v", err)
	}
}

// TestMultimodalReference opens the copy of upstream's Multimodal task repo
// (SWE-bench/swe-bench-multimodal-dockerfiles at 8d3ed32f): no problems,
// the task counts per split its SOURCE.json gives, and every task that is
// also in the SWE-bench_Multimodal dev dataset file gives the same record
// fields as that record.
func TestMultimodalReference(t *testing.T) {
	shared := spectest.SharedDir(t)
	dir := filepath.Join(shared, "upstream-v5", "task-repo-multimodal")
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var src struct {
		TaskDirs int            `json:"task_dirs"`
		BySplit  map[string]int `json:"task_dirs_by_split"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "SOURCE.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &src); err != nil {
		t.Fatal(err)
	}
	splits := map[string]int{}
	for _, tk := range r.Tasks {
		splits[tk.Split]++
	}
	if len(r.Tasks) != src.TaskDirs || len(splits) != len(src.BySplit) {
		t.Fatalf("got %d tasks %v, want %d %v", len(r.Tasks), splits, src.TaskDirs, src.BySplit)
	}
	for s, n := range src.BySplit {
		if splits[s] != n {
			t.Errorf("split %s: %d tasks, want %d", s, splits[s], n)
		}
	}
	sel, err := r.Select(nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := src.BySplit["dev"] + src.BySplit["test"]; len(sel) != want {
		t.Errorf("published: %d tasks, want dev + test = %d", len(sel), want)
	}
	recs, err := dataset.Load(context.Background(), filepath.Join(shared, "datasets", "SWE-bench_Multimodal", "dev.jsonl"), dataset.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]*Task{}
	for i := range r.Tasks {
		byID[r.Tasks[i].Instance.InstanceID] = &r.Tasks[i]
	}
	compared := 0
	for _, rec := range recs {
		tk, ok := byID[rec.InstanceID]
		if !ok {
			continue // the other half of the reference
		}
		compared++
		in := tk.Instance
		for _, f := range []struct{ name, got, want string }{
			{"repo", in.Repo, rec.Repo}, {"base_commit", in.BaseCommit, rec.BaseCommit}, {"patch", in.Patch, rec.Patch},
			{"test_patch", in.TestPatch, rec.TestPatch}, {"problem_statement", in.ProblemStatement, rec.ProblemStatement},
			{"FAIL_TO_PASS", strings.Join(in.FailToPass, "\x00"), strings.Join(rec.FailToPass, "\x00")},
		} {
			if f.got != f.want {
				t.Errorf("%s: %s differs from the dataset record", rec.InstanceID, f.name)
			}
		}
		if in.EvalScript == "" || in.LogParser == "" || in.Image != ExpectedImage(rec.InstanceID) || len(tk.Dockerfile) == 0 {
			t.Errorf("%s: eval.sh, log_parser, image or Dockerfile missing", rec.InstanceID)
		}
	}
	if compared < 50 {
		t.Errorf("only %d tasks compared with dev.jsonl records", compared)
	}
	t.Logf("%d tasks, %d published, %d compared with dev.jsonl", len(r.Tasks), len(sel), compared)
}

// TestFixtureTaskRepo opens the fixture's task repo (scripts/fixture.sh
// taskrepo): no problems, the 7 tasks of dataset.jsonl, each with the
// record's fields, its own eval.sh recording the test exit status after the
// end marker, and a Dockerfile that COPYs the git bundle from its directory.
func TestFixtureTaskRepo(t *testing.T) {
	fixture := filepath.Join("..", "testdata", "fixture")
	r, err := Open(filepath.Join(fixture, "taskrepo"))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := dataset.Load(context.Background(), filepath.Join(fixture, "dataset.jsonl"), dataset.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sel, err := r.Select(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(sel) != len(recs) {
		t.Fatalf("%d tasks, want the %d records of dataset.jsonl", len(sel), len(recs))
	}
	for i, rec := range recs {
		in := sel[i].Instance
		rec.Source, in.Source = "", ""
		eval, parser, image, evalType := in.EvalScript, in.LogParser, in.Image, in.EvalType
		in.EvalScript, in.LogParser, in.Image, in.EvalType = "", "", "", ""
		got, _ := json.Marshal(in)
		want, _ := json.Marshal(rec)
		if string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", rec.InstanceID, got, want)
		}
		// Upstream's task repos' shape: the harness adds the exit-status
		// recording (record_test_exit_code), so eval.sh must not have it.
		if !strings.Contains(eval, "\n: '>>>>> End Test Output'\n") || strings.Contains(eval, "Test Exit Code") || strings.Contains(eval, "SWEBENCH_TEST_EXIT_CODE") {
			t.Errorf("%s: eval.sh is not in the shape of upstream's task repos (end marker, no exit-status recording of its own)", rec.InstanceID)
		}
		if parser == "" || evalType != "pass_and_fail" || image != ExpectedImage(rec.InstanceID) {
			t.Errorf("%s: log_parser %q, eval_type %q, image %q", rec.InstanceID, parser, evalType, image)
		}
		if !strings.Contains(string(sel[i].Dockerfile), "\nCOPY repo.bundle ") {
			t.Errorf("%s: the Dockerfile does not COPY its bundle", rec.InstanceID)
		}
		if _, err := os.Stat(filepath.Join(sel[i].Dir, "repo.bundle")); err != nil {
			t.Error(err)
		}
	}
}

// TestSymlinks (issue 28, row "Low"): a task directory that is a symbolic
// link is reported and left out (it used to be skipped without a word),
// and a task file that is a symbolic link out of the repo is refused,
// naming where it leads (it used to be read: /etc/passwd as a problem
// statement); a link to a file inside the repo is read.
func TestSymlinks(t *testing.T) {
	dir := writeRepo(t, config, map[string]map[string]string{"a__a-1": nil, "b__b-2": nil, "c__c-3": nil})
	outside := filepath.Join(t.TempDir(), "secret.md")
	write(t, outside, "not the repo's")
	elsewhere := writeRepo(t, config, map[string]map[string]string{"d__d-4": nil})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(filepath.Join(elsewhere, layout.TasksDir, "d__d-4"), filepath.Join(dir, layout.TasksDir, "d__d-4")))
	problem := filepath.Join(dir, layout.TasksDir, "b__b-2", layout.ProblemFile)
	must(os.Remove(problem))
	must(os.Symlink(outside, problem))
	hints := filepath.Join(dir, layout.TasksDir, "c__c-3", layout.HintsFile)
	must(os.Symlink(filepath.Join("..", "a__a-1", layout.ProblemFile), hints))

	r, err := Open(dir)
	var ce *CheckError
	if !errors.As(err, &ce) || len(ce.Problems) != 2 {
		t.Fatalf("got %v, want two problems", err)
	}
	wants := []string{
		"error: tasks/b__b-2/problem_statement.md: a symbolic link to " + outside + ", outside the task repo: not read",
		"error: tasks/d__d-4: a symbolic link (to " + filepath.Join(elsewhere, layout.TasksDir, "d__d-4") + "), not a directory of the repo: left out",
	}
	for i, w := range wants {
		if !strings.Contains(ce.Problems[i].Error(), w) {
			t.Errorf("problem %d: %q, want it to contain %q", i, ce.Problems[i].Error(), w)
		}
	}
	var ids []string
	for _, tk := range r.Tasks {
		ids = append(ids, tk.Instance.InstanceID)
		if strings.Contains(tk.Instance.ProblemStatement, "not the repo's") {
			t.Errorf("%s: read the file outside the repo", tk.Instance.InstanceID)
		}
	}
	slices.Sort(r.Invalid)
	if !slices.Equal(ids, []string{"a__a-1", "c__c-3"}) || !slices.Equal(r.Invalid, []string{"b__b-2", "d__d-4"}) {
		t.Errorf("tasks %v, invalid %v; want a__a-1 c__c-3, invalid b__b-2 d__d-4", ids, r.Invalid)
	}
	if got := r.Tasks[1].Instance.HintsText; got != "the issue for a__a-1" {
		t.Errorf("a link inside the repo: hints %q, want a__a-1's problem statement", got)
	}
}

// TestOtherKeysAndX86Only: task.yaml keys with no field of their own are
// the record's other columns (core.Instance.Extra, JSON text, in order,
// numbers as written); x86_only says why the task gets no linux/arm64, and
// an empty one is an error.
func TestOtherKeysAndX86Only(t *testing.T) {
	meta := func(id, extra string) string {
		return "instance_id: " + id + "\nrepo: x/y\nversion: '1.0'\nbase_commit: abc\nsplit: test\ndatasets:\n- x/y-dataset\n" +
			"image: " + ExpectedImage(id) + "\nlog_parser: parse_log_pytest\neval_type: pass_and_fail\n" + extra
	}
	dir := writeRepo(t, config, map[string]map[string]string{
		"a__a-1": {layout.TaskFile: meta("a__a-1", "difficulty: 15 min - 1 hour\nscore: 1.50\ntags:\n- x\n- 2\nnested: {b: null, a: [true]}\nx86_only: USE_X86\n")},
		"b__b-2": {layout.TaskFile: meta("b__b-2", "x86_only: ''\n")},
	})
	r, err := Open(dir)
	var ce *CheckError
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || !strings.Contains(ce.Problems[0].Error(), `tasks/b__b-2/task.yaml:11: field "x86_only": empty`) {
		t.Fatalf("got %v, want b__b-2's empty x86_only", err)
	}
	a := r.Tasks[0]
	want := []core.Column{{Name: "difficulty", Value: `"15 min - 1 hour"`}, {Name: "score", Value: "1.50"},
		{Name: "tags", Value: `["x",2]`}, {Name: "nested", Value: `{"b":null,"a":[true]}`}}
	if !slices.Equal(a.Instance.Extra, want) || a.X86Only != "USE_X86" {
		t.Errorf("other columns %q, x86-only %q; want %q, USE_X86", a.Instance.Extra, a.X86Only, want)
	}
}
