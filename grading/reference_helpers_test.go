package grading

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/swebuild/swebuild/core"
)

// indexRow is one row of eval-logs/INDEX.csv, by column name.
type indexRow map[string]string

func readIndex(tb testing.TB, shared string) []indexRow {
	tb.Helper()
	path := filepath.Join(shared, "eval-logs", "INDEX.csv")
	f, err := os.Open(path)
	if err != nil {
		tb.Fatalf("opening index: %v", err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		tb.Fatalf("reading %s: %v", path, err)
	}
	var rows []indexRow
	for _, rec := range recs[1:] {
		row := indexRow{}
		for i, h := range recs[0] {
			row[h] = rec[i]
		}
		rows = append(rows, row)
	}
	return rows
}

// orderedMap is a JSON object of strings with its key order.
type orderedMap struct {
	keys []string
	m    map[string]string
}

// decodeOrdered decodes a JSON object of string values keeping key order;
// null gives ok=false.
func decodeOrdered(raw json.RawMessage) (orderedMap, bool, error) {
	om := orderedMap{m: map[string]string{}}
	if len(raw) == 0 || string(raw) == "null" {
		return om, false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return om, false, err
	}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return om, false, err
		}
		var v string
		if err := dec.Decode(&v); err != nil {
			return om, false, err
		}
		k := kt.(string)
		if _, dup := om.m[k]; !dup {
			om.keys = append(om.keys, k)
		}
		om.m[k] = v
	}
	return om, true, nil
}

// compareStatusMap reports differences between got and the reference as
// maps, then as key order.
func compareStatusMap(got *StatusMap, want orderedMap) error {
	for _, k := range want.keys {
		g, ok := got.Get(k)
		if !ok {
			return fmt.Errorf("missing test %q (want %s); got %d tests, want %d", k, want.m[k], got.Len(), len(want.keys))
		}
		if g != want.m[k] {
			return fmt.Errorf("test %q: got %s, want %s", k, g, want.m[k])
		}
	}
	for _, k := range got.Keys() {
		if _, ok := want.m[k]; !ok {
			return fmt.Errorf("extra test %q = %s; got %d tests, want %d", k, got.m[k], got.Len(), len(want.keys))
		}
	}
	for i, k := range got.Keys() {
		if want.keys[i] != k {
			return fmt.Errorf("insertion order differs at %d: got %q, want %q", i, k, want.keys[i])
		}
	}
	return nil
}

// parsedRef is eval-logs/parsed/<source>/<file>.json.
type parsedRef struct {
	InstanceID     string          `json:"instance_id"`
	Repo           *string         `json:"repo"`
	Parser         string          `json:"parser"`
	StandIn        bool            `json:"parser_is_stand_in"`
	MarkersPresent bool            `json:"markers_present"`
	Found          bool            `json:"found"`
	StatusMap      json.RawMessage `json:"status_map"`
	BetweenMarkers json.RawMessage `json:"status_map_between_markers"`
	WholeLog       json.RawMessage `json:"status_map_whole_log"`
}

// storedEntry is one instance of a stored report.json.
type storedEntry struct {
	PatchIsNone              bool `json:"patch_is_None"`
	PatchExists              bool `json:"patch_exists"`
	PatchSuccessfullyApplied bool `json:"patch_successfully_applied"`
	Resolved                 bool `json:"resolved"`
	TestsStatus              *struct {
		FailToPass storedBucket `json:"FAIL_TO_PASS"`
		PassToPass storedBucket `json:"PASS_TO_PASS"`
		FailToFail storedBucket `json:"FAIL_TO_FAIL"`
		PassToFail storedBucket `json:"PASS_TO_FAIL"`
	} `json:"tests_status"`
}

type storedBucket struct {
	Success []string `json:"success"`
	Failure []string `json:"failure"`
}

// readRecords reads a dataset JSONL file the way HuggingFace stores it
// (FAIL_TO_PASS / PASS_TO_PASS as strings holding JSON arrays, or arrays),
// independent of package dataset's loader.
func readRecords(tb testing.TB, path string) map[string]core.Instance {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatalf("opening dataset: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	out := map[string]core.Instance{}
	n := 0
	for sc.Scan() {
		n++
		var rec struct {
			core.Instance
			F2P json.RawMessage `json:"FAIL_TO_PASS"`
			P2P json.RawMessage `json:"PASS_TO_PASS"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			tb.Fatalf("%s:%d: %v", path, n, err)
		}
		inst := rec.Instance
		for _, l := range []struct {
			raw json.RawMessage
			dst *[]string
		}{{rec.F2P, &inst.FailToPass}, {rec.P2P, &inst.PassToPass}} {
			raw := l.raw
			if len(raw) > 0 && raw[0] == '"' {
				var s string
				if err := json.Unmarshal(raw, &s); err != nil {
					tb.Fatalf("%s:%d: %v", path, n, err)
				}
				raw = json.RawMessage(s)
			}
			if err := json.Unmarshal(raw, l.dst); err != nil {
				tb.Fatalf("%s:%d: %v", path, n, err)
			}
		}
		out[inst.InstanceID] = inst
	}
	if err := sc.Err(); err != nil {
		tb.Fatalf("reading %s: %v", path, err)
	}
	return out
}

// readText reads a file as Python's open(path).read() would (universal
// newlines).
func readText(tb testing.TB, path string) string {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("reading log: %v", err)
	}
	return NormalizeNewlines(string(b))
}
