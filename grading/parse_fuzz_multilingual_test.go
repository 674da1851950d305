package grading

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// Fuzz targets for the non-Python parsers. Seed corpora live in
// testdata/fuzz/<FuzzName>/: line-aligned chunks of the marked sections of
// the real logs of ../shared/swebench-reference/upstream-v4.1.0-multilingual
// that each parser graded there. Run e.g.
//
//	go test ./grading -run '^$' -fuzz '^FuzzParseKarma$' -fuzztime 60s
//
// Properties, besides fuzzParser's: every status is one of upstream's, and
// the parsers of the FAIL_ONLY repos report failures only.

// fuzzNamedParser fuzzes the parser called name (instanceID is what a
// dispatcher reads).
func fuzzNamedParser(f *testing.F, name, instanceID string) {
	p, ok := parserNamed(name)
	if !ok {
		f.Fatalf("no parser %s", name)
	}
	f.Fuzz(func(t *testing.T, log string) {
		if !utf8.ValidString(log) {
			return // upstream cannot read such a log (EvalLog reports it)
		}
		sm, err := ParseLogWith(name, instanceID, log)
		if err != nil {
			if !errors.Is(err, ErrUpstreamParserRaises) {
				t.Fatalf("unexpected error: %v", err)
			}
			return
		}
		for _, k := range sm.Keys() {
			// doctest names come from XML attributes, where &#10; is a
			// newline; every other name is cut from one line.
			if strings.Contains(k, "\n") && name != "parse_log_doctest" {
				t.Fatalf("test name with a newline: %q", k)
			}
			switch st := sm.m[k]; st {
			case StatusPassed, StatusFailed, StatusSkipped:
				if p.failOnly && st != StatusFailed {
					t.Fatalf("%s reports %s for %q; its repos are FAIL_ONLY", name, st, k)
				}
			default:
				t.Fatalf("status %q for %q", st, k)
			}
		}
		if !strings.Contains(log, "\r") {
			for _, nl := range []string{"\r\n", "\r"} {
				sm2, err := ParseLogWith(name, instanceID, strings.ReplaceAll(log, "\n", nl))
				if err != nil {
					t.Fatalf("with %q line ends: %v", nl, err)
				}
				if !reflect.DeepEqual(sm.Keys(), sm2.Keys()) || !reflect.DeepEqual(sm.m, sm2.m) {
					t.Fatalf("with %q line ends the map differs", nl)
				}
			}
		}
		sm3, _ := ParseLogWith(name, instanceID, log)
		if !reflect.DeepEqual(sm.Keys(), sm3.Keys()) || !reflect.DeepEqual(sm.m, sm3.m) {
			t.Fatal("not deterministic")
		}
	})
}

func FuzzParseRedis(f *testing.F)       { fuzzNamedParser(f, "parse_log_redis", "") }
func FuzzParseJq(f *testing.F)          { fuzzNamedParser(f, "parse_log_jq", "") }
func FuzzParseDoctest(f *testing.F)     { fuzzNamedParser(f, "parse_log_doctest", "") }
func FuzzParseMicropython(f *testing.F) { fuzzNamedParser(f, "parse_log_micropython_test", "") }
func FuzzParseGoogletest(f *testing.F)  { fuzzNamedParser(f, "parse_log_googletest", "") }
func FuzzParseGotest(f *testing.F)      { fuzzNamedParser(f, "parse_log_gotest", "") }
func FuzzParseMaven(f *testing.F)       { fuzzNamedParser(f, "parse_log_maven", "") }
func FuzzParseAnt(f *testing.F)         { fuzzNamedParser(f, "parse_log_ant", "") }
func FuzzParseGradleCustom(f *testing.F) {
	fuzzNamedParser(f, "parse_log_gradle_custom", "")
}
func FuzzParseCalypso(f *testing.F)  { fuzzNamedParser(f, "parse_log_calypso", "") }
func FuzzParseChartJS(f *testing.F)  { fuzzNamedParser(f, "parse_log_chart_js", "") }
func FuzzParseMarked(f *testing.F)   { fuzzNamedParser(f, "parse_log_marked", "") }
func FuzzParseP5js(f *testing.F)     { fuzzNamedParser(f, "parse_log_p5js", "") }
func FuzzParseReactPDF(f *testing.F) { fuzzNamedParser(f, "parse_log_react_pdf", "") }
func FuzzParseJest(f *testing.F)     { fuzzNamedParser(f, "parse_log_jest", "") }
func FuzzParseJestJSON(f *testing.F) { fuzzNamedParser(f, "parse_log_jest_json", "") }
func FuzzParseVitest(f *testing.F)   { fuzzNamedParser(f, "parse_log_vitest", "") }
func FuzzParseKarma(f *testing.F)    { fuzzNamedParser(f, "parse_log_karma", "") }
func FuzzParseTap(f *testing.F)      { fuzzNamedParser(f, "parse_log_tap", "") }
func FuzzParsePHPUnit(f *testing.F)  { fuzzNamedParser(f, "parse_log_phpunit", "") }
func FuzzParseMinitest(f *testing.F) { fuzzNamedParser(f, "parse_log_minitest", "") }
func FuzzParseCucumber(f *testing.F) { fuzzNamedParser(f, "parse_log_cucumber", "") }
func FuzzParseRubyUnit(f *testing.F) { fuzzNamedParser(f, "parse_log_ruby_unit", "") }
func FuzzParseCargo(f *testing.F)    { fuzzNamedParser(f, "parse_log_cargo", "") }
func FuzzParseRspecTransformedJSON(f *testing.F) {
	fuzzNamedParser(f, "parse_log_rspec_transformed_json", "")
}

// FuzzGradeMultilingual drives the whole grading path for the non-Python
// repositories: which repo (an index into upstream's map), the instance id
// (read by the dispatchers), the log, and the labels. The report must always
// render, and for a FAIL_ONLY repo a label absent from the status map is a
// success.
func FuzzGradeMultilingual(f *testing.F) {
	f.Add(uint8(0), "jekyll__jekyll-8167", ">>>>> Start Test Output\nT. x = 0.1 s = .\n>>>>> End Test Output\n", "T")
	f.Add(uint8(1), "immutable-js__immutable-js-2005", ">>>>> Start Test Output\n[PASSED] a > b\n>>>>> End Test Output\n", "a > b")
	f.Add(uint8(2), "chartjs__Chart.js-1", ">>>>> Start Test Output\nnothing\n>>>>> End Test Output\n", "absent")
	var repos []string
	for p := range parserTable() {
		if p.module != "python" {
			repos = append(repos, p.repoList()...)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, id, log, label string) {
		repo := repos[int(which)%len(repos)]
		patch := ""
		inst := instanceFor(repo, []string{label}, nil)
		inst.InstanceID = id
		r, err := Grade(inst, log, &patch, GradeOptions{Rules: RulesV41})
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
		if FailOnlyRepo(repo) && r.TestsStatus != nil {
			res, err := EvalLog(inst, log, GradeOptions{Rules: RulesV41})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := res.StatusMap.Get(label); !ok && len(r.TestsStatus.FailToPass.Success) != 1 {
				t.Fatalf("FAIL_ONLY repo %s: absent label %q not a success", repo, label)
			}
		}
	})
}
