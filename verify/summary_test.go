package verify

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/swebuild/swebuild/core"
)

func target(id string, platform core.Platform) Target {
	return Target{Instance: core.Instance{InstanceID: id}, Platform: platform}
}

func attempt(resolved bool, failure string, labels map[string]string) Attempt {
	return Attempt{Resolved: resolved, Failure: failure, Labels: labels, Seconds: 2, TestSeconds: 1}
}

func TestAggregate(t *testing.T) {
	pass := map[string]string{"a": "pass", "b": "pass"}
	bFails := map[string]string{"a": "pass", "b": "fail"}
	for _, tc := range []struct {
		name         string
		mode         string
		runs         []Attempt
		wantResolved bool
		wantFailure  string
		wantFlaky    []string
		wantOK       bool
	}{
		{"gold resolved", ModeGold, []Attempt{attempt(true, "", pass)}, true, "", nil, true},
		{"gold repeat agree", ModeGold, []Attempt{attempt(true, "", pass), attempt(true, "", pass)}, true, "", nil, true},
		{"gold flaky test", ModeGold, []Attempt{attempt(true, "", pass), attempt(false, FailureTests, bFails)}, false, FailureFlaky, []string{"b"}, false},
		{"gold infra error is not flakiness", ModeGold, []Attempt{attempt(true, "", pass), attempt(false, FailureInfra, nil)}, false, FailureInfra, nil, false},
		{"gold patch failed", ModeGold, []Attempt{attempt(false, FailurePatch, nil)}, false, FailurePatch, nil, false},
		{"gold timeout", ModeGold, []Attempt{attempt(false, FailureTimeout, nil)}, false, FailureTimeout, nil, false},
		{"control unresolved", ModeControl, []Attempt{attempt(false, FailureTests, bFails)}, false, FailureTests, nil, true},
		{"control resolved", ModeControl, []Attempt{attempt(true, "", pass)}, true, "", nil, false},
		{"control infra", ModeControl, []Attempt{attempt(false, FailureInfra, nil)}, false, FailureInfra, nil, false},
		{"model unresolved is a result", ModePredictions, []Attempt{attempt(false, FailureTests, bFails)}, false, FailureTests, nil, true},
		{"model infra", ModePredictions, []Attempt{attempt(false, FailureInfra, nil)}, false, FailureInfra, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := aggregate(target("x__y-1", core.AMD64), tc.mode, "my-model", tc.runs)
			if r.Resolved != tc.wantResolved || r.Failure != tc.wantFailure || !reflect.DeepEqual(r.FlakyTests, tc.wantFlaky) || r.OK() != tc.wantOK {
				t.Errorf("got resolved=%v failure=%q flaky=%v ok=%v, want %v %q %v %v", r.Resolved, r.Failure, r.FlakyTests, r.OK(), tc.wantResolved, tc.wantFailure, tc.wantFlaky, tc.wantOK)
			}
			if r.Seconds != 2 || r.TestSeconds != 1 {
				t.Errorf("mean seconds %v/%v, want 2/1", r.Seconds, r.TestSeconds)
			}
		})
	}
}

func TestAggregateLeak(t *testing.T) {
	a := attempt(true, "", nil)
	a.Leak = &LeakReport{Commits: []string{"abc"}}
	r := aggregate(target("x__y-1", core.AMD64), ModeGold, "", []Attempt{a})
	if r.OK() || r.Failure != FailureLeak || !strings.Contains(r.Why(), "newer commit") {
		t.Fatalf("resolved with a leak: ok=%v failure=%q why=%q", r.OK(), r.Failure, r.Why())
	}
}

func TestLinkControl(t *testing.T) {
	s := &Summary{Results: []Result{
		aggregate(target("a", core.AMD64), ModeGold, "", []Attempt{attempt(true, "", nil)}),
		aggregate(target("a", core.AMD64), ModeControl, "", []Attempt{attempt(false, FailureTests, nil)}),
		aggregate(target("b", core.AMD64), ModeGold, "", []Attempt{attempt(true, "", nil)}),
		aggregate(target("b", core.AMD64), ModeControl, "", []Attempt{attempt(true, "", nil)}),
		aggregate(target("c", core.AMD64), ModeGold, "", []Attempt{attempt(true, "", nil)}),
	}}
	s.link()
	if d := s.Results[0].Discriminates; d == nil || !*d || !s.Results[0].OK() {
		t.Errorf("a: discriminates %v ok %v, want true, true", d, s.Results[0].OK())
	}
	if d := s.Results[2].Discriminates; d == nil || *d || s.Results[2].OK() || s.Results[2].Failure != FailureNotDiscriminating {
		t.Errorf("b: discriminates %v ok %v failure %q, want false, false, %s", d, s.Results[2].OK(), s.Results[2].Failure, FailureNotDiscriminating)
	}
	if s.Results[4].Discriminates != nil {
		t.Errorf("c without control: discriminates %v, want nil", *s.Results[4].Discriminates)
	}
	if got := len(s.Failed()); got != 2 {
		t.Errorf("%d failed, want 2 (b gold and b control)", got)
	}
}

func TestRegressionsAndRoundTrip(t *testing.T) {
	res := func(id string, platform core.Platform, mode string, resolved bool) Result {
		f := ""
		if !resolved {
			f = FailureTests
		}
		return aggregate(target(id, platform), mode, "", []Attempt{attempt(resolved, f, nil)})
	}
	base := &Summary{Results: []Result{
		res("a", core.AMD64, ModeGold, true),
		res("a", core.ARM64, ModeGold, true),
		res("b", core.AMD64, ModeGold, false),
		res("c", core.AMD64, ModeControl, false),
		res("d", core.AMD64, ModeGold, true),
	}}
	path := filepath.Join(t.TempDir(), "summary.json")
	if err := base.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	base2, err := ReadSummary(path)
	if err != nil {
		t.Fatal(err)
	}
	now := &Summary{Results: []Result{
		res("a", core.AMD64, ModeGold, true),
		res("a", core.ARM64, ModeGold, false), // regression
		res("b", core.AMD64, ModeGold, false), // was unresolved already
		res("c", core.AMD64, ModeControl, true),
		res("e", core.AMD64, ModeGold, false), // not in the baseline
	}}
	got := now.Regressions(base2)
	if len(got) != 1 || got[0].InstanceID != "a" || got[0].Platform != core.ARM64 || got[0].Mode != ModeGold {
		t.Fatalf("regressions %+v, want a on linux/arm64 only", got)
	}
	var b bytes.Buffer
	if err := now.WriteTable(&b, got); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "REGRESSION a linux/arm64 gold") {
		t.Errorf("table does not list the regression first:\n%s", b.String())
	}
}

func TestReadSummaryErrors(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"bad.json":     "{",
		"missing.json": `{"results":[{"instance_id":"a","platform":"linux/amd64"}]}`,
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSummary(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %v, want one naming the file", name, err)
		}
	}
}

func TestParseOutputs(t *testing.T) {
	job := Job{Timeout: 10 * time.Second}
	leak := map[string]string{"leak_basecommit": "aaaa bbbb 100\n", "infra_error": ""}
	with := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range leak {
			out[k] = v
		}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		job   Job
		files map[string]string
		ready bool
		check func(t *testing.T, o *RunOutput)
	}{
		{"no testbed", job, map[string]string{"infra_error": "cd: /testbed: No such file"}, false, func(t *testing.T, o *RunOutput) {
			if !strings.Contains(o.InfraError, "/testbed") {
				t.Errorf("infra error %q", o.InfraError)
			}
		}},
		{"base commit line splits into commit+tree and time", job, with(map[string]string{"apply.1.rc": "0", "prepared": "ok"}), true, func(t *testing.T, o *RunOutput) {
			if o.InfraError != "" || o.Leak.Base != "aaaa bbbb\n" || o.Leak.BaseTime != "100\n" {
				t.Errorf("infra error %q, leak base %q time %q", o.InfraError, o.Leak.Base, o.Leak.BaseTime)
			}
		}},
		{"first command applies", job, with(map[string]string{"apply.1.rc": "0\n", "apply.1.out": "Applied patch x cleanly.", "diff_before": "d", "prepared": "ok", "wrap_start": "5.0", "wrap_end": "7.5"}), true, func(t *testing.T, o *RunOutput) {
			if !o.Applied || len(o.Attempts) != 1 || o.Attempts[0].Cmd != "git apply --verbose" || o.TestRan || o.DiffBefore != "d" || o.InContainerSeconds != 2.5 {
				t.Errorf("%+v", o)
			}
		}},
		{"third command applies", job, with(map[string]string{"apply.1.rc": "1", "apply.2.rc": "1", "apply.3.rc": "0", "prepared": "ok"}), true, func(t *testing.T, o *RunOutput) {
			if !o.Applied || len(o.Attempts) != 3 || o.Attempts[2].Cmd != "patch --batch --fuzz=5 -p1 -i" {
				t.Errorf("%+v", o)
			}
		}},
		{"nothing applies", job, with(map[string]string{"apply.1.rc": "1", "apply.2.rc": "1", "apply.3.rc": "2"}), false, func(t *testing.T, o *RunOutput) {
			if o.Applied || o.TestRan || o.InfraError != "" || len(o.Attempts) != 3 {
				t.Errorf("%+v", o)
			}
		}},
		{"applied, /eval.sh never linked", job, with(map[string]string{"apply.1.rc": "0"}), false, func(t *testing.T, o *RunOutput) {
			if o.InfraError == "" {
				t.Errorf("%+v", o)
			}
		}},
		{"the tracing socket reachable", job, with(map[string]string{"sandbox_error": "BuildKit's tracing socket is reachable"}), false, func(t *testing.T, o *RunOutput) {
			if !strings.Contains(o.InfraError, "tracing socket") {
				t.Errorf("%+v", o)
			}
		}},
		{"control skips apply", Job{SkipApply: true}, with(map[string]string{"apply_skipped": "skipped", "prepared": "ok"}), true, func(t *testing.T, o *RunOutput) {
			if !o.Applied || len(o.Attempts) != 0 || o.TestRan {
				t.Errorf("%+v", o)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, ready, err := parseOutputs(tc.job, tc.files)
			if err != nil {
				t.Fatal(err)
			}
			if ready != tc.ready {
				t.Errorf("ready %v, want %v", ready, tc.ready)
			}
			tc.check(t, o)
		})
	}
	if _, _, err := parseOutputs(job, with(map[string]string{"apply.1.rc": "x"})); err == nil {
		t.Error("non-numeric exit code: no error")
	}
}

func TestReadPredictions(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("p.jsonl", `{"instance_id":"a","model_name_or_path":"m","model_patch":"diff"}`+"\n\n"+`{"instance_id":"b","model_name_or_path":"m","model_patch":null}`+"\n")
	ps, err := ReadPredictions(good)
	if err != nil || len(ps) != 2 || ps["a"].Patch == nil || *ps["a"].Patch != "diff" || ps["b"].Patch != nil {
		t.Fatalf("%v %+v", err, ps)
	}
	arr := write("p.json", `[{"instance_id":"a","model_name_or_path":"m","model_patch":""}]`)
	if ps, err := ReadPredictions(arr); err != nil || len(ps) != 1 {
		t.Fatalf("array: %v %+v", err, ps)
	}
	bad := write("bad.jsonl", `{"instance_id":"a","model_name_or_path":"m"}`+"\n"+`{"model_name_or_path":"m"}`+"\n"+`{"instance_id":"a","model_name_or_path":"m"}`+"\n")
	ps, err = ReadPredictions(bad)
	if err == nil || !strings.Contains(err.Error(), bad+":2: instance_id") || !strings.Contains(err.Error(), bad+":3: instance_id: a appears twice") || len(ps) != 1 {
		t.Fatalf("bad: %v %+v", err, ps)
	}
}

// TestReadSummaryModes: a summary written before the predictions mode (the
// model's name as the mode) reads as a predictions result of that model;
// platforms are read in the canonical form only (core.Platform's
// UnmarshalText), and anything else is an error naming the file and value.
func TestReadSummaryModes(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old.json")
	if err := os.WriteFile(old, []byte(`{"results":[{"instance_id":"a","platform":"linux/arm64","mode":"my/model","resolved":true},{"instance_id":"a","platform":"linux/amd64","mode":"gold","resolved":true}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := ReadSummary(old)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Results[0]; r.Mode != ModePredictions || r.Model != "my/model" || r.Platform != core.ARM64 || r.Key() != "a@linux/arm64#predictions#my/model" {
		t.Errorf("old predictions result read as %+v", r)
	}
	if r := s.Results[1]; r.Mode != ModeGold || r.Model != "" {
		t.Errorf("gold result read as %+v", r)
	}
	now := &Summary{Results: []Result{aggregate(target("a", core.ARM64), ModePredictions, "my/model", []Attempt{attempt(false, FailureTests, nil)})}}
	if reg := now.Regressions(s); len(reg) != 1 || reg[0].Model != "my/model" {
		t.Errorf("regressions against the old summary: %+v", reg)
	}
	for name, c := range map[string]struct{ content, want string }{
		"s390x.json":   {`{"results":[{"instance_id":"a","platform":"linux/s390x","mode":"gold"}]}`, `: "linux/s390x" is not linux/amd64 or linux/arm64`},
		"alias.json":   {`{"results":[{"instance_id":"a","platform":"linux/arm64/v8","mode":"gold"}]}`, `: "linux/arm64/v8" is not linux/amd64 or linux/arm64`},
		"nomodel.json": {`{"results":[{"instance_id":"a","platform":"linux/amd64","mode":"predictions"}]}`, ": results[0]"},
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSummary(p); err == nil || !strings.Contains(err.Error(), p+c.want) {
			t.Errorf("%s: error %v, want one naming the file and %q", name, err, c.want)
		}
	}
}

func TestReadSummaryNotJSON(t *testing.T) {
	if _, err := ReadSummary("/dev/zero"); err == nil || !strings.Contains(err.Error(), "/dev/zero:1: not a summary") {
		t.Errorf("/dev/zero: %v", err)
	}
}
