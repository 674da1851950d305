package verify

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/dataset"
)

// TestEvalScriptV5MatchesUpstream checks EvalScriptV5 against the scripts
// upstream v5.0.2's make_test_spec made for the crafted grading cases
// (upstream-v5/grading/crafted__*/eval.sh, "script": "v5" in case.json):
// byte for byte, from the records' own eval_script.
func TestEvalScriptV5MatchesUpstream(t *testing.T) {
	ref := spectest.SharedDir(t)
	records := map[string]map[string]core.Instance{} // split -> id -> record
	load := func(split string) map[string]core.Instance {
		if m, ok := records[split]; ok {
			return m
		}
		insts, err := dataset.Load(context.Background(), filepath.Join(ref, "datasets", split+".jsonl"), dataset.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]core.Instance{}
		for _, in := range insts {
			m[in.InstanceID] = in
		}
		records[split] = m
		return m
	}
	dirs, _ := filepath.Glob(filepath.Join(ref, "upstream-v5", "grading", "crafted__*"))
	checked := 0
	for _, dir := range dirs {
		var c struct{ Script, Split, InstanceID string }
		b, err := os.ReadFile(filepath.Join(dir, "case.json"))
		if err != nil {
			t.Fatal(err)
		}
		var raw map[string]any
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatal(err)
		}
		c.Script, _ = raw["script"].(string)
		c.Split, _ = raw["split"].(string)
		c.InstanceID, _ = raw["instance_id"].(string)
		want, err := os.ReadFile(filepath.Join(dir, "eval.sh"))
		if err != nil {
			t.Fatal(err)
		}
		in, ok := load(c.Split)[c.InstanceID]
		if !ok {
			t.Fatalf("%s: no record %s in %s", dir, c.InstanceID, c.Split)
		}
		got, recorded := EvalScriptV5(in.EvalScript)
		if c.Script != "v5" {
			// The exit-code-absent cases ran the record's script unchanged.
			if got == string(want) {
				t.Errorf("%s: script %q, yet EvalScriptV5 gives upstream's eval.sh", filepath.Base(dir), c.Script)
			}
			continue
		}
		if got != string(want) {
			t.Errorf("%s: EvalScriptV5 differs from upstream's eval.sh:\n got %q\nwant %q", filepath.Base(dir), tail(got), tail(string(want)))
		}
		if !recorded {
			t.Errorf("%s: the record's script has an end marker, yet recorded is false", filepath.Base(dir))
		}
		checked++
	}
	if checked < 40 {
		t.Fatalf("checked %d v5 scripts of %d crafted cases, want at least 40", checked, len(dirs))
	}
	t.Logf("EvalScriptV5 gives upstream's eval.sh for %d of %d crafted cases (the others ran the record's script unchanged)", checked, len(dirs))
}

func tail(s string) string {
	if i := strings.Index(s, EndTestOutput); i > 200 {
		return "..." + s[i-200:]
	}
	return s
}

func TestEvalScriptV5NoEndMarker(t *testing.T) {
	got, recorded := EvalScriptV5("\n#!/bin/bash\nset -uxo pipefail\necho hi\n\n")
	if recorded || got != "#!/bin/bash\nset -uxo pipefail\necho hi\n" {
		t.Fatalf("got %q, %v", got, recorded)
	}
}

func TestLogExitCode(t *testing.T) {
	for _, tc := range []struct {
		log  string
		want int // -1000: none
	}{
		{"a\n>>>>> Test Exit Code: 0\n>>>>> Test Exit Code: 1\n", 0},
		{">>>>> Test Exit Code:\t-3", -3},
		{">>>>> Test Exit Code: x", -1000},
		{"", -1000},
	} {
		got := LogExitCode(tc.log)
		if (got == nil) != (tc.want == -1000) || got != nil && *got != tc.want {
			t.Errorf("LogExitCode(%q) = %v, want %d", tc.log, got, tc.want)
		}
	}
}
