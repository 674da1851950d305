package grading

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
)

// multilingualRef is upstream-v4.1.0-multilingual/logs/parsed/<log>.json:
// what upstream v4.1.0's own parser and grading made of the log.
type multilingualRef struct {
	parsedRef
	Log          string   `json:"log"`
	DispatchesTo *string  `json:"dispatches_to"`
	FailToPass   []string `json:"FAIL_TO_PASS"`
	PassToPass   []string `json:"PASS_TO_PASS"`
	EvalType     string   `json:"eval_type"`
	Prediction   struct {
		IsNone bool    `json:"model_patch_is_None"`
		Patch  *string `json:"model_patch"`
	} `json:"prediction"`
	EvalReport json.RawMessage `json:"eval_report"`
}

// multilingualLog is one log of the reference with upstream's results.
type multilingualLog struct {
	name string
	log  string // as Python's open().read() returns it
	ref  multilingualRef
}

// readMultilingualLogs reads every row of logs/INDEX.csv.
func readMultilingualLogs(tb testing.TB) []multilingualLog {
	tb.Helper()
	dir := filepath.Join(spectest.SharedDir(tb), "upstream-v4.1.0-multilingual", "logs")
	f, err := os.Open(filepath.Join(dir, "INDEX.csv"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		tb.Fatalf("reading INDEX.csv: %v", err)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	var out []multilingualLog
	for _, rec := range recs[1:] {
		name := rec[col["log"]]
		var ref multilingualRef
		b, err := os.ReadFile(filepath.Join(dir, rec[col["parsed_file"]]))
		if err != nil {
			tb.Fatal(err)
		}
		if err := json.Unmarshal(b, &ref); err != nil {
			tb.Fatalf("%s: %v", name, err)
		}
		if ref.Log != name || ref.Repo == nil || *ref.Repo != rec[col["repo"]] || ref.Parser != rec[col["parser"]] {
			tb.Fatalf("%s: the parsed file does not describe the INDEX.csv row", name)
		}
		out = append(out, multilingualLog{
			name: name,
			log:  readText(tb, filepath.Join(dir, name, "test_output.txt")),
			ref:  ref,
		})
	}
	return out
}

// TestReferenceMultilingual checks every log of the multilingual reference:
// upstream's parser on the whole log and on the marked section, get_logs_eval
// (the status map, found, the sub-parser a dispatcher picked) as maps and
// in insertion order, and get_eval_report's report.json with the log's
// labels, lists in order.
func TestReferenceMultilingual(t *testing.T) {
	logs := readMultilingualLogs(t)
	if len(logs) != 51 {
		t.Errorf("%d logs, want 51", len(logs))
	}
	parsers := map[string]bool{}
	for _, l := range logs {
		t.Run(l.name, func(t *testing.T) {
			ref := l.ref
			repo := *ref.Repo
			if pn, ok := ParserName(repo); !ok || pn != ref.Parser {
				t.Fatalf("ParserName(%q) = %q, %v; upstream used %s", repo, pn, ok, ref.Parser)
			}
			want := ref.Parser
			if ref.DispatchesTo != nil {
				want = *ref.DispatchesTo
			}
			parsers[want] = true

			whole, err := ParseLog(repo, ref.InstanceID, l.log)
			if err != nil {
				t.Fatalf("ParseLog: %v", err)
			}
			wantWhole, ok, err := decodeOrdered(ref.WholeLog)
			if err != nil || !ok {
				t.Fatalf("decoding status_map_whole_log: %v", err)
			}
			if err := compareStatusMap(whole, wantWhole); err != nil {
				t.Errorf("status_map_whole_log: %v", err)
			}

			if wantBetween, ok, err := decodeOrdered(ref.BetweenMarkers); err != nil {
				t.Fatalf("decoding status_map_between_markers: %v", err)
			} else if ok {
				section := l.log[strings.Index(l.log, StartTestOutput)+len(StartTestOutput):]
				if i := strings.Index(section, EndTestOutput); i >= 0 {
					section = section[:i]
				}
				between, err := ParseLog(repo, ref.InstanceID, section)
				if err != nil {
					t.Fatalf("parsing the marked section: %v", err)
				}
				if err := compareStatusMap(between, wantBetween); err != nil {
					t.Errorf("status_map_between_markers: %v", err)
				}
			} else if ref.MarkersPresent {
				t.Errorf("markers present but no status_map_between_markers")
			}

			inst := core.Instance{InstanceID: ref.InstanceID, Repo: repo, FailToPass: ref.FailToPass, PassToPass: ref.PassToPass}
			res, err := EvalLog(inst, l.log, GradeOptions{Rules: RulesV41})
			if err != nil {
				t.Fatalf("EvalLog: %v", err)
			}
			if res.Applied != ref.Found {
				t.Errorf("applied = %v (%s), upstream found = %v", res.Applied, res.Reason, ref.Found)
			}
			if res.Applied && res.Parser != want {
				t.Errorf("parsed with %s, upstream with %s", res.Parser, want)
			}
			wantMap, _, err := decodeOrdered(ref.StatusMap)
			if err != nil {
				t.Fatalf("decoding status_map: %v", err)
			}
			if err := compareStatusMap(res.StatusMap, wantMap); err != nil {
				t.Errorf("status_map (get_logs_eval): %v", err)
			}
			if (ref.EvalType == "fail_only") != FailOnlyRepo(repo) {
				t.Errorf("eval_type %s, FailOnlyRepo = %v", ref.EvalType, FailOnlyRepo(repo))
			}

			var patch *string
			if !ref.Prediction.IsNone {
				p := ""
				if ref.Prediction.Patch != nil {
					p = *ref.Prediction.Patch
				}
				patch = &p
			}
			rep, err := Grade(inst, l.log, patch, GradeOptions{Rules: RulesV41})
			if err != nil {
				t.Fatalf("Grade: %v", err)
			}
			var got, wantRep map[string]storedEntry
			if err := json.Unmarshal(rep.JSON(), &got); err != nil {
				t.Fatalf("our report.json does not decode: %v", err)
			}
			if err := json.Unmarshal(ref.EvalReport, &wantRep); err != nil {
				t.Fatalf("decoding eval_report: %v", err)
			}
			if !reflect.DeepEqual(got, wantRep) {
				t.Errorf("report.json:\n got  %s\n want %s", rep.JSON(), ref.EvalReport)
			}
		})
	}
	t.Logf("%d logs, %d parser functions exercised", len(logs), len(parsers))
}
