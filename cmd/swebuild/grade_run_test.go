package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/internal/gradereftest"
)

// oneCall are the arguments of one `swebuild grade` of the whole
// reference: one --run per run, each with its dataset (and the patch-less
// run with a predictions file saying so).
func oneCall(run *gradereftest.Layout) []string {
	return []string{
		"--run", "dir=" + run.Main.Dir + ",dataset=" + run.Main.Dataset,
		"--run", "dir=" + run.Second.Dir + ",dataset=" + run.Second.Dataset,
		"--run", "dir=" + run.None.Dir + ",dataset=" + run.None.Dataset + ",predictions=" + run.NonePredictions,
	}
}

// TestGradeRunReference grades the 369 logs of upstream-v5/grading in one
// `swebuild grade`, as upstream's harness grades runs: three runs, each
// against its own dataset (a dataset holds one record per instance, and
// the reference grades 4 instances against a second label set; the 2 logs
// whose prediction has no patch come with a predictions file saying so).
// Every report.json written is upstream v5's, byte for byte.
func TestGradeRunReference(t *testing.T) {
	run := gradereftest.New(t)
	var stdout, stderr bytes.Buffer
	if err := runGrade(context.Background(), oneCall(run), &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	total := len(run.Main.Logs) + len(run.Second.Logs) + len(run.None.Logs)
	if want := fmt.Sprintf("graded %d of %d logs: ", total, total); !strings.Contains(stdout.String(), want) {
		t.Errorf("stdout lacks %q:\n%s", want, tail(stdout.String(), 500))
	}
	same := 0
	for _, l := range slices.Concat(run.Main.Logs, run.Second.Logs, run.None.Logs) {
		path := filepath.Join(l.Dir, "report.json")
		got, err := os.ReadFile(path)
		switch {
		case err != nil:
			t.Errorf("%v", err)
		case !bytes.Equal(got, l.Want):
			t.Errorf("%s differs from upstream v5's:\n got %s\nwant %s", path, got, l.Want)
		default:
			same++
		}
	}
	if same != 369 || total != 369 {
		t.Errorf("%d of %d report.json byte-identical; want 369", same, total)
	}
	t.Logf("%d logs in one call (runs of %d, %d and %d): %d report.json byte-identical to upstream v5's", total, len(run.Main.Logs), len(run.Second.Logs), len(run.None.Logs), same)
}

// TestGradeRunFlag: --run values that cannot be read are usage errors
// naming the value and what is wrong with it.
func TestGradeRunFlag(t *testing.T) {
	for _, tc := range []struct{ run, want string }{
		{"dataset=d.jsonl", "dir=RUN_DIR is required"},
		{"dir=r,dataset", `"dataset" is not KEY=VALUE`},
		{"dir=r,logs=x", `unknown key "logs"`},
		{"dir=r,dir=s", "dir given twice"},
		{"dir=r,dataset=d,task-repo=t", "dataset= and task-repo=: give one"},
	} {
		var stdout, stderr bytes.Buffer
		err := runGrade(context.Background(), []string{"--run", tc.run, "--cache-dir", t.TempDir()}, &stdout, &stderr)
		if err == nil || !strings.Contains(stderr.String(), tc.want) || !strings.Contains(stderr.String(), "--run") {
			t.Errorf("--run %s: err %v, stderr %q; want a usage error saying %q", tc.run, err, stderr.String(), tc.want)
		}
	}
	var stdout, stderr bytes.Buffer
	err := runGrade(context.Background(), []string{"--run", "dir=r", "--cache-dir", t.TempDir()}, &stdout, &stderr)
	if err == nil || !strings.Contains(stderr.String(), "--dataset is required") {
		t.Errorf("--run without records and no --dataset: err %v, stderr %q", err, stderr.String())
	}
}

// BenchmarkGradeRun grades the 369 reference logs (as
// TestGradeRunReference) in one `swebuild grade`, in this process: what
// one process spends on a whole run, less the process's start-up.
func BenchmarkGradeRun(b *testing.B) {
	run := gradereftest.New(b)
	b.ResetTimer()
	for b.Loop() {
		var stdout, stderr bytes.Buffer
		if err := runGrade(context.Background(), oneCall(run), &stdout, &stderr); err != nil {
			b.Fatalf("%v\n%s", err, stderr.String())
		}
	}
	b.ReportMetric(369, "logs/op")
}

// BenchmarkGradeRunProcess is BenchmarkGradeRun as a user runs it: the
// swebuild binary (built once, with go build) started for the one call,
// start-up included; upstream v5 took 2.4 s for the same 369 logs in one
// python3 process (upstream-v5/grading/README.md).
func BenchmarkGradeRunProcess(b *testing.B) {
	run := gradereftest.New(b)
	bin := filepath.Join(b.TempDir(), "swebuild")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	b.ResetTimer()
	for b.Loop() {
		cmd := exec.Command(bin, append([]string{"grade"}, oneCall(run)...)...)
		cmd.Env = append(os.Environ(), "SWEBUILD_CACHE="+b.TempDir())
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v\n%s", err, tail(string(out), 2000))
		}
	}
	b.ReportMetric(369, "logs/op")
}

// TestGradeTaskRepo: grade takes a task repo as every command does, with no
// --specs: two logs of fixture__calc-1 (pytest's -rA lines, as the task's
// eval.sh prints them; one with a F2P test failing) graded against the
// task's tests.json under v5's rules (its log_parser), each report.json
// written beside its log.
func TestGradeTaskRepo(t *testing.T) {
	repo := filepath.Join("..", "..", "testdata", "fixture", "taskrepo")
	var tests struct {
		F2P []string `json:"FAIL_TO_PASS"`
		P2P []string `json:"PASS_TO_PASS"`
	}
	b, err := os.ReadFile(filepath.Join(repo, "tasks", "fixture__calc-1", "tests.json"))
	if err != nil || json.Unmarshal(b, &tests) != nil {
		t.Fatalf("tests.json: %v", err)
	}
	logOf := func(failing string) string {
		var l strings.Builder
		l.WriteString("+ : '>>>>> Start Test Output'\n")
		for _, name := range append(append([]string{}, tests.F2P...), tests.P2P...) {
			status := "PASSED"
			if name == failing {
				status = "FAILED"
			}
			l.WriteString(status + " " + name + "\n")
		}
		l.WriteString("+ : '>>>>> End Test Output'\n>>>>> Test Exit Code: 0\n")
		return l.String()
	}
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good", "test_output.txt"), filepath.Join(dir, "bad", "test_output.txt")
	for path, text := range map[string]string{good: logOf(""), bad: logOf(tests.F2P[0])} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	err = runGrade(context.Background(), []string{"--task-repo", repo, "--cache-dir", t.TempDir(),
		"--log", "fixture__calc-1=" + good, "--log", "fixture__calc-1=" + bad}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("grade --task-repo: %v\n%s", err, stderr.String())
	}
	for path, resolved := range map[string]string{good: `"resolved": true`, bad: `"resolved": false`} {
		rep, err := os.ReadFile(filepath.Join(filepath.Dir(path), "report.json"))
		if err != nil || !bytes.Contains(rep, []byte(resolved)) || !bytes.Contains(rep, []byte(`"infra_failure": false`)) {
			t.Errorf("%s: report.json %s (%v), want %s under v5 rules", path, rep, err, resolved)
		}
	}
	if !strings.Contains(stdout.String(), "graded 2 of 2 logs: 1 resolved, 1 unresolved") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
}
