package grading

import (
	"strings"
	"testing"

	"github.com/swebuild/swebuild/core"
)

func instanceFor(repo string, f2p, p2p []string) core.Instance {
	return core.Instance{InstanceID: "x__y-1", Repo: repo, FailToPass: f2p, PassToPass: p2p}
}

func TestEvalLogMarkersAndBadCodes(t *testing.T) {
	const body = "PASSED a.py::t1\n"
	for _, c := range []struct {
		name     string
		log      string
		whole    bool
		applied  bool
		wantKeys []string
		fellBack bool
	}{
		{"markers", "PASSED pre.py::p\n>>>>> Start Test Output\n" + body + ">>>>> End Test Output\nPASSED post.py::q\n", false, true, []string{"a.py::t1"}, false},
		{"no markers", body, false, false, nil, false},
		{"start only", ">>>>> Start Test Output\n" + body, false, false, nil, false},
		{"end only", body + ">>>>> End Test Output\n", false, false, nil, false},
		{"end before start: rest of log", ">>>>> End Test Output\n>>>>> Start Test Output\n" + body + "PASSED z.py::z\n", false, true, []string{"a.py::t1", "z.py::z"}, false},
		{"second section ignored", ">>>>> Start Test Output\n" + body + ">>>>> End Test Output\n>>>>> Start Test Output\nPASSED b.py::t\n>>>>> End Test Output\n", false, true, []string{"a.py::t1"}, false},
		{"empty section falls back to whole log", "PASSED pre.py::p\n>>>>> Start Test Output\nnothing\n>>>>> End Test Output\n", false, true, []string{"pre.py::p"}, true},
		{"patch apply failed", ">>>>> Start Test Output\n" + body + ">>>>> End Test Output\n>>>>> Patch Apply Failed\n", false, false, nil, false},
		{"reset failed", ">>>>> Reset Failed\n>>>>> Start Test Output\n" + body + ">>>>> End Test Output\n", false, false, nil, false},
		{"tests errored", ">>>>> Start Test Output\n" + body + ">>>>> Tests Errored\n>>>>> End Test Output\n", false, false, nil, false},
		{"timed out", ">>>>> Start Test Output\n" + body + ">>>>> End Test Output\n>>>>> Tests Timed Out\n", false, false, nil, false},
		{"whole log without markers", "PASSED pre.py::p\n" + body, true, true, []string{"pre.py::p", "a.py::t1"}, false},
		{"whole log ignores markers", "PASSED pre.py::p\n>>>>> Start Test Output\n" + body + ">>>>> End Test Output\n", true, true, []string{"pre.py::p", "a.py::t1"}, false},
		{"whole log still honours bad codes", body + ">>>>> Tests Timed Out\n", true, false, nil, false},
		{"CRLF markers", ">>>>> Start Test Output\r\n" + "PASSED a.py::t1\r\n" + ">>>>> End Test Output\r\n", false, true, []string{"a.py::t1"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := EvalLog(instanceFor("pytest-dev/pytest", nil, nil), c.log, GradeOptions{WholeLog: c.whole})
			if err != nil {
				t.Fatal(err)
			}
			if res.Applied != c.applied {
				t.Fatalf("applied = %v (%s), want %v", res.Applied, res.Reason, c.applied)
			}
			if res.FellBack != c.fellBack {
				t.Errorf("fell back = %v, want %v", res.FellBack, c.fellBack)
			}
			if strings.Join(res.StatusMap.Keys(), ",") != strings.Join(c.wantKeys, ",") {
				t.Errorf("keys = %q, want %q", res.StatusMap.Keys(), c.wantKeys)
			}
		})
	}
	if _, err := EvalLog(instanceFor("pytest-dev/pytest", nil, nil), ">>>>> Start Test Output\n\xff\n>>>>> End Test Output\n", GradeOptions{}); err == nil {
		t.Error("invalid UTF-8: no error (upstream's read() raises)")
	}
}

func TestGradeRules(t *testing.T) {
	log := ">>>>> Start Test Output\n" +
		"PASSED t::pass\nXFAIL t::xfail\nFAILED t::fail\nERROR t::error\nSKIPPED t::skip\nPASSEDX t::odd\n" +
		">>>>> End Test Output\n"
	patch := "diff"
	for _, c := range []struct {
		name     string
		f2p, p2p []string
		wantF2P  Bucket
		wantP2P  Bucket
		res      Resolution
	}{
		{"all pass", []string{"t::pass", "t::xfail"}, []string{"t::pass"},
			Bucket{[]string{"t::pass", "t::xfail"}, []string{}}, Bucket{[]string{"t::pass"}, []string{}}, ResolvedFull},
		{"skipped and unknown statuses count nowhere", []string{"t::skip", "t::odd"}, nil,
			Bucket{[]string{}, []string{}}, Bucket{[]string{}, []string{}}, ResolvedFull},
		{"missing fails", []string{"t::pass", "t::missing"}, []string{"t::pass"},
			Bucket{[]string{"t::pass"}, []string{"t::missing"}}, Bucket{[]string{"t::pass"}, []string{}}, ResolvedPartial},
		{"p2p failure is NO", []string{"t::pass"}, []string{"t::error", "t::pass"},
			Bucket{[]string{"t::pass"}, []string{}}, Bucket{[]string{"t::pass"}, []string{"t::error"}}, ResolvedNo},
		{"f2p all failing is NO", []string{"t::fail", "t::error"}, nil,
			Bucket{[]string{}, []string{"t::fail", "t::error"}}, Bucket{[]string{}, []string{}}, ResolvedNo},
		{"empty lists rate 1", nil, nil, Bucket{[]string{}, []string{}}, Bucket{[]string{}, []string{}}, ResolvedFull},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := Grade(instanceFor("pytest-dev/pytest", c.f2p, c.p2p), log, &patch, GradeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !r.PatchExists || r.PatchIsNone || !r.PatchSuccessfullyApplied || r.TestsStatus == nil {
				t.Fatalf("flags: %+v", r)
			}
			ts := r.TestsStatus
			if !sameList(ts.FailToPass.Success, c.wantF2P.Success) || !sameList(ts.FailToPass.Failure, c.wantF2P.Failure) {
				t.Errorf("FAIL_TO_PASS = %+v, want %+v", ts.FailToPass, c.wantF2P)
			}
			if !sameList(ts.PassToPass.Success, c.wantP2P.Success) || !sameList(ts.PassToPass.Failure, c.wantP2P.Failure) {
				t.Errorf("PASS_TO_PASS = %+v, want %+v", ts.PassToPass, c.wantP2P)
			}
			if r.Resolution != c.res || r.Resolved != (c.res == ResolvedFull) {
				t.Errorf("resolution = %s resolved = %v, want %s", r.Resolution, r.Resolved, c.res)
			}
		})
	}
}

func TestGradeNoPatch(t *testing.T) {
	r, err := Grade(instanceFor("not/a-python-repo", nil, nil), "garbage", nil, GradeOptions{})
	if err != nil {
		t.Fatalf("a None patch is reported before the parser is looked up: %v", err)
	}
	want := "{\n    \"x__y-1\": {\n        \"patch_is_None\": true,\n        \"patch_exists\": false,\n" +
		"        \"patch_successfully_applied\": false,\n        \"resolved\": false\n    }\n}"
	if string(r.JSON()) != want {
		t.Errorf("report:\n%s\nwant:\n%s", r.JSON(), want)
	}
	empty := ""
	if _, err := Grade(instanceFor("not/a-python-repo", nil, nil), "garbage", &empty, GradeOptions{}); err == nil {
		t.Error("unknown repository with a patch: no error")
	}
}

func TestFailOnlyRule(t *testing.T) {
	sm := NewStatusMap()
	sm.set("a", StatusFailed)
	sm.set("b", StatusError)
	sm.set("c", StatusSkipped)
	ts := EvalTestsReport(sm, []string{"a", "b", "c", "missing"}, nil, true)
	if !sameList(ts.FailToPass.Failure, []string{"a"}) || !sameList(ts.FailToPass.Success, []string{"b", "c", "missing"}) {
		t.Errorf("fail-only: %+v", ts.FailToPass)
	}
	for _, repo := range []string{"chartjs/Chart.js", "markedjs/marked", "processing/p5.js"} {
		if !FailOnlyRepo(repo) {
			t.Errorf("%s not fail-only", repo)
		}
	}
	if FailOnlyRepo("django/django") {
		t.Error("django/django fail-only")
	}
}

func TestGradeParserOverride(t *testing.T) {
	log := ">>>>> Start Test Output\ntest_a (m.T) ... ok\nPASSED b.py::t\n>>>>> End Test Output\n"
	patch := ""
	for _, c := range []struct {
		parser, want string
	}{{"parse_log_django", "test_a (m.T)"}, {"parse_log_pytest", "b.py::t"}} {
		res, err := EvalLog(instanceFor("fixture/proj", nil, nil), log, GradeOptions{Parser: c.parser})
		if err != nil {
			t.Fatalf("%s: %v", c.parser, err)
		}
		if keys := res.StatusMap.Keys(); len(keys) != 1 || keys[0] != c.want {
			t.Errorf("%s: keys %q, want [%q]", c.parser, keys, c.want)
		}
	}
	r, err := Grade(instanceFor("fixture/proj", []string{"b.py::t"}, nil), log, &patch, GradeOptions{Parser: "parse_log_pytest"})
	if err != nil || !r.Resolved {
		t.Errorf("Grade with parser override: resolved=%v err=%v", r.Resolved, err)
	}
	if _, err := EvalLog(instanceFor("fixture/proj", nil, nil), log, GradeOptions{Parser: "parse_log_nope"}); err == nil {
		t.Error("unknown parser name: no error")
	}
	for _, n := range ParserNames() {
		p, ok := parserNamed(n)
		if !ok || p.name != n || (p.parse == nil) == (p.dispatch == nil) {
			t.Errorf("parserNamed(%s) = %q, %v: want the entry, with a parser or a dispatcher", n, p.name, ok)
		}
	}
}
