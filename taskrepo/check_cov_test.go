package taskrepo

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/taskrepo/layout"
)

// taskYAML is a valid task.yaml of id with extra lines appended.
func taskYAML(id, extra string) string {
	return "instance_id: " + id + "\nrepo: x/y\nversion: '1.0'\nbase_commit: abc\nsplit: test\ndatasets:\n- x/y-dataset\n" +
		"image: " + ExpectedImage(id) + "\nlog_parser: parse_log_pytest\neval_type: pass_and_fail\n" + extra
}

// TestCollidingTaskIDs: two task directories whose ids give the same image
// names ("__" is written "_1776_"): the first (by name) is kept, the
// other is an error naming both and left out.
func TestCollidingTaskIDs(t *testing.T) {
	dir := writeRepo(t, config, map[string]map[string]string{"a__a-1": nil, "a_1776_a-1": nil, "b__b-2": nil})
	r, err := Open(dir)
	var ce *CheckError
	if !errors.As(err, &ce) || len(ce.Problems) != 1 {
		t.Fatalf("err = %v, want one problem", err)
	}
	p := ce.Problems[0]
	if p.Task != "a__a-1" || p.Where != "tasks/a__a-1/" || !strings.HasPrefix(p.Msg, "gets the same image names as a_1776_a-1 (") || !strings.HasSuffix(p.Msg, "); the first is kept") {
		t.Errorf("problem = %+v", p)
	}
	var ids []string
	for _, tk := range r.Tasks {
		ids = append(ids, tk.Instance.InstanceID)
	}
	if !slices.Equal(ids, []string{"a_1776_a-1", "b__b-2"}) || !slices.Equal(r.Invalid, []string{"a__a-1"}) {
		t.Errorf("tasks %v, invalid %v", ids, r.Invalid)
	}
	if got := Instances(r.Tasks); len(got) != 2 || got[0].InstanceID != "a_1776_a-1" || got[1].InstanceID != "b__b-2" || got[1].Repo != "x/y" {
		t.Errorf("Instances = %+v", got)
	}
}

// TestTaskFileProblems: more ways a task's files can be wrong, each one
// error naming the file, the line or field where known.
func TestTaskFileProblems(t *testing.T) {
	deep := strings.Repeat("[", 102) + strings.Repeat("]", 102)
	for _, tc := range []struct {
		name  string
		edits map[string]string
		want  string
	}{
		{"task.yaml a list", map[string]string{layout.TaskFile: "- a\n- b\n"}, "tasks/bad__x-1/task.yaml: not a mapping"},
		{"repo not a string", map[string]string{layout.TaskFile: strings.Replace(taskYAML("bad__x-1", ""), "repo: x/y", "repo: [x, y]", 1)}, `tasks/bad__x-1/task.yaml:2: field "repo": not a string`},
		{"version null", map[string]string{layout.TaskFile: strings.Replace(taskYAML("bad__x-1", ""), "version: '1.0'", "version: null", 1)}, `tasks/bad__x-1/task.yaml:3: field "version": not a string`},
		{"column with a list key", map[string]string{layout.TaskFile: taskYAML("bad__x-1", "odd:\n  ? [1, 2]\n  : x\n")}, `field "odd": line 12: a mapping key that is not a scalar`},
		{"column nested too deeply", map[string]string{layout.TaskFile: taskYAML("bad__x-1", "deep: "+deep+"\n")}, `tasks/bad__x-1/task.yaml:11: field "deep": nested too deeply`},
		{"image_assets with a list key", map[string]string{layout.TaskFile: taskYAML("bad__x-1", "image_assets:\n  ? [a]\n  : b\n")}, `field "image_assets": line 12: a mapping key that is not a scalar`},
		{"tests.json without PASS_TO_PASS", map[string]string{layout.TestsFile: `{"FAIL_TO_PASS": ["t"]}`}, `tasks/bad__x-1/tests.json: field "PASS_TO_PASS": missing`},
		{"tests.json FAIL_TO_PASS null", map[string]string{layout.TestsFile: `{"FAIL_TO_PASS": null, "PASS_TO_PASS": []}`}, `tasks/bad__x-1/tests.json: field "FAIL_TO_PASS": not a list of strings`},
		{"empty Dockerfile", map[string]string{layout.Dockerfile: " \n\t\n"}, "tasks/bad__x-1/Dockerfile: empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeRepo(t, config, map[string]map[string]string{"bad__x-1": tc.edits, "good__x-2": nil})
			r, err := Open(dir)
			var ce *CheckError
			if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Task != "bad__x-1" || !strings.Contains(ce.Problems[0].Error(), tc.want) {
				t.Fatalf("err = %v, want one problem of bad__x-1 containing %q", err, tc.want)
			}
			if r == nil || len(r.Tasks) != 1 || r.Tasks[0].Instance.InstanceID != "good__x-2" {
				t.Errorf("the good task must still load: %+v", r)
			}
		})
	}
}

// TestDatasetsNotAList: a datasets value that is not a list is said, and
// the task then names no dataset.
func TestDatasetsNotAList(t *testing.T) {
	meta := strings.Replace(taskYAML("bad__x-1", ""), "datasets:\n- x/y-dataset", "datasets: {x: y}", 1)
	dir := writeRepo(t, config, map[string]map[string]string{"bad__x-1": {layout.TaskFile: meta}})
	_, err := Open(dir)
	var ce *CheckError
	if !errors.As(err, &ce) || len(ce.Problems) != 2 ||
		ce.Problems[0].Error() != `error: tasks/bad__x-1/task.yaml:6: field "datasets": not a list of strings` ||
		ce.Problems[1].Error() != `error: tasks/bad__x-1/task.yaml: field "datasets": does not say which datasets it belongs to` {
		t.Errorf("err = %v", err)
	}
}

// TestOverSizeFile: a task file over MaxFileBytes is an error naming it
// and the limit, not read whole.
func TestOverSizeFile(t *testing.T) {
	dir := writeRepo(t, config, map[string]map[string]string{"bad__x-1": nil, "good__x-2": nil})
	big := filepath.Join(dir, layout.TasksDir, "bad__x-1", layout.GoldPatch)
	if err := os.Truncate(big, MaxFileBytes+1); err != nil { // sparse: no disk written
		t.Fatal(err)
	}
	_, err := Open(dir)
	var ce *CheckError
	want := "error: tasks/bad__x-1/gold.patch: " + big + " is over " + strconv.Itoa(MaxFileBytes) + " bytes"
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Error() != want {
		t.Fatalf("err = %v\nwant the one problem %q", err, want)
	}
}

// TestDeprecatedTask: a deprecated task needs no dataset and may grade
// nothing; it loads, and is built only when named.
func TestDeprecatedTask(t *testing.T) {
	old := strings.Replace(strings.Replace(taskYAML("old__x-1", ""), "split: test", "split: deprecated", 1), "datasets:\n- x/y-dataset\n", "", 1)
	dir := writeRepo(t, config, map[string]map[string]string{
		"old__x-1": {layout.TaskFile: old, layout.TestsFile: `{"FAIL_TO_PASS": [], "PASS_TO_PASS": []}`},
		"new__x-2": nil,
	})
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	sel, err := r.Select(nil)
	if err != nil || len(sel) != 1 || sel[0].Instance.InstanceID != "new__x-2" {
		t.Errorf("default selection %v, %v; want new__x-2 only", sel, err)
	}
	sel, err = r.Select([]string{"old__x-1"})
	if err != nil || len(sel) != 1 || sel[0].Split != DeprecatedSplit {
		t.Errorf("named: %v, %v", sel, err)
	}
}

// TestYAMLColumns: other task.yaml columns become JSON text: numbers as
// written where JSON allows, YAML-only integer forms as their value,
// other scalars (timestamps, .inf) as strings, aliases resolved.
func TestYAMLColumns(t *testing.T) {
	extra := "hex: 0x1f\nunderscored: 1_000\nneg: -3\nscore: 1.50\ninf: .inf\nwhen: 2020-01-01\nflag: true\nword: yes\n" +
		"anchor: &a [1, two]\nagain: *a\nhtml: <b>&</b>\n" +
		"image_assets:\n  problem_statement:\n  - https://example.org/a.png\n"
	dir := writeRepo(t, config, map[string]map[string]string{"a__a-1": {layout.TaskFile: taskYAML("a__a-1", extra)}})
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	in := r.Tasks[0].Instance
	want := []core.Column{
		{Name: "hex", Value: "31"}, {Name: "underscored", Value: "1000"}, {Name: "neg", Value: "-3"}, {Name: "score", Value: "1.50"},
		{Name: "inf", Value: `".inf"`}, {Name: "when", Value: `"2020-01-01"`}, {Name: "flag", Value: "true"}, {Name: "word", Value: `"yes"`},
		{Name: "anchor", Value: `[1,"two"]`}, {Name: "again", Value: `[1,"two"]`}, {Name: "html", Value: `"<b>&</b>"`},
	}
	if !slices.Equal(in.Extra, want) {
		t.Errorf("columns\n%q\nwant\n%q", in.Extra, want)
	}
	if in.ImageAssets != `{"problem_statement":["https://example.org/a.png"]}` {
		t.Errorf("image_assets = %s", in.ImageAssets)
	}
}

// TestPlanJSONAndWrite: `swebuild plan --format json` lists each task's
// platforms, rules and directory; Write puts each platform's Dockerfile
// and the eval script under <id>/<arch>/.
func TestPlanJSONAndWrite(t *testing.T) {
	dir := writeRepo(t, config, map[string]map[string]string{
		"a__a-1": {layout.Dockerfile: "FROM --platform=linux/amd64 python:3.11\n"},
		"b__b-2": {layout.TaskFile: taskYAML("b__b-2", "x86_only: USE_X86\n")},
	})
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := PlanTasks(r.Tasks, PlanOptions{
		Platforms: []core.Platform{core.AMD64, core.ARM64},
		Language:  func(repo string) string { return map[string]string{"x/y": "py"}[repo] },
		RewriteArm64: func(df []byte) (Arm64, error) {
			return Arm64{Dockerfile: []byte(strings.Replace(string(df), "linux/amd64", "linux/arm64", 1)), Applied: []string{"flat-platform"}}, nil
		},
	})
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"tasks":[` +
		`{"instance_id":"a__a-1","split":"test","language":"py","platforms":["linux/amd64","linux/arm64"],"arm64_rules_applied":["flat-platform"],"dir":` + strconv.Quote(filepath.Join(dir, layout.TasksDir, "a__a-1")) + `},` +
		`{"instance_id":"b__b-2","split":"test","language":"py","platforms":["linux/amd64"],"x86_only":"USE_X86","dir":` + strconv.Quote(filepath.Join(dir, layout.TasksDir, "b__b-2")) + `}]}`
	if string(b) != want {
		t.Errorf("plan JSON\n%s\nwant\n%s", b, want)
	}
	if b, err := json.Marshal(Plan{}); err != nil || string(b) != `{"tasks":[]}` {
		t.Errorf("empty plan JSON %s, %v", b, err)
	}

	out := t.TempDir()
	n, err := p.Write(out)
	if err != nil || n != 3 {
		t.Fatalf("Write = %d, %v; want 3 (task, platform) pairs", n, err)
	}
	for _, f := range []struct{ path, want string }{
		{"a__a-1/x86_64/Dockerfile", "FROM --platform=linux/amd64 python:3.11\n"},
		{"a__a-1/arm64/Dockerfile", "FROM --platform=linux/arm64 python:3.11\n"},
		{"b__b-2/x86_64/Dockerfile", "FROM scratch\n"},
		{"a__a-1/arm64/eval.sh", "#!/bin/bash\n: '>>>>> Start Test Output'\npytest\n: '>>>>> End Test Output'\n"},
	} {
		got, err := os.ReadFile(filepath.Join(out, f.path))
		if err != nil || string(got) != f.want {
			t.Errorf("%s = %q, %v; want %q", f.path, got, err, f.want)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "b__b-2", "arm64")); !os.IsNotExist(err) {
		t.Errorf("an x86-only task got an arm64 directory: %v", err)
	}

	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write(file); err == nil || !strings.HasPrefix(err.Error(), "writing a__a-1: ") {
		t.Errorf("Write under a file: err = %v", err)
	}
}
