package grading

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/pyjson"
)

// v5Parsed is upstream-v5/grading/parsed/<name>.json: what upstream
// SWE-bench 5.0.2 (and 4.1.0) made of one log.
type v5Parsed struct {
	Name       string   `json:"name"`
	InstanceID string   `json:"instance_id"`
	Repo       string   `json:"repo"`
	LogParser  string   `json:"log_parser"`
	EvalType   string   `json:"eval_type"`
	FailToPass []string `json:"FAIL_TO_PASS"`
	PassToPass []string `json:"PASS_TO_PASS"`
	Prediction struct {
		PatchIsNone bool `json:"model_patch_is_None"`
	} `json:"prediction"`
	TestOutput struct {
		File        *string `json:"file"`
		SameBytesAs string  `json:"same_bytes_as"`
	} `json:"test_output"`
	StatusMap      json.RawMessage `json:"status_map"`
	Found          bool            `json:"found"`
	Report         json.RawMessage `json:"report"`
	V4Report       json.RawMessage `json:"v4_report"`
	RunInstanceLog *string         `json:"run_instance_log"`
	V5             struct {
		RunReport struct {
			Bucket         string  `json:"bucket"`
			InfraFailureID bool    `json:"infra_failure_id"`
			AmbiguousID    bool    `json:"ambiguous_failure_id"`
			FailureReason  *string `json:"failure_reason"`
		} `json:"run_report"`
		Decision       string  `json:"decision"`
		ParserFunction string  `json:"parser_function"`
		SuiteRan       bool    `json:"suite_ran"`
		SuiteRanMatch  *string `json:"suite_ran_match"`
		TestExitCode   *int    `json:"test_exit_code"`
	} `json:"v5"`
}

// TestReferenceV5 grades every log of upstream-v5/grading/parsed/ with
// RulesV5 and RulesV41: the v5 report.json is byte-identical to upstream
// v5's report (written as json.dumps(indent=4) writes it), get_logs_eval's
// status map (in insertion order), found and the decision branch match,
// and the v4.1 report is byte-identical to the file's v4_report.
func TestReferenceV5(t *testing.T) {
	shared := spectest.SharedDir(t)
	dir := filepath.Join(shared, "upstream-v5", "grading")
	files, err := filepath.Glob(filepath.Join(dir, "parsed", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no parsed files under %s", dir)
	}
	var n struct{ logs, v5Bytes, maps, decisions, v4Bytes, v4None, keptOut, runs, runsLabelled int }
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var ref v5Parsed
		if err := json.Unmarshal(b, &ref); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		n.logs++
		t.Run(ref.Name, func(t *testing.T) {
			logPath := filepath.Join(dir, ref.Name, "test_output.txt")
			if ref.TestOutput.File == nil {
				rel, ok := strings.CutPrefix(ref.TestOutput.SameBytesAs, "shared/swebench-reference/")
				if !ok {
					t.Fatalf("kept-out log without a same_bytes_as under shared/swebench-reference: %q", ref.TestOutput.SameBytesAs)
				}
				logPath = filepath.Join(shared, rel)
				n.keptOut++
			}
			log := readText(t, logPath)
			inst := core.Instance{
				InstanceID: ref.InstanceID, Repo: ref.Repo, LogParser: ref.LogParser, EvalType: ref.EvalType,
				FailToPass: ref.FailToPass, PassToPass: ref.PassToPass,
			}
			var patch *string
			if !ref.Prediction.PatchIsNone {
				p := ""
				patch = &p
			}

			if got, want := deref(ParseTestExitCode(log)), deref(ref.V5.TestExitCode); got != want {
				t.Errorf("parse_test_exit_code: got %v, want %v", got, want)
			}
			m, ran := SuiteRan(log)
			if ran != ref.V5.SuiteRan || ran && m != *ref.V5.SuiteRanMatch {
				t.Errorf("SUITE_RAN: got %v %q, want %v %v", ran, m, ref.V5.SuiteRan, deref2(ref.V5.SuiteRanMatch))
			}

			res, err := EvalLog(inst, log, GradeOptions{})
			if err != nil {
				t.Fatalf("EvalLog: %v", err)
			}
			want, _, err := decodeOrdered(ref.StatusMap)
			if err != nil {
				t.Fatalf("decoding status_map: %v", err)
			}
			if err := compareStatusMap(res.StatusMap, want); err != nil {
				t.Errorf("status map: %v", err)
			} else {
				n.maps++
			}
			if res.Applied != ref.Found {
				t.Errorf("found: got %v, want %v (%s)", res.Applied, ref.Found, res.Reason)
			}

			rep, err := Grade(inst, log, patch, GradeOptions{})
			if err != nil {
				t.Fatalf("Grade v5: %v", err)
			}
			if rep.Rules != RulesV5 {
				t.Errorf("rules: got %q, want v5 for a record with log_parser", rep.Rules)
			}
			decision := rep.Decision
			if decision != ref.V5.Decision {
				t.Errorf("decision: got %s, want %s", decision, ref.V5.Decision)
			} else {
				n.decisions++
			}
			if rep.Parser != ref.V5.ParserFunction && !ref.Prediction.PatchIsNone {
				t.Errorf("parser: got %s, want %s", rep.Parser, ref.V5.ParserFunction)
			}
			if wantBytes := pyDumpsIndent4(t, ref.Report); !bytes.Equal(rep.JSON(), wantBytes) {
				t.Errorf("v5 report.json differs:\n got %s\nwant %s", rep.JSON(), wantBytes)
			} else {
				n.v5Bytes++
			}

			if checkRunReport(t, dir, ref, log, rep) {
				n.runs++
				if ref.V5.RunReport.FailureReason != nil {
					n.runsLabelled++
				}
			}

			v4, err := Grade(inst, log, patch, GradeOptions{Rules: RulesV41})
			if string(ref.V4Report) == "null" || len(ref.V4Report) == 0 {
				// v4.1.0 has no parser for the repository (SWE-smith logs).
				if err == nil {
					t.Errorf("v4.1 graded a log upstream v4.1.0 cannot grade: %s", v4.JSON())
				} else {
					n.v4None++
				}
				return
			}
			if err != nil {
				t.Fatalf("Grade v4.1: %v", err)
			}
			if wantBytes := pyDumpsIndent4(t, ref.V4Report); !bytes.Equal(v4.JSON(), wantBytes) {
				t.Errorf("v4.1 report.json differs:\n got %s\nwant %s", v4.JSON(), wantBytes)
			} else {
				n.v4Bytes++
			}
		})
	}
	t.Logf("v5: %d logs (%d kept out, read from eval-logs): report.json byte-identical %d/%d, status map %d/%d, decision %d/%d, "+
		"make_run_report bucket and classification %d/%d (%d labelled); v4.1: report.json byte-identical %d/%d, %d not gradable by v4.1.0 (error as upstream)",
		n.logs, n.keptOut, n.v5Bytes, n.logs, n.maps, n.logs, n.decisions, n.logs, n.runs, n.logs, n.runsLabelled,
		n.v4Bytes, n.logs-n.v4None, n.v4None)
	if n.v5Bytes != n.logs || n.maps != n.logs || n.decisions != n.logs || n.runs != n.logs || n.v4Bytes+n.v4None != n.logs {
		t.Errorf("not every log matched")
	}
}

func deref2(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

// checkRunReport compares make_run_report's view of the one-instance run
// with ours: the bucket (empty_patch and error come from the run itself:
// no patch, or no report.json written; resolved/unresolved from our
// report), and for unresolved or errored instances ClassifyRun over
// test_output.txt and run_instance.log.
func checkRunReport(t *testing.T, dir string, ref v5Parsed, log string, rep Report) bool {
	t.Helper()
	want := ref.V5.RunReport
	ok := true
	switch want.Bucket {
	case "empty_patch", "error":
	case "resolved", "unresolved":
		if rep.Resolved != (want.Bucket == "resolved") {
			t.Errorf("run report bucket %s, our resolved %v", want.Bucket, rep.Resolved)
			ok = false
		}
	default:
		t.Errorf("unknown run report bucket %q", want.Bucket)
		return false
	}
	var got RunFailure
	if want.Bucket == "unresolved" || want.Bucket == "error" {
		texts := []string{log}
		if ref.RunInstanceLog != nil {
			texts = append(texts, readText(t, filepath.Join(dir, ref.Name, *ref.RunInstanceLog)))
		}
		got = ClassifyRun(texts...)
	}
	wantReason := ""
	if want.FailureReason != nil {
		wantReason = *want.FailureReason
	}
	if got.Reason != wantReason || (got.Tier == TierEnvironment) != want.InfraFailureID || (got.Tier == TierAmbiguous) != want.AmbiguousID {
		t.Errorf("run report: got %+v, want reason %q infra %v ambiguous %v", got, wantReason, want.InfraFailureID, want.AmbiguousID)
		ok = false
	}
	return ok
}

// pyDumpsIndent4 writes a JSON document as Python's json.dumps(obj,
// indent=4) does (pyjson.DumpsIndent4).
func pyDumpsIndent4(t *testing.T, raw json.RawMessage) []byte {
	t.Helper()
	b, err := pyjson.DumpsIndent4(raw)
	if err != nil {
		t.Fatalf("re-encoding reference JSON: %v", err)
	}
	return b
}
