package grading

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/dataset"
)

// TestExitCodeReplacesForgedLine: the crafted log whose patch prints its own
// ">>>>> Test Exit Code: 0" plus PASSED lines for every test is resolved by
// upstream v5 (the first exit-code line wins); with the status the runner
// observed (case.json: the test command exited 1) it is not graded, the
// report says the log's line disagrees, and report.json keeps upstream's
// shape.
func TestExitCodeReplacesForgedLine(t *testing.T) {
	dir := filepath.Join(spectest.SharedDir(t), "upstream-v5", "grading")
	for _, c := range []struct {
		name         string
		wantDecision string
		disagrees    bool
	}{
		{"crafted__exit-code-first-match__pytest__forged-exit-code-line", DecisionExitCode, true},
		{"crafted__exit-code__pytest__forged-passed-lines-exit1", DecisionExitCode, false},
		{"crafted__exit-code__sympy__genuine-failure-exit1", DecisionGraded, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ref v5Parsed
			readJSON(t, filepath.Join(dir, "parsed", c.name+".json"), &ref)
			var cs struct {
				RunnerOutputs []struct {
					Exit int `json:"exit"`
				} `json:"runner_outputs"`
			}
			readJSON(t, filepath.Join(dir, c.name, "case.json"), &cs)
			if len(cs.RunnerOutputs) != 1 {
				t.Fatalf("case.json has %d runner outputs, want 1", len(cs.RunnerOutputs))
			}
			observed := cs.RunnerOutputs[0].Exit
			log := readText(t, filepath.Join(dir, c.name, "test_output.txt"))
			inst := dataset.Instance{InstanceID: ref.InstanceID, Repo: ref.Repo, LogParser: ref.LogParser,
				EvalType: ref.EvalType, FailToPass: ref.FailToPass, PassToPass: ref.PassToPass}
			patch := ""
			r, err := Grade(inst, log, &patch, GradeOptions{ExitCode: &observed})
			if err != nil {
				t.Fatal(err)
			}
			if r.Decision != c.wantDecision {
				t.Errorf("decision %s, want %s", r.Decision, c.wantDecision)
			}
			if c.wantDecision == DecisionExitCode && (r.Resolved || r.PatchSuccessfullyApplied || r.TestsStatus != nil) {
				t.Errorf("graded a log whose test command exited %d without a failure: %s", observed, r.JSON())
			}
			if r.ExitCodeDisagrees != c.disagrees {
				t.Errorf("ExitCodeDisagrees = %v, want %v (log %v, observed %d)", r.ExitCodeDisagrees, c.disagrees, deref(r.LogExitCode), observed)
			}
			if r.ExitCode == nil || *r.ExitCode != observed {
				t.Errorf("ExitCode = %v, want %d", r.ExitCode, observed)
			}
			var keys []string
			var top map[string]json.RawMessage
			if err := json.Unmarshal(r.JSON(), &top); err != nil {
				t.Fatal(err)
			}
			var entry map[string]json.RawMessage
			if err := json.Unmarshal(top[ref.InstanceID], &entry); err != nil {
				t.Fatal(err)
			}
			for k := range entry {
				keys = append(keys, k)
			}
			for _, k := range keys {
				switch k {
				case "patch_is_None", "patch_exists", "patch_successfully_applied", "resolved", "infra_failure",
					"infra_failure_reason", "tests_status":
				default:
					t.Errorf("report.json has a field upstream v5 does not write: %q", k)
				}
			}
		})
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestParseTestExitCode(t *testing.T) {
	for _, c := range []struct {
		log  string
		want any
	}{
		{"no line\n", nil},
		{">>>>> Test Exit Code: 1\n", 1},
		{">>>>> Test Exit Code:\t\n  42", 42},                       // \s* crosses the newline
		{"x >>>>> Test Exit Code: 0\n>>>>> Test Exit Code: 2\n", 0}, // the first wins
		{">>>>> Test Exit Code: -1\n", -1},
		{">>>>> Test Exit Code: -0\n", 0},
		{">>>>> Test Exit Code: \u0663\u0660\n", 30}, // Arabic-Indic digits: int() reads them
		{">>>>> Test Exit Code: x\n>>>>> Test Exit Code: 5", 5},
		{">>>>> Test Exit Code: 99999999999999999999999\n", math.MaxInt},
		{">>>>> Test Exit Code 1\n", nil},
	} {
		got := ParseTestExitCode(c.log)
		if deref(got) != c.want {
			t.Errorf("ParseTestExitCode(%q) = %v, want %v", c.log, deref(got), c.want)
		}
	}
}

func TestResolveCase(t *testing.T) {
	sm := NewStatusMap()
	sm.set("t.py::a[x-1]", StatusPassed)
	sm.set("t.py::a[x-2]", StatusXFail)
	sm.set("t.py::b[y 1]", StatusPassed)
	sm.set("t.py::b[y 2]", StatusFailed)
	sm.set("t.py::c", StatusSkipped)
	for _, c := range []struct {
		label, key string
		ok         bool
	}{
		{"t.py::c", "t.py::c", true},
		{"t.py::a[x", "t.py::a[x-1]", true}, // PASSED and XFAIL agree
		{"t.py::b[y", "", false},            // PASSED and FAILED disagree
		{"t.py::a", "", false},              // as many "[" as "]": exact only
		{"t.py::z[", "", false},             // no candidate
	} {
		key, ok := resolveCase(sm, c.label)
		if key != c.key || ok != c.ok {
			t.Errorf("resolveCase(%q) = %q, %v; want %q, %v", c.label, key, ok, c.key, c.ok)
		}
	}
	ts := EvalTestsReportV5(sm, []string{"t.py::c", "t.py::a[x", "t.py::b[y"}, []string{"t.py::c", "t.py::gone"}, false)
	if got := strings.Join(ts.FailToPass.Success, ","); got != "t.py::a[x" {
		t.Errorf("F2P success %q", got)
	}
	if got := strings.Join(ts.FailToPass.Failure, ","); got != "t.py::c,t.py::b[y" {
		t.Errorf("F2P failure %q (SKIPPED fails FAIL_TO_PASS)", got)
	}
	if got := strings.Join(ts.PassToPass.Success, ","); got != "t.py::c" {
		t.Errorf("P2P success %q (SKIPPED maintains PASS_TO_PASS)", got)
	}
	if got := strings.Join(ts.PassToPass.Failure, ","); got != "t.py::gone" {
		t.Errorf("P2P failure %q", got)
	}
	fo := EvalTestsReportV5(sm, []string{"t.py::b[y 2]", "t.py::a[x"}, nil, true)
	if strings.Join(fo.FailToPass.Failure, ",") != "t.py::b[y 2]" || strings.Join(fo.FailToPass.Success, ",") != "t.py::a[x" {
		t.Errorf("fail_only: %+v", fo.FailToPass)
	}
}

func TestClassifyInfra(t *testing.T) {
	for _, c := range []struct{ text, reason, tier string }{
		{"", "", ""},
		{"Error: Cannot find module 'x'\nfatal: Cannot allocate memory\n", "out_of_memory", TierEnvironment}, // order, not position
		{"Killed\n", "out_of_memory", TierEnvironment},
		{"Killed by signal 9\n", "", ""},
		{"collected 0 items\n", "no_tests_collected", TierAmbiguous},
		{"Timeout error: 1800 seconds exceeded.", "tests_timed_out", TierAmbiguous},
		{"Could not resolve host: github.com\nModuleNotFoundError: x\n", "network_unreachable", TierEnvironment},
		{"all fine\n", "", ""},
	} {
		reason, tier, ok := ClassifyInfra(c.text)
		if reason != c.reason || tier != c.tier || ok != (c.reason != "") {
			t.Errorf("ClassifyInfra(%q) = %q, %q, %v; want %q, %q", c.text, reason, tier, ok, c.reason, c.tier)
		}
	}
}

func TestSuiteRan(t *testing.T) {
	for _, c := range []struct {
		log  string
		want bool
	}{
		{"Executed 0 of 0 ERROR", false},
		{"Executed 3 of 4 SUCCESS", true},
		{"TOTAL: 0 SUCCESS", false},
		{"  12 passing (3s)", true},
		{"Tests:       1 failed, 4 total", true},
		{"Test Suites: 1 failed, 2 passed, 3 total", true},
		{"Test Suites: 0 total", false},
		{"x\n# tests 5\n", true},
		{"x # tests 5\n", false},
		{"3 specs, 0 failures", true},
		{"case-1': ok\nnext", true},
		{"case-1': ok then", false},
		{"collected 0 items\n", false},
	} {
		if _, got := SuiteRan(c.log); got != c.want {
			t.Errorf("SuiteRan(%q) = %v, want %v", c.log, got, c.want)
		}
	}
}

func TestV5Errors(t *testing.T) {
	base := dataset.Instance{InstanceID: "o__r-1", Repo: "pytest-dev/pytest", LogParser: "parse_log_pytest"}
	log := ">>>>> Start Test Output\nPASSED a\n>>>>> End Test Output\n"
	patch := ""
	for _, c := range []struct {
		name   string
		inst   func(dataset.Instance) dataset.Instance
		opts   GradeOptions
		is     error
		inText string
	}{
		{"unknown parser", func(i dataset.Instance) dataset.Instance { i.LogParser = "parse_log_nope"; return i }, GradeOptions{}, ErrUnknownParser, "parse_log_nope"},
		{"not implemented", func(i dataset.Instance) dataset.Instance { i.LogParser = "parse_log_eslint"; return i }, GradeOptions{}, ErrParserNotImplemented, "parse_log_eslint"},
		{"bad eval_type", func(i dataset.Instance) dataset.Instance { i.EvalType = "fail_and_pass"; return i }, GradeOptions{}, nil, "eval_type"},
		{"bad rules", func(i dataset.Instance) dataset.Instance { return i }, GradeOptions{Rules: "v6"}, nil, `"v6"`},
		{"v5 without log_parser", func(i dataset.Instance) dataset.Instance { i.LogParser = ""; return i }, GradeOptions{Rules: RulesV5}, nil, "--parser"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Grade(c.inst(base), log, &patch, c.opts)
			if err == nil {
				t.Fatal("no error")
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error %v is not %v", err, c.is)
			}
			if !strings.Contains(err.Error(), c.inText) {
				t.Errorf("error %q does not name %q", err, c.inText)
			}
		})
	}
	// The default follows the record: with log_parser v5, without it v4.1.
	for _, c := range []struct {
		logParser string
		want      Rules
	}{{"parse_log_pytest", RulesV5}, {"", RulesV41}} {
		inst := base
		inst.LogParser = c.logParser
		r, err := Grade(inst, log, &patch, GradeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Rules != c.want {
			t.Errorf("log_parser %q: rules %q, want %q", c.logParser, r.Rules, c.want)
		}
	}
}

// TestV5Parsers pins v5's parser changes on small logs (the real and crafted
// logs of TestReferenceV5 cover them too).
func TestV5Parsers(t *testing.T) {
	for _, c := range []struct {
		parser, log string
		want        []string // key=status, in order
	}{
		{"parse_log_pytest", "SKIPPED [2] t.py:3: no\nPASSED t.py::a\n", []string{"t.py::a=PASSED"}},
		{"parse_log_pytest", "PASSED [100%]\n", []string{"[100%]=PASSED"}},
		{"parse_log_sphinx", "FAILED t.py::a[x y] - assert 1 - 2\nXFAIL t.py::b - reason here\nt.py::c one PASSED\n",
			[]string{"t.py::a[x y]=FAILED", "t.py::b - reason here=XFAIL", "t.py::c one=PASSED"}},
		{"parse_log_seaborn", "FAILED\nPASSED\nt::a PASSED x\n", []string{"t::a=PASSED"}},
		{"parse_log_gradle_custom", "a.B > m\nwarning: x\nPASSED\nc.D > n FAILED\n", []string{"a.B > m=PASSED", "c.D > n=FAILED"}},
		{"parse_log_maven", "+ mvn -Dtest=A#a\n+ mvn -Dtest=B#b\nBUILD SUCCESS\nBUILD FAILURE\n", []string{"A#a=PASSED", "B#b=FAILED"}},
		{"parse_log_maven", "BUILD FAILURE\n+ mvn -Dtest=A#a\n", []string{"A#a=FAILED"}},
		{"parse_log_jest", "✓ name  (5 ms)\n", []string{"name=PASSED"}},
	} {
		base, err := v5Base(c.parser)
		if err != nil {
			t.Fatal(err)
		}
		parse, _ := v5Parse(base)
		sm := NewStatusMap()
		if err := parse(c.log, sm); err != nil {
			t.Fatalf("%s: %v", c.parser, err)
		}
		var got []string
		for _, k := range sm.Keys() {
			got = append(got, k+"="+sm.m[k])
		}
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s(%q) = %q, want %q", c.parser, c.log, got, c.want)
		}
	}
}
