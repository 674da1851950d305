package grading

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// Seed corpora live in testdata/fuzz/<FuzzName>/: line-aligned chunks cut
// from the real logs of ../shared/swebench-reference/eval-logs. Run e.g.
//
//	go test ./grading -run '^$' -fuzz '^FuzzParseDjango$' -fuzztime 60s
//
// Properties: no panic; the only errors are upstream's own exceptions;
// universal newlines (the same log with CRLF or lone CR line ends parses the
// same); no test name holds a newline; parsing is deterministic.

func fuzzParser(f *testing.F, repo string) {
	f.Add("PASSED a.py::t\nFAILED b.py::u - x\n")
	f.Fuzz(func(t *testing.T, log string) {
		sm, err := ParseLog(repo, "", log)
		if err != nil {
			if !errors.Is(err, ErrUpstreamParserRaises) {
				t.Fatalf("unexpected error: %v", err)
			}
			return
		}
		for _, k := range sm.Keys() {
			if strings.Contains(k, "\n") {
				t.Fatalf("test name with a newline: %q", k)
			}
		}
		if !strings.Contains(log, "\r") {
			for _, nl := range []string{"\r\n", "\r"} {
				sm2, err := ParseLog(repo, "", strings.ReplaceAll(log, "\n", nl))
				if err != nil {
					t.Fatalf("with %q line ends: %v", nl, err)
				}
				if !reflect.DeepEqual(sm.Keys(), sm2.Keys()) || !reflect.DeepEqual(sm.m, sm2.m) {
					t.Fatalf("with %q line ends the map differs", nl)
				}
			}
		}
		sm3, _ := ParseLog(repo, "", log)
		if !reflect.DeepEqual(sm.Keys(), sm3.Keys()) {
			t.Fatal("not deterministic")
		}
	})
}

func FuzzParsePytest(f *testing.F)        { fuzzParser(f, "pytest-dev/pytest") }
func FuzzParsePytestOptions(f *testing.F) { fuzzParser(f, "psf/requests") }
func FuzzParsePytestV2(f *testing.F)      { fuzzParser(f, "sphinx-doc/sphinx") }
func FuzzParseDjango(f *testing.F)        { fuzzParser(f, "django/django") }
func FuzzParseSeaborn(f *testing.F)       { fuzzParser(f, "mwaskom/seaborn") }
func FuzzParseSympy(f *testing.F)         { fuzzParser(f, "sympy/sympy") }
func FuzzParseMatplotlib(f *testing.F)    { fuzzParser(f, "matplotlib/matplotlib") }

// FuzzGrade drives the whole grading path (bad codes, markers, fallback,
// report rendering) for a Django log; the report must always render.
func FuzzGrade(f *testing.F) {
	f.Add(">>>>> Start Test Output\ntest_a (m.T) ... ok\n>>>>> End Test Output\n", "test_a (m.T)", false)
	f.Add("+ git apply\n>>>>> Start Test Output\n>>>>> Tests Timed Out\n", "x", true)
	f.Fuzz(func(t *testing.T, log, label string, whole bool) {
		patch := ""
		inst := instanceFor("django/django", []string{label}, []string{label + "2"})
		r, err := Grade(inst, log, &patch, GradeOptions{Rules: RulesV41, WholeLog: whole})
		if err != nil {
			if !errors.Is(err, ErrUpstreamParserRaises) && !strings.Contains(err.Error(), "UTF-8") {
				t.Fatalf("unexpected error: %v", err)
			}
			return
		}
		if r.Resolved != (r.Resolution == ResolvedFull) {
			t.Fatalf("resolved %v with resolution %q", r.Resolved, r.Resolution)
		}
		if len(r.JSON()) == 0 {
			t.Fatal("empty report")
		}
	})
}
