package taskwrite

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/taskrepo/layout"
)

// checkRepo is upstream's `check` of a task repo (swebench/task/checks.py,
// check_task_repo without --fix) as read from its source: sweb.yaml names
// datasets; every task dir has the required files, task.yaml has the
// required keys, its instance_id is the dir name, tests.json holds two lists
// of strings with a non-empty FAIL_TO_PASS, datasets and split are
// published, image is the derived name, eval.sh has both markers, and each
// non-empty patch holds "diff --git".
func checkRepo(t *testing.T, root string) []string {
	t.Helper()
	var problems []string
	add := func(where, format string, args ...any) {
		problems = append(problems, where+": "+fmt.Sprintf(format, args...))
	}
	cfg := readYAML(t, filepath.Join(root, layout.ConfigFile))
	toSet := func(v any) map[string]bool {
		out := map[string]bool{}
		l, _ := v.([]any)
		for _, e := range l {
			if s, ok := e.(string); ok {
				out[s] = true
			}
		}
		return out
	}
	datasets, splits := toSet(cfg["datasets"]), toSet(cfg["splits"])
	if len(datasets) == 0 {
		return []string{layout.ConfigFile + ": does not name any datasets"}
	}
	ents, err := os.ReadDir(filepath.Join(root, layout.TasksDir))
	if err != nil || len(ents) == 0 {
		return []string{"tasks/: no task directories"}
	}
	for _, e := range ents {
		dir := filepath.Join(root, layout.TasksDir, e.Name())
		where := "tasks/" + e.Name()
		for _, f := range []string{layout.TaskFile, layout.TestsFile, layout.Dockerfile, layout.GoldPatch, layout.TestPatch, layout.EvalFile, layout.ProblemFile} {
			if st, err := os.Stat(filepath.Join(dir, f)); err != nil || !st.Mode().IsRegular() {
				add(where, "missing %s", f)
			}
		}
		meta := readYAML(t, filepath.Join(dir, layout.TaskFile))
		for _, k := range []string{"instance_id", "repo", "version", "base_commit", "split", "image", "log_parser", "eval_type"} {
			if _, ok := meta[k]; !ok {
				add(where, "task.yaml has no %s", k)
			}
		}
		if id, ok := meta["instance_id"]; ok && id != e.Name() {
			add(where, "task.yaml instance_id is %v", id)
		}
		var tests map[string]any
		raw, _ := os.ReadFile(filepath.Join(dir, layout.TestsFile))
		if err := json.Unmarshal(raw, &tests); err != nil {
			add(where, "tests.json is not valid JSON: %v", err)
		}
		for _, k := range []string{"FAIL_TO_PASS", "PASS_TO_PASS"} {
			l, ok := tests[k].([]any)
			if !ok {
				add(where, "tests.json %s is not a list", k)
			}
			for _, v := range l {
				if _, ok := v.(string); !ok {
					add(where, "%s holds something that is not a string", k)
				}
			}
		}
		if l, _ := tests["FAIL_TO_PASS"].([]any); len(l) == 0 && meta["split"] != "deprecated" {
			add(where, "no FAIL_TO_PASS, so nothing grades this task")
		}
		claimed, ok := meta["datasets"].([]any)
		if !ok || len(claimed) == 0 {
			add(where, "task.yaml does not say which datasets it belongs to")
		}
		for d := range toSet(meta["datasets"]) {
			if !datasets[d] {
				add(where, "datasets not published by sweb.yaml: %s", d)
			}
		}
		if s, _ := meta["split"].(string); !splits[s] && s != "deprecated" {
			add(where, "split %q is not in sweb.yaml", s)
		}
		if meta["image"] != ExpectedImage(e.Name()) {
			add(where, "image %v is not the derived name", meta["image"])
		}
		eval, _ := os.ReadFile(filepath.Join(dir, layout.EvalFile))
		for _, m := range []string{">>>>> Start Test Output", ">>>>> End Test Output"} {
			if !strings.Contains(string(eval), m) {
				add(where, "eval.sh has no %q marker", m)
			}
		}
		for _, p := range []string{layout.GoldPatch, layout.TestPatch} {
			b, _ := os.ReadFile(filepath.Join(dir, p))
			if len(b) > 0 && !strings.Contains(string(b), "diff --git") {
				add(where, "%s does not look like a diff", p)
			}
		}
	}
	return problems
}

// TestWrittenReposPassUpstreamChecks writes SWE-bench Verified (v4-era
// records: no eval_script, log_parser or eval_type, so they are derived)
// and Multimodal dev (v5-era records) as task repos and runs upstream's
// checks over them: no problem. The same checks find the problems planted
// in a copy (so they can fail).
func TestWrittenReposPassUpstreamChecks(t *testing.T) {
	shared := spectest.SharedDir(t)
	r := newRenderer(t)
	for _, c := range []struct{ split, dataset string }{
		{"SWE-bench_Verified/test", "SWE-bench/SWE-bench_Verified"},
		{"SWE-bench_Multimodal/dev", multimodal},
	} {
		recs := spectest.Records(t, shared, c.split)[c.split]
		insts := make([]core.Instance, 0, len(recs))
		for _, inst := range recs {
			insts = append(insts, *inst)
		}
		out := t.TempDir()
		n, failed := Write(context.Background(), r, insts, Options{Out: out, Datasets: []string{c.dataset}, Split: strings.SplitN(c.split, "/", 2)[1]})
		for _, f := range failed {
			t.Errorf("%s: %v", c.split, f)
		}
		if problems := checkRepo(t, out); len(problems) > 0 || n != len(insts) {
			t.Errorf("%s: %d of %d tasks written; upstream's checks report %d problems: %v", c.split, n, len(insts), len(problems), problems[:min(5, len(problems))])
		}
		t.Logf("%s: %d tasks pass upstream's checks", c.split, n)
		if c.dataset != multimodal {
			continue
		}
		// Plant one problem of each kind in a task and see each reported.
		id := insts[0].InstanceID
		dir := filepath.Join(out, layout.TasksDir, id)
		must(t, os.WriteFile(filepath.Join(dir, layout.EvalFile), []byte("#!/bin/bash\n"), 0o644))
		must(t, os.WriteFile(filepath.Join(dir, layout.TestsFile), []byte(`{"FAIL_TO_PASS": [], "PASS_TO_PASS": [1]}`), 0o644))
		must(t, os.Remove(filepath.Join(dir, layout.GoldPatch)))
		problems := checkRepo(t, out)
		if len(problems) != 5 || !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, "missing gold.patch") }) {
			t.Errorf("planted 5 problems (2 eval markers, not-a-string, empty FAIL_TO_PASS, missing gold.patch), checks report %q", problems)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
