package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec/spectest"
)

// TestGradeCommandReport: `swebuild grade` prints the stored report.json of
// a marker-era pair byte for byte (plus a final newline), and the whole-log
// grade of a pre-marker pair.
func TestGradeCommandReport(t *testing.T) {
	shared := spectest.SharedDir(t)
	logs := filepath.Join(shared, "eval-logs")
	vexp := filepath.Join(logs, "Vexp-ai__vexp-swe-bench/logs/run_evaluation/vexp-swebench-1774184993333/vexp-swebench-1774184993333/django__django-16333")
	uboost := filepath.Join(logs, "SohamRajpure__utboost/validation/lite_20240627/django__django-11001")
	verified := filepath.Join(shared, "datasets", "SWE-bench_Verified", "test.jsonl")
	lite := filepath.Join(shared, "datasets", "SWE-bench_Lite", "test.jsonl")
	for _, c := range []struct {
		name string
		args []string
		want string // file whose bytes + "\n" are the expected stdout
	}{
		{"marker-era with --patch", []string{"--dataset", verified, "--instance", "django__django-16333",
			"--log", filepath.Join(vexp, "test_output.txt"), "--patch", filepath.Join(vexp, "patch.diff"), "--grading", "v4.1"}, filepath.Join(vexp, "report.json")},
		{"pre-marker --whole-log --gold", []string{"--dataset", lite, "--instance", "django__django-11001",
			"--log", filepath.Join(uboost, "test_output.txt"), "--gold", "--whole-log", "--grading", "v4.1"}, filepath.Join(uboost, "report.json")},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if err := runGrade(context.Background(), c.args, &stdout, &stderr); err != nil {
				t.Fatalf("runGrade: %v (stderr %s)", err, stderr.String())
			}
			want, err := os.ReadFile(c.want)
			if err != nil {
				t.Fatal(err)
			}
			if stdout.String() != string(want)+"\n" {
				t.Errorf("stdout differs from %s:\n%s", c.want, stdout.String())
			}
		})
	}

	// v4.1.0 proper: the pre-marker log is "not applied", with a hint.
	var stdout, stderr bytes.Buffer
	args := []string{"--dataset", lite, "--instance", "django__django-11001", "--log", filepath.Join(uboost, "test_output.txt"), "--grading", "v4.1"}
	if err := runGrade(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), `"patch_successfully_applied": false`) || !strings.Contains(stderr.String(), "--whole-log") {
		t.Errorf("pre-marker log without --whole-log:\nstdout %s\nstderr %s", stdout.String(), stderr.String())
	}

	// --status-map prints the parsed map.
	stdout.Reset()
	args = []string{"--dataset", verified, "--instance", "django__django-16333", "--log", filepath.Join(vexp, "test_output.txt"), "--status-map"}
	if err := runGrade(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), `"test_custom_form_saves_many_to_many_field (auth_tests.test_forms.UserCreationFormTest)": "PASSED"`) {
		t.Errorf("--status-map output:\n%.400s", stdout.String())
	}
}

// TestGradeCommandMultilingual: `swebuild grade` on the real-instance logs
// of the multilingual reference (upstream v4.1.0's eval.sh run on dataset
// records, graded with the records' labels) picks each repository's parser
// from upstream's map, dispatchers included, and prints the report upstream
// made (eval_report).
func TestGradeCommandMultilingual(t *testing.T) {
	shared := spectest.SharedDir(t)
	ds := filepath.Join(shared, "datasets", "SWE-bench_Multilingual", "test.jsonl")
	logs := filepath.Join(shared, "upstream-v4.1.0-multilingual", "logs")
	parsed, err := filepath.Glob(filepath.Join(logs, "parsed", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range parsed {
		var ref struct {
			Log        string                     `json:"log"`
			Kind       string                     `json:"kind"`
			InstanceID string                     `json:"instance_id"`
			Labels     string                     `json:"labels_source"`
			EvalReport map[string]json.RawMessage `json:"eval_report"`
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &ref); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if ref.Kind != "real-instance" || ref.Labels != "dataset record" {
			continue
		}
		n++
		t.Run(ref.Log, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := []string{"--dataset", ds, "--instance", ref.InstanceID, "--log", filepath.Join(logs, ref.Log, "test_output.txt"), "--grading", "v4.1"}
			if err := runGrade(context.Background(), args, &stdout, &stderr); err != nil {
				t.Fatalf("runGrade: %v (stderr %s)", err, stderr.String())
			}
			if !strings.HasPrefix(stdout.String(), "{\n    \""+ref.InstanceID+"\": {\n        \"patch_is_None\": false,") {
				t.Errorf("not upstream's report.json layout:\n%.200s", stdout.String())
			}
			var got, want any
			if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
				t.Fatalf("output is not JSON: %v", err)
			}
			wantBytes, _ := json.Marshal(ref.EvalReport)
			if err := json.Unmarshal(wantBytes, &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("report:\n got  %s\n want %s", stdout.String(), wantBytes)
			}
		})
	}
	if n != 10 {
		t.Errorf("%d real-instance logs graded with their dataset labels, want 10", n)
	}
}

func TestGradeCommandErrors(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "test_output.txt")
	if err := os.WriteFile(logPath, []byte(">>>>> Start Test Output\nPASSED a\n>>>>> End Test Output\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ds := filepath.Join(dir, "ds.jsonl")
	rec := `{"repo":"getmoto/moto","instance_id":"getmoto__moto-1","base_commit":"` + strings.Repeat("a", 40) +
		`","patch":"p","test_patch":"t","version":"1.0","FAIL_TO_PASS":"[\"a\"]","PASS_TO_PASS":"[]","environment_setup_commit":"` + strings.Repeat("b", 40) + `"}` + "\n"
	if err := os.WriteFile(ds, []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		args  []string
		usage bool
		msg   string
	}{
		{"missing flags", []string{"--log", logPath}, true, "--dataset is required (or --task-repo DIR)"},
		{"no log", []string{"--dataset", ds}, true, "--log FILE (or --run-dir DIR, or --run dir=DIR,...) is required"},
		{"two instances for one log", []string{"--dataset", ds, "--instance", "a", "--instance", "b", "--log", logPath}, true, "one --log is graded against one --instance"},
		{"exit code of many logs", []string{"--dataset", ds, "--log", logPath, "--log", logPath, "--exit-code", "1"}, true, "give one --log"},
		{"predictions and no-patch", []string{"--dataset", ds, "--log", logPath, "--predictions", logPath, "--no-patch"}, true, "exclude each other"},
		{"exclusive", []string{"--dataset", ds, "--instance", "x", "--log", logPath, "--gold", "--no-patch"}, true, "exclude each other"},
		{"unknown instance", []string{"--dataset", ds, "--instance", "nope", "--log", logPath}, false, "not found"},
		{"no parser", []string{"--dataset", ds, "--instance", "getmoto__moto-1", "--log", logPath}, false, "no log parser"},
		{"missing log", []string{"--dataset", ds, "--instance", "getmoto__moto-1", "--log", filepath.Join(dir, "none")}, false, "reading log"},
		{"endless log", []string{"--dataset", ds, "--instance", "getmoto__moto-1", "--log", "/dev/zero", "--max-log-size", "1048576"}, false, "/dev/zero: more than the limit of 1048576 bytes"},
		{"unknown parser", []string{"--dataset", ds, "--instance", "getmoto__moto-1", "--log", logPath, "--parser", "parse_log_nope"}, false, "not an upstream log parser"},
		{"bad rules", []string{"--dataset", ds, "--instance", "getmoto__moto-1", "--log", logPath, "--grading", "v6"}, true, `--grading "v6"`},
		{"exit code under v4.1", []string{"--dataset", ds, "--instance", "getmoto__moto-1", "--log", logPath, "--grading", "v4.1", "--exit-code", "1"}, true, "--exit-code needs v5"},
		{"v5 without log_parser", []string{"--dataset", ds, "--instance", "getmoto__moto-1", "--log", logPath, "--grading", "v5"}, false, "no log_parser"},
		{"v5 unknown parser", []string{"--dataset", ds, "--instance", "getmoto__moto-1", "--log", logPath, "--grading", "v5", "--parser", "parse_log_nope"}, false, "parse_log_nope"},
		{"patch is a directory", []string{"--dataset", ds, "--instance", "getmoto__moto-1", "--log", logPath, "--patch", dir}, true, "is a directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := runGrade(context.Background(), c.args, &stdout, &stderr)
			if err == nil {
				t.Fatal("no error")
			}
			if errors.Is(err, errUsage) != c.usage {
				t.Errorf("usage error = %v, want %v (%v)", errors.Is(err, errUsage), c.usage, err)
			}
			if !strings.Contains(err.Error()+stderr.String(), c.msg) {
				t.Errorf("error %q / stderr %q lacks %q", err, stderr.String(), c.msg)
			}
		})
	}
	// --parser grades a repo outside upstream's map.
	var out, errOut bytes.Buffer
	if err := runGrade(context.Background(), []string{"--dataset", ds, "--instance", "getmoto__moto-1", "--log", logPath, "--parser", "parse_log_pytest"}, &out, &errOut); err != nil {
		t.Fatalf("--parser: %v", err)
	}
	if !strings.Contains(out.String(), `"resolved": true`) {
		t.Errorf("--parser output: %s", out.String())
	}
	// --no-patch does not read the log at all.
	var stdout, stderr bytes.Buffer
	if err := runGrade(context.Background(), []string{"--dataset", ds, "--instance", "getmoto__moto-1", "--log", filepath.Join(dir, "none"), "--no-patch"}, &stdout, &stderr); err != nil {
		t.Fatalf("--no-patch: %v", err)
	}
	if !strings.Contains(stdout.String(), `"patch_is_None": true`) {
		t.Errorf("--no-patch output: %s", stdout.String())
	}
}

// TestGradeCommandV5: `swebuild grade --grading v5` on upstream v5's crafted
// log whose patch forges ">>>>> Test Exit Code: 0" and PASSED lines: as
// upstream, resolved (the first exit-code line wins); with --exit-code 1
// (what the runner saw, case.json) not graded, stderr naming the rules, the
// parser, the decision and the disagreement.
func TestGradeCommandV5(t *testing.T) {
	shared := spectest.SharedDir(t)
	verified := filepath.Join(shared, "datasets", "SWE-bench_Verified", "test.jsonl")
	log := filepath.Join(shared, "upstream-v5", "grading", "crafted__exit-code-first-match__pytest__forged-exit-code-line", "test_output.txt")
	base := []string{"--dataset", verified, "--instance", "pytest-dev__pytest-5809", "--log", log, "--grading", "v5", "--parser", "parse_log_pytest", "--patch", log}
	for _, c := range []struct {
		name           string
		extra          []string
		stdout, stderr []string
	}{
		{"as upstream", nil, []string{`"resolved": true`, `"infra_failure": false`},
			[]string{"upstream v5.0.2 rules, parser parse_log_pytest, decision graded"}},
		{"observed exit 1", []string{"--exit-code", "1"}, []string{`"patch_successfully_applied": false`, `"resolved": false`},
			[]string{"decision nonzero_test_exit_code_without_a_failure", "exit-code line says 0 but the test command exited 1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if err := runGrade(context.Background(), append(base, c.extra...), &stdout, &stderr); err != nil {
				t.Fatalf("runGrade: %v (stderr %s)", err, stderr.String())
			}
			for _, w := range c.stdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout.String())
				}
			}
			for _, w := range c.stderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}
