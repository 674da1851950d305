package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/dataset"
	"github.com/swebuild/swebuild/grading"
)

// replayEngine returns a recorded test output and exit status, and keeps
// the job it was given.
type replayEngine struct {
	output string
	exit   int
	job    *Job
}

func (e replayEngine) Run(ctx context.Context, job Job) (*RunOutput, error) {
	*e.job = job
	return &RunOutput{
		Applied: true, TestRan: true, TestSeconds: 1, TestExit: e.exit,
		Attempts:   []ApplyAttempt{{Cmd: gitApplyCmds[0]}},
		TestOutput: e.output,
		Leak:       LeakDump{BaseTime: "100", Head: "abc tree1\n", Base: "abc tree1\n"},
	}, nil
}

// TestDatasetScriptForgedExitLine replays upstream's crafted case
// "exit-code-first-match__pytest__forged-exit-code-line" (a conftest.py
// prints PASSED lines and ">>>>> Test Exit Code: 0" after the tests failed
// with status 1) through the runner: the target runs the record's own
// script as upstream v5 builds it (plus the silent exit line), the wrapper's
// status 1 goes to grading as ExitCode, the disagreement with the log's
// forged 0 is reported, and verify.json and the summary name the script
// (source, sha256 of the record's eval_script), parser and rules.
func TestDatasetScriptForgedExitLine(t *testing.T) {
	ref := spectest.SharedDir(t)
	caseDir := filepath.Join(ref, "upstream-v5", "grading", "crafted__exit-code-first-match__pytest__forged-exit-code-line")
	upstreamScript, err := os.ReadFile(filepath.Join(caseDir, "eval.sh"))
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(filepath.Join(caseDir, "test_output.txt"))
	if err != nil {
		t.Fatal(err)
	}
	insts, err := dataset.Load(context.Background(), filepath.Join(ref, "datasets", "SWE-bench_Verified", "test.jsonl"), dataset.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if insts, err = dataset.Select(insts, []string{"pytest-dev__pytest-5809"}); err != nil {
		t.Fatal(err)
	}
	if len(insts) != 1 {
		t.Fatalf("%d records of pytest-dev__pytest-5809", len(insts))
	}
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	r := &render.Renderer{Tables: tables}
	targets, errs := Targets(context.Background(), r, insts, TargetOptions{Platforms: []core.Platform{core.AMD64}})
	if len(errs) > 0 || len(targets) != 1 {
		t.Fatalf("targets %d, errors %v", len(targets), errs)
	}
	tg := targets[0]
	sum := sha256.Sum256([]byte(insts[0].EvalScript))
	if tg.EvalScript != string(upstreamScript) || !tg.RecordsExit || tg.Parser != "parse_log_pytest" || tg.Rules != grading.RulesV5 ||
		tg.Script != (ScriptInfo{Source: ScriptDataset, SHA256: hex.EncodeToString(sum[:])}) {
		t.Fatalf("target: script %q (recorded %v), parser %q, rules %q, info %+v", tail(tg.EvalScript), tg.RecordsExit, tg.Parser, tg.Rules, tg.Script)
	}

	var job Job
	runner := &Runner{Engine: replayEngine{output: string(log), exit: 1, job: &job}, RunDir: t.TempDir()}
	s, err := runner.Verify(context.Background(), targets, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if job.EvalScript != string(upstreamScript)+exitTrailer {
		t.Errorf("the container ran %q, want upstream's eval.sh and the exit trailer", tail(job.EvalScript))
	}
	res := s.Results[0]
	// v5 grades with the wrapper's status 1: not resolved, whatever the
	// forged PASSED lines and exit-code line say.
	if res.Resolved {
		t.Errorf("the forged PASSED lines and exit-code line resolved the instance: %+v", res)
	}
	if res.Exit == nil || res.Exit.Wrapper == nil || *res.Exit.Wrapper != 1 || res.Exit.Log == nil || *res.Exit.Log != 0 || !res.Exit.Disagree {
		t.Errorf("exit status %+v, want wrapper 1, log 0, disagree", res.Exit)
	}
	if res.Script == nil || *res.Script != tg.Script || res.Parser != "parse_log_pytest" || res.Rules != grading.RulesV5 {
		t.Errorf("summary result says script %+v, parser %q, rules %q", res.Script, res.Parser, res.Rules)
	}
	b, err := os.ReadFile(filepath.Join(res.Dir, "verify.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec RunRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Script != tg.Script || rec.Parser != "parse_log_pytest" || rec.Rules != grading.RulesV5 || rec.Exit == nil || !rec.Exit.Disagree {
		t.Errorf("verify.json: %s", b)
	}
	ran, err := os.ReadFile(filepath.Join(res.Dir, "eval.sh"))
	if err != nil || string(ran) != job.EvalScript {
		t.Errorf("eval.sh in the run directory is not the script the container ran (%v)", err)
	}

	// --eval-script generated: today's eval.sh, v4.1.0 rules, no exit status
	// from the wrapper.
	targets, errs = Targets(context.Background(), r, insts, TargetOptions{Platforms: []core.Platform{core.AMD64}, Script: ScriptGenerated})
	if len(errs) > 0 || len(targets) != 1 {
		t.Fatalf("targets %d, errors %v", len(targets), errs)
	}
	g := targets[0]
	if g.Script.Source != ScriptGenerated || g.Script.Fallback != "" || g.RecordsExit || g.Rules != grading.RulesV41 || strings.Contains(g.EvalScript, TestExitCode) {
		t.Errorf("generated target: %+v, recorded %v, rules %q", g.Script, g.RecordsExit, g.Rules)
	}
	// A record without eval_script falls back to the generated script, and
	// says so.
	bare := insts[0]
	bare.EvalScript = ""
	targets, _ = Targets(context.Background(), r, []core.Instance{bare}, TargetOptions{Platforms: []core.Platform{core.AMD64}})
	if len(targets) != 1 || targets[0].Script.Source != ScriptGenerated || targets[0].Script.Fallback == "" || targets[0].EvalScript != g.EvalScript {
		t.Errorf("fallback target: %+v", targets[0].Script)
	}
	// An unknown log_parser is an error naming the record.
	bad := insts[0]
	bad.LogParser = "parse_log_nope"
	if _, errs := Targets(context.Background(), r, []core.Instance{bad}, TargetOptions{Platforms: []core.Platform{core.AMD64}}); len(errs) != 1 || !strings.Contains(errs[0].Error(), "test.jsonl:") || !strings.Contains(errs[0].Error(), "parse_log_nope") {
		t.Errorf("unknown log_parser: %v", errs)
	}
}
