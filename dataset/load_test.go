package dataset

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/swebuild/swebuild/core"
)

// pythonSplits are the datasets whose repos are all in upstream's Python
// spec table.
var pythonSplits = map[string]bool{"SWE-bench": true, "SWE-bench_Lite": true, "SWE-bench_Verified": true}

func TestLoadReferenceDatasets(t *testing.T) {
	ref := refDir(t)
	known := specsKnown(t)
	files, err := filepath.Glob(filepath.Join(ref, "datasets", "*", "*"))
	if err != nil || len(files) < 7 {
		t.Fatalf("found %d dataset files (%v), want 7", len(files), err)
	}
	for _, path := range files {
		split := filepath.Base(filepath.Dir(path))
		t.Run(split+"/"+filepath.Base(path), func(t *testing.T) {
			opts := LoadOptions{}
			if pythonSplits[split] {
				opts.Known = known
			}
			got, err := Load(context.Background(), path, opts)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			want := map[string]int{
				"SWE-bench/dev.jsonl": 225, "SWE-bench_Lite/dev.jsonl": 23, "SWE-bench_Lite/dev.parquet": 23,
				"SWE-bench_Lite/test.jsonl": 300, "SWE-bench_Multilingual/test.jsonl": 300,
				"SWE-bench_Multimodal/dev.jsonl": 102, "SWE-bench_Verified/test.jsonl": 500,
			}[split+"/"+filepath.Base(path)]
			if len(got) != want {
				t.Fatalf("loaded %d records, want %d", len(got), want)
			}
			for _, in := range got {
				if in.Repo == "" || in.InstanceID == "" || in.Version == "" || in.FailToPass == nil || in.PassToPass == nil {
					t.Fatalf("record %s incomplete: %+v", in.Source, in)
				}
				// Every reference record (parquet too) carries v5's fields.
				if in.EvalScript == "" || in.LogParser == "" || in.EvalType == "" || in.Image == "" {
					t.Fatalf("record %s lacks a v5 field: log_parser %q, eval_type %q, image %q, eval_script %d bytes", in.Source, in.LogParser, in.EvalType, in.Image, len(in.EvalScript))
				}
			}
		})
	}
}

// TestLoadMatchesEncodingJSON decodes every real JSONL record with
// encoding/json as well and compares every field.
func TestLoadMatchesEncodingJSON(t *testing.T) {
	ref := refDir(t)
	files, _ := filepath.Glob(filepath.Join(ref, "datasets", "*", "*.jsonl"))
	for _, path := range files {
		got, err := Load(context.Background(), path, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := stdDecodeJSONL(t, path)
		if len(got) != len(want) {
			t.Fatalf("%s: %d records, encoding/json %d", path, len(got), len(want))
		}
		for i := range got {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("%s: record %d differs from encoding/json:\n got %s\nwant %s", path, i, brief(got[i]), brief(want[i]))
			}
		}
	}
}

// knownKeys are the record fields with a core.Instance field of their own.
var knownKeys = map[string]bool{
	"repo": true, "instance_id": true, "base_commit": true, "patch": true, "test_patch": true, "problem_statement": true,
	"hints_text": true, "created_at": true, "version": true, "FAIL_TO_PASS": true, "PASS_TO_PASS": true,
	"environment_setup_commit": true, "image_assets": true, "eval_script": true, "log_parser": true, "eval_type": true, "image": true,
}

// stdDecodeJSONL is a straightforward, slow reference decoder.
func stdDecodeJSONL(t *testing.T, path string) []core.Instance {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	var out []core.Instance
	for n := 1; sc.Scan(); n++ {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		var ia struct {
			Raw json.RawMessage `json:"image_assets"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ia); err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
		imageAssets := ""
		if len(ia.Raw) > 0 && ia.Raw[0] == '"' {
			imageAssets = str("image_assets")
		} else if len(ia.Raw) > 0 && ia.Raw[0] == '{' {
			imageAssets = string(ia.Raw)
		}
		list := func(k string) []string {
			out := []string{}
			switch v := m[k].(type) {
			case string:
				if err := json.Unmarshal([]byte(v), &out); err != nil {
					t.Fatalf("%s:%d: %s: %v", path, n, k, err)
				}
			case []any:
				for _, x := range v {
					out = append(out, x.(string))
				}
			}
			return out
		}
		// The other columns, in the order of the line, as written.
		var extra []core.Column
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		if _, err := dec.Token(); err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				t.Fatalf("%s:%d: %v", path, n, err)
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				t.Fatalf("%s:%d: %v", path, n, err)
			}
			if !knownKeys[k.(string)] {
				extra = append(extra, core.Column{Name: k.(string), Value: string(raw)})
			}
		}
		out = append(out, core.Instance{
			Extra: extra,
			Repo:  str("repo"), InstanceID: str("instance_id"), BaseCommit: str("base_commit"),
			Patch: str("patch"), TestPatch: str("test_patch"), ProblemStatement: str("problem_statement"),
			HintsText: str("hints_text"), CreatedAt: str("created_at"), Version: str("version"),
			FailToPass: list("FAIL_TO_PASS"), PassToPass: list("PASS_TO_PASS"),
			EnvironmentSetupCommit: str("environment_setup_commit"),
			ImageAssets:            imageAssets,
			EvalScript:             str("eval_script"), LogParser: str("log_parser"),
			EvalType: str("eval_type"), Image: str("image"),
			Source: fmt.Sprintf("%s:%d", path, n),
		})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func brief(in core.Instance) string {
	return fmt.Sprintf("%s %s %s v=%q f2p=%d p2p=%d patch=%d", in.Source, in.InstanceID, in.Repo, in.Version, len(in.FailToPass), len(in.PassToPass), len(in.Patch))
}

func withoutSource(ins []core.Instance) []core.Instance {
	out := make([]core.Instance, len(ins))
	for i, in := range ins {
		in.Source = ""
		out[i] = in
	}
	return out
}

func TestParquetMatchesJSONL(t *testing.T) {
	dir := filepath.Join(refDir(t), "datasets", "SWE-bench_Lite")
	fromJSONL, err := Load(context.Background(), filepath.Join(dir, "dev.jsonl"), LoadOptions{Known: specsKnown(t)})
	if err != nil {
		t.Fatal(err)
	}
	pq := filepath.Join(dir, "dev.parquet")
	fromParquet, err := Load(context.Background(), pq, LoadOptions{Known: specsKnown(t)})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(withoutSource(fromParquet), withoutSource(fromJSONL)) {
		t.Fatal("parquet records differ from JSONL records")
	}
	for i, in := range fromParquet {
		if want := fmt.Sprintf("%s:row %d", pq, i); in.Source != want {
			t.Fatalf("Source = %q, want %q", in.Source, want)
		}
	}
}

// TestJSONArrayMatchesJSONL writes a JSONL file as an indented JSON array
// and checks the records and the line each element starts on.
func TestJSONArrayMatchesJSONL(t *testing.T) {
	src := filepath.Join(refDir(t), "datasets", "SWE-bench_Lite", "dev.jsonl")
	fromJSONL, err := Load(context.Background(), src, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(src)
	var elems []json.RawMessage
	for _, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		elems = append(elems, line)
	}
	arr, err := json.MarshalIndent(elems, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, "dev.json", "\n"+string(arr)+"\n")
	fromArray, err := Load(context.Background(), path, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(withoutSource(fromArray), withoutSource(fromJSONL)) {
		t.Fatal("JSON array records differ from JSONL records")
	}
	// Element i starts on the line after the "[" line's predecessors: find
	// each `  {` line.
	lines := strings.Split("\n"+string(arr), "\n")
	var starts []int
	for i, l := range lines {
		if strings.HasPrefix(l, "  {") {
			starts = append(starts, i+1)
		}
	}
	for i, in := range fromArray {
		if want := fmt.Sprintf("%s:%d", path, starts[i]); in.Source != want {
			t.Fatalf("record %d Source = %q, want %q", i, in.Source, want)
		}
	}
}

// rec returns a valid JSONL record for instance id, changed by set (a nil
// value deletes the key; a json.RawMessage is written as is).
func rec(id string, set map[string]any) string {
	m := map[string]any{
		"repo":                     "acme/widget",
		"instance_id":              id,
		"base_commit":              strings.Repeat("ab", 20),
		"patch":                    "diff --git a/x b/x\n",
		"test_patch":               "diff --git a/t b/t\n",
		"problem_statement":        "it breaks",
		"version":                  "1.0",
		"FAIL_TO_PASS":             `["t::a"]`,
		"PASS_TO_PASS":             `[]`,
		"environment_setup_commit": strings.Repeat("cd", 20),
		"eval_script":              "#!/bin/bash\n",
		"log_parser":               "parse_log_pytest",
		"eval_type":                "pass_and_fail",
		"image":                    "swebench/sweb.eval.x86_64.widget:latest",
		"unknown_field":            map[string]any{"ignored": []any{1, true, nil}},
	}
	for k, v := range set {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

var widgetKnown = fakeKnown{"acme/widget": {"0.9", "1.0", "1.1"}}

func TestBadInput(t *testing.T) {
	good := rec("acme__widget-1", nil)
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	cases := []struct {
		name  string
		file  string // file name; ".json" makes a JSON array of lines
		lines []string
		known Known
		lim   Limits
		want  []string // substrings of the single problem (file name and line are checked too)
		loc   string   // "file:line" prefix the problem must start with, default bad.jsonl:2
		field string   // field the problem must name ("" when it is not about one field)
	}{
		{name: "truncated record", lines: []string{good, `{"repo": "acme/widget", "instance_id": `},
			loc: "bad.jsonl:2:40", field: "instance_id", want: []string{"malformed JSON", "unexpected end of line, want a value"}},
		{name: "bad escape", lines: []string{good, `{"repo": "acme/widget", "patch": "a\qb"}`},
			loc: "bad.jsonl:2:36", field: "patch", want: []string{"malformed JSON", `invalid escape "\\q"`}},
		{name: "raw control character", lines: []string{good, "{\"patch\": \"a\tb\"}"},
			loc: "bad.jsonl:2:13", field: "patch", want: []string{"malformed JSON", `invalid control character '\t'`}},
		{name: "invalid UTF-8", lines: []string{good, "{\"hints_text\": \"ab\xffc\"}"},
			loc: "bad.jsonl:2:19", field: "hints_text", want: []string{"invalid UTF-8"}},
		{name: "missing comma", lines: []string{good, `{"repo": "acme/widget" "x": 1}`},
			loc: "bad.jsonl:2:24", want: []string{"malformed JSON", `invalid character '"', want ',' or '}'`}},
		{name: "garbage after record", lines: []string{good, rec("acme__widget-2", nil) + " x"},
			want: []string{"malformed JSON", "want end of line after the record"}},
		{name: "line is not an object", lines: []string{good, `  ["a"]`},
			loc: "bad.jsonl:2:3", want: []string{"must hold one object, found an array"}},
		{name: "missing repo", lines: []string{good, rec("acme__widget-2", map[string]any{"repo": nil})},
			field: "repo", want: []string{"missing required field"}},
		{name: "missing instance_id", lines: []string{good, rec("", map[string]any{"instance_id": nil})},
			field: "instance_id", want: []string{"missing required field"}},
		{name: "missing base_commit", lines: []string{good, rec("acme__widget-2", map[string]any{"base_commit": nil})},
			field: "base_commit", want: []string{"missing required field"}},
		{name: "missing version", lines: []string{good, rec("acme__widget-2", map[string]any{"version": nil})},
			field: "version", want: []string{"missing required field"}},
		{name: "missing test_patch", lines: []string{good, rec("acme__widget-2", map[string]any{"test_patch": nil})},
			field: "test_patch", want: []string{"missing required field"}},
		{name: "null repo", lines: []string{good, rec("acme__widget-2", map[string]any{"repo": raw("null")})},
			field: "repo", want: []string{"is null"}},
		{name: "empty test_patch", lines: []string{good, rec("acme__widget-2", map[string]any{"test_patch": ""})},
			field: "test_patch", want: []string{"is empty"}},
		{name: "unknown eval_type", lines: []string{good, rec("acme__widget-2", map[string]any{"eval_type": "pass_only"})},
			field: "eval_type", want: []string{`"pass_only" is not an eval type`, "pass_and_fail", "fail_only"}},
		{name: "eval_type not a string", lines: []string{good, rec("acme__widget-2", map[string]any{"eval_type": 3})},
			field: "eval_type", want: []string{"is a number, want a string"}},
		{name: "image not a reference", lines: []string{good, rec("acme__widget-2", map[string]any{"image": "swebench/sweb.eval.x86_64.Widget__X:latest"})},
			field: "image", want: []string{"is not an image reference", "must be lowercase"}},
		{name: "image with a bad tag", lines: []string{good, rec("acme__widget-2", map[string]any{"image": "swebench/x:la test"})},
			field: "image", want: []string{"is not an image reference"}},
		{name: "log_parser not a name", lines: []string{good, rec("acme__widget-2", map[string]any{"log_parser": "parse log"})},
			field: "log_parser", want: []string{"is not a parser name"}},
		{name: "repo is a number", lines: []string{good, rec("acme__widget-2", map[string]any{"repo": 5})},
			field: "repo", want: []string{"is a number, want a string"}},
		{name: "version is a boolean", lines: []string{good, rec("acme__widget-2", map[string]any{"version": true})},
			field: "version", want: []string{"is a boolean, want a string or a number"}},
		{name: "patch is an object", lines: []string{good, rec("acme__widget-2", map[string]any{"patch": map[string]any{}})},
			field: "patch", want: []string{"is an object, want a string"}},
		{name: "FAIL_TO_PASS is a number", lines: []string{good, rec("acme__widget-2", map[string]any{"FAIL_TO_PASS": 5})},
			field: "FAIL_TO_PASS", want: []string{"is a number, want an array of strings or a string holding a JSON array"}},
		{name: "FAIL_TO_PASS element", lines: []string{good, rec("acme__widget-2", map[string]any{"FAIL_TO_PASS": []any{"a", 1}})},
			field: "FAIL_TO_PASS", want: []string{"element 1 is a number, want a string"}},
		{name: "FAIL_TO_PASS string not JSON", lines: []string{good, rec("acme__widget-2", map[string]any{"FAIL_TO_PASS": "test_a"})},
			field: "FAIL_TO_PASS", want: []string{"string is not a JSON array of strings"}},
		{name: "PASS_TO_PASS string bad JSON", lines: []string{good, rec("acme__widget-2", map[string]any{"PASS_TO_PASS": `["a", `})},
			field: "PASS_TO_PASS", want: []string{"string is not a JSON array of strings", "offset 6"}},
		{name: "PASS_TO_PASS string element", lines: []string{good, rec("acme__widget-2", map[string]any{"PASS_TO_PASS": `["a", 2]`})},
			field: "PASS_TO_PASS", want: []string{"string holds a JSON array whose element 1 is a number"}},
		{name: "duplicate instance_id", lines: []string{good, rec("acme__widget-2", nil), good},
			loc: "bad.jsonl:3", field: "instance_id", want: []string{`"acme__widget-1" is a duplicate of line 1`}},
		{name: "id with slash", lines: []string{good, rec("acme/widget-2", nil)},
			field: "instance_id", want: []string{"outside [A-Za-z0-9._-]"}},
		{name: "id with space", lines: []string{good, rec("acme widget", nil)},
			field: "instance_id", want: []string{"outside [A-Za-z0-9._-]"}},
		{name: "id non-ASCII", lines: []string{good, rec("acmé", nil)},
			field: "instance_id", want: []string{"outside [A-Za-z0-9._-]"}},
		{name: "id with dot-dot", lines: []string{good, rec("a..b", nil)},
			field: "instance_id", want: []string{`contains ".."`}},
		{name: "id empty", lines: []string{good, rec("", nil)},
			field: "instance_id", want: []string{"is empty"}},
		{name: "id leading dash", lines: []string{good, rec("-rf", nil)},
			field: "instance_id", want: []string{"starts with '-'"}},
		{name: "id leading dot", lines: []string{good, rec(".hidden", nil)},
			field: "instance_id", want: []string{"starts with '.'"}},
		// Ids the naming module cannot turn into image names (issue 12, row
		// 12): they used to pass here and fail at render or publish.
		{name: "id ending in dash", lines: []string{good, rec("acme__widget-", nil)},
			field: "instance_id", want: []string{`"acme__widget-" ends with '-'`}},
		{name: "id ending in dot", lines: []string{good, rec("acme__widget.", nil)},
			field: "instance_id", want: []string{`"acme__widget." ends with '.'`}},
		{name: "id ending in underscore", lines: []string{good, rec("acme__widget_", nil)},
			field: "instance_id", want: []string{`ends with '_'`}},
		{name: "id with dot next to dash", lines: []string{good, rec("acme__widget.-2", nil)},
			field: "instance_id", want: []string{`has ".-" at byte 12`}},
		{name: "id of 256 bytes", lines: []string{good, rec("a"+strings.Repeat("b", 255), nil)},
			field: "instance_id", want: []string{"is 256 bytes in image names", "over the limit of 128"}},
		{name: "id of 129 bytes", lines: []string{good, rec("a"+strings.Repeat("b", 128), nil)},
			field: "instance_id", want: []string{"is 129 bytes in image names"}},
		// Distinct ids with one published name (issue 12, row 6).
		{name: "ids differing in case", lines: []string{good, rec("ACME__Widget-1", nil)},
			field: "instance_id", want: []string{`"ACME__Widget-1" (this record) and "acme__widget-1" (`, "bad.jsonl:1) get the same image names", "sweb.eval.acme_1776_widget-1"}},
		{name: "ids differing in __ against _1776_", lines: []string{good, rec("acme_1776_widget-1", nil)},
			field: "instance_id", want: []string{`"acme_1776_widget-1" (this record) and "acme__widget-1"`, "get the same image names"}},
		{name: "array: ids differing in case", file: "bad.json", lines: []string{good, rec("Acme__Widget-1", nil)},
			loc: "bad.json:3", field: "instance_id", want: []string{`"Acme__Widget-1" (this record) and "acme__widget-1" (`, "bad.json:2)"}},
		// Records over the size limit (issue 12, row 11).
		{name: "record over the limit", lim: Limits{MaxRecordBytes: 2000}, lines: []string{good, rec("acme__widget-2", map[string]any{"patch": strings.Repeat("x", 2000)})},
			want: []string{"the record is 2", "bytes, over the limit of 2000 bytes a record"}},
		{name: "array: record over the limit", file: "bad.json", lim: Limits{MaxRecordBytes: 2000}, lines: []string{good, rec("acme__widget-2", map[string]any{"patch": strings.Repeat("x", 2000)})},
			loc: "bad.json:3", want: []string{"over the limit of 2000 bytes a record"}},
		{name: "repo without owner", lines: []string{good, rec("acme__widget-2", map[string]any{"repo": "widget"})},
			field: "repo", want: []string{`"widget" is not of the form owner/name`}},
		{name: "short base_commit", lines: []string{good, rec("acme__widget-2", map[string]any{"base_commit": "abc123"})},
			field: "base_commit", want: []string{`"abc123" is not a full hex commit id`}},
		{name: "uppercase base_commit", lines: []string{good, rec("acme__widget-2", map[string]any{"base_commit": strings.Repeat("AB", 20)})},
			field: "base_commit", want: []string{"not a full hex commit id"}},
		{name: "non-hex base_commit", lines: []string{good, rec("acme__widget-2", map[string]any{"base_commit": strings.Repeat("g", 40)})},
			field: "base_commit", want: []string{"not a full hex commit id"}},
		{name: "bad environment_setup_commit", lines: []string{good, rec("acme__widget-2", map[string]any{"environment_setup_commit": "main"})},
			field: "environment_setup_commit", want: []string{`"main" is not a full hex commit id`}},
		// A record without its own eval_script (or log_parser, or image)
		// needs the tables to be verified; one with all three does not
		// (TestSelfContainedRecords).
		{name: "unknown repo", known: widgetKnown, lines: []string{good, rec("acme__gadget-2", map[string]any{"repo": "acme/gadget", "eval_script": nil})},
			field: "repo", want: []string{`unknown repo "acme/gadget"`}},
		{name: "unknown repo, no image", known: widgetKnown, lines: []string{good, rec("acme__gadget-2", map[string]any{"repo": "acme/gadget", "image": nil})},
			field: "repo", want: []string{`unknown repo "acme/gadget"`}},
		{name: "unknown version", known: widgetKnown, lines: []string{good, rec("acme__widget-2", map[string]any{"version": "9.9", "log_parser": nil})},
			field: "version", want: []string{`unknown version "9.9" for repo "acme/widget" (known: 0.9, 1.0, 1.1)`}},
		{name: "unknown numeric version", known: widgetKnown, lines: []string{good, rec("acme__widget-2", map[string]any{"version": raw("2.0"), "eval_script": ""})},
			field: "version", want: []string{`unknown version "2.0"`}},
		// JSON array files: the line is where the element starts.
		{name: "array: record problem", file: "bad.json", lines: []string{good, rec("acme__widget-2", map[string]any{"base_commit": "x"})},
			loc: "bad.json:3", field: "base_commit", want: []string{"not a full hex commit id"}},
		{name: "array: element not an object", file: "bad.json", lines: []string{good, `"acme__widget-2"`},
			loc: "bad.json:3", want: []string{"array element 1 is a string, want an object"}},
		{name: "array: syntax error", file: "bad.json", lines: []string{good, `{"repo": "acme/widget", "version": 1.}`},
			loc: "bad.json:3:38", field: "version", want: []string{"malformed JSON", "want a digit after the decimal point"}},
		{name: "array: trailing garbage", file: "bad.json", lines: []string{good, rec("acme__widget-2", nil) + "] x"},
			loc: "bad.json:3:", want: []string{"want end of file after the array"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := tc.file
			if name == "" {
				name = "bad.jsonl"
			}
			content := strings.Join(tc.lines, "\n") + "\n"
			if strings.HasSuffix(name, ".json") {
				content = "[\n" + strings.Join(tc.lines, ",\n") + "\n]\n"
				if strings.HasSuffix(tc.lines[len(tc.lines)-1], "] x") {
					content = "[\n" + strings.Join(tc.lines, ",\n") + "\n"
				}
			}
			path := writeFile(t, name, content)
			got, err := Load(context.Background(), path, LoadOptions{Known: tc.known, Limits: tc.lim})
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v, want a *ValidationError", err)
			}
			if len(ve.Problems) != 1 {
				t.Fatalf("want 1 problem, got %d:\n%v", len(ve.Problems), err)
			}
			msg := ve.Problems[0].Error()
			loc := tc.loc
			if loc == "" {
				loc = name + ":2"
			}
			if !strings.HasPrefix(msg, filepath.Join(filepath.Dir(path), loc)) {
				t.Errorf("problem %q does not start with %s", msg, loc)
			}
			if tc.field != "" && !strings.Contains(msg, fmt.Sprintf("field %q", tc.field)) {
				t.Errorf("problem %q does not name field %q", msg, tc.field)
			}
			if tc.field == "" && strings.Contains(msg, "field ") {
				t.Errorf("problem %q names a field, want none", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("problem %q does not contain %q", msg, w)
				}
			}
			// The good record on line 1 is still returned.
			if len(got) == 0 || got[0].InstanceID != "acme__widget-1" {
				t.Errorf("valid records = %v, want acme__widget-1 first", got)
			}
		})
	}
}

// TestAllProblemsReported checks that problems of every record are
// collected, the valid records are returned, and errors.As finds both the
// list and single problems.
func TestAllProblemsReported(t *testing.T) {
	lines := []string{
		rec("acme__widget-1", nil),
		rec("acme__widget-2", map[string]any{"repo": nil, "base_commit": "zz"}),
		`{"broken": `,
		"",
		rec("acme__widget-3", nil),
		rec("acme__widget-1", nil),
		rec("acme__widget-4", map[string]any{"version": "7", "image": nil}),
	}
	path := writeFile(t, "mixed.jsonl", strings.Join(lines, "\n"))
	got, err := Load(context.Background(), path, LoadOptions{Known: widgetKnown})
	var ids []string
	for _, in := range got {
		ids = append(ids, in.InstanceID+"@"+strings.TrimPrefix(in.Source, path))
	}
	if want := []string{"acme__widget-1@:1", "acme__widget-3@:5"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("valid records %v, want %v", ids, want)
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v, want *ValidationError", err)
	}
	wantProblems := []string{
		`mixed.jsonl:2: field "repo": missing required field`,
		`mixed.jsonl:2: field "base_commit": "zz" is not a full hex commit id`,
		`mixed.jsonl:3:12: malformed JSON: unexpected end of line`,
		`mixed.jsonl:6: field "instance_id": "acme__widget-1" is a duplicate of line 1`,
		`mixed.jsonl:7: field "version": unknown version "7" for repo "acme/widget"`,
	}
	if len(ve.Problems) != len(wantProblems) {
		t.Fatalf("got %d problems, want %d:\n%v", len(ve.Problems), len(wantProblems), err)
	}
	for i, w := range wantProblems {
		if !strings.Contains(ve.Problems[i].Error(), w) {
			t.Errorf("problem %d = %q, want it to contain %q", i, ve.Problems[i].Error(), w)
		}
	}
	if ve.Problems[0].InstanceID != "acme__widget-2" {
		t.Errorf("problem InstanceID = %q", ve.Problems[0].InstanceID)
	}
	if !strings.HasPrefix(err.Error(), fmt.Sprintf("5 problems in %s:\n", path)) {
		t.Errorf("Error() = %q", err.Error())
	}
	var p Problem
	if !errors.As(err, &p) || p.Field != "repo" {
		t.Errorf("errors.As(Problem) = %+v", p)
	}
}

func TestFieldEncodings(t *testing.T) {
	lines := []string{
		rec("a-1", map[string]any{"version": json.RawMessage("3.0"), "FAIL_TO_PASS": []string{"x", "y"}, "PASS_TO_PASS": nil}),
		rec("a-2", map[string]any{"version": json.RawMessage("0.20"), "FAIL_TO_PASS": `["p\"q", "\u00e9"]`, "PASS_TO_PASS": json.RawMessage("null")}),
		rec("a-3", map[string]any{"version": "2022.03", "environment_setup_commit": nil, "hints_text": json.RawMessage("null")}),
		// Duplicate keys: the last one wins, as in Python.
		`{"repo":"acme/widget","instance_id":"a-4","base_commit":"` + strings.Repeat("0", 40) + `","test_patch":"t","version":"1","version":"2"}`,
	}
	path := writeFile(t, "enc.jsonl", strings.Join(lines, "\r\n")+"\r\n")
	got, err := Load(context.Background(), path, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Version    string
		F2P, P2P   []string
		EnvCommit  string
		HintsText  string
		SourceLine string
	}
	var rows []row
	for _, in := range got {
		rows = append(rows, row{in.Version, in.FailToPass, in.PassToPass, in.EnvSetupCommit(), in.HintsText, strings.TrimPrefix(in.Source, path)})
	}
	want := []row{
		{"3.0", []string{"x", "y"}, []string{}, strings.Repeat("cd", 20), "", ":1"},
		{"0.20", []string{`p"q`, "é"}, []string{}, strings.Repeat("cd", 20), "", ":2"},
		{"2022.03", []string{"t::a"}, []string{}, strings.Repeat("ab", 20), "", ":3"},
		{"2", []string{}, []string{}, strings.Repeat("0", 40), "", ":4"},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("got  %+v\nwant %+v", rows, want)
	}
}

// TestStringDecoding compares string decoding with encoding/json on
// escapes, surrogates and multi-byte text.
func TestStringDecoding(t *testing.T) {
	for _, lit := range []string{
		`""`, `"plain"`, `"a\"b\\c\/d"`, `"\b\f\n\r\t"`, `"\u0041\u00e9\u4e2d"`, `"\ud83d\ude00"`,
		`"\ud83d"`, `"\ude00x"`, `"\ud83dx"`, `"\ud83d\u0041"`, `"héllo wörld 中文 😀"`,
		`"` + strings.Repeat(`abcdefg\n`, 50) + `"`, `"12345678\"12345678"`, `"\u0000"`,
	} {
		var want string
		if err := json.Unmarshal([]byte(lit), &want); err != nil {
			t.Fatalf("%s: %v", lit, err)
		}
		d := newDecoder([]byte(lit), 0)
		gotKeep, err := d.str(true)
		if err != nil {
			t.Fatalf("%s: %v", lit, err)
		}
		if string(gotKeep) != want {
			t.Errorf("str(true)(%s) = %q, want %q", lit, gotKeep, want)
		}
		d = newDecoder([]byte(lit), 0)
		got, err := d.str(false)
		if err != nil || string(got) != want {
			t.Errorf("str(false)(%s) = %q, %v; want %q", lit, got, err, want)
		}
	}
}

// FuzzRecordString checks the decoder against encoding/json on arbitrary
// patch values: both accept or both reject, with the same text.
func FuzzRecordString(f *testing.F) {
	for _, s := range []string{`"a"`, `"\u12"`, `"\ud800\udc00"`, `"a\\"`, "\"\x01\"", `"é"`, `1`, `{}`, `"\x"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, val string) {
		if !utf8Valid(val) {
			return // encoding/json replaces invalid UTF-8, the loader rejects it
		}
		line := `{"patch": ` + val + `}`
		var std struct {
			Patch *string `json:"patch"`
		}
		stdErr := json.Unmarshal([]byte(line), &std)
		var r record
		d := newDecoder([]byte(line), 0)
		err := d.object(&r)
		if err == nil && d.peek() != 0 {
			err = d.unexpected("end")
		}
		var stdType *json.UnmarshalTypeError
		if errors.As(stdErr, &stdType) {
			if err != nil || len(r.problems) != 1 {
				t.Fatalf("%s: std type error %v; got err %v problems %v", line, stdErr, err, r.problems)
			}
			return
		}
		if (stdErr == nil) != (err == nil) {
			t.Fatalf("%s: encoding/json err %v, loader err %v", line, stdErr, err)
		}
		if err == nil && std.Patch != nil && r.inst.Patch != *std.Patch {
			t.Fatalf("%s: got %q want %q", line, r.inst.Patch, *std.Patch)
		}
	})
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func TestEmptyAndForeignFiles(t *testing.T) {
	for _, tc := range []struct{ name, content, want string }{
		{"empty.jsonl", "", "empty.jsonl: no records: the file is empty"},
		{"blank.jsonl", "\n  \n", "blank.jsonl: no records: the file is empty"},
		{"empty.json", " [ ] ", "empty.json: no records: the array is empty"},
		{"data.csv", "repo,instance_id\n", `data.csv:1:1: not a dataset: expected JSONL ('{'), a JSON array ('[') or parquet, found 'r'`},
	} {
		path := writeFile(t, tc.name, tc.content)
		got, err := Load(context.Background(), path, LoadOptions{})
		if err == nil || !strings.HasSuffix(err.Error(), tc.want) || len(got) != 0 {
			t.Errorf("%s: got %d records, err %v; want %q", tc.name, len(got), err, tc.want)
		}
	}
}

// TestFileSizeLimit: a dataset over the size limit is an error naming the
// file and the limit, without reading it (a regular file, by its size) or
// after reading no more than the limit (a FIFO of endless JSONL; /dev/zero
// is refused as no dataset after its first MiB, see readlimit_test.go).
func TestFileSizeLimit(t *testing.T) {
	fifo := endlessFIFO(t, `{"instance_id": "x"}`+"\n")
	sparse := filepath.Join(t.TempDir(), "huge.jsonl")
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(DefaultMaxFileBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, tc := range []struct {
		path string
		lim  Limits
		want string
	}{
		{sparse, Limits{}, "dataset " + sparse + ": 1073741825 bytes: over the size limit of 1 GiB a file"},
		{fifo, Limits{MaxFileBytes: 1 << 20}, "dataset " + fifo + ": more than 1048576 bytes: over the size limit of 1 MiB a file"},
	} {
		got, err := Load(context.Background(), tc.path, LoadOptions{Limits: tc.lim})
		if !errors.Is(err, ErrTooLarge) || err.Error() != tc.want || got != nil {
			t.Errorf("Load(%s) = %d records, %v; want %q", tc.path, len(got), err, tc.want)
		}
	}
	// At the limit exactly, the file loads.
	path := writeFile(t, "a.jsonl", rec("acme__widget-1", nil)+"\n")
	fi, _ := os.Stat(path)
	if got, err := Load(context.Background(), path, LoadOptions{Limits: Limits{MaxFileBytes: fi.Size()}}); err != nil || len(got) != 1 {
		t.Errorf("at the limit: %d records, %v", len(got), err)
	}
}

// TestCollisionKeepsFirst: of ids with one published name, the first is
// loaded and each later one is a problem naming both, in any file layout.
func TestCollisionKeepsFirst(t *testing.T) {
	lines := []string{rec("a__x-1", nil), rec("b-1", nil), rec("A__X-1", nil), rec("a_1776_x-1", nil)}
	path := writeFile(t, "c.jsonl", strings.Join(lines, "\n"))
	got, err := Load(context.Background(), path, LoadOptions{})
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 2 {
		t.Fatalf("err = %v, want 2 problems", err)
	}
	if len(got) != 2 || got[0].InstanceID != "a__x-1" || got[1].InstanceID != "b-1" {
		t.Errorf("loaded %v, want a__x-1 and b-1", got)
	}
	for i, want := range []string{path + `:3: field "instance_id": "A__X-1" (this record) and "a__x-1" (` + path + `:1)`, path + `:4: field "instance_id": "a_1776_x-1" (this record) and "a__x-1"`} {
		if p := ve.Problems[i].Error(); !strings.HasPrefix(p, want) {
			t.Errorf("problem %d = %q, want prefix %q", i, p, want)
		}
	}
}

func TestHubDatasetName(t *testing.T) {
	for _, name := range []string{"princeton-nlp/SWE-bench_Verified", "SWE-bench/SWE-bench_Lite", "lite"} {
		_, err := Load(context.Background(), name, LoadOptions{})
		if !errors.Is(err, ErrHubDataset) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "no such file") {
			t.Errorf("Load(%q) = %v, want ErrHubDataset naming it", name, err)
		}
	}
	_, err := Load(context.Background(), filepath.Join(t.TempDir(), "nope.jsonl"), LoadOptions{})
	if err == nil || errors.Is(err, ErrHubDataset) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestLoadCancelled(t *testing.T) {
	path := writeFile(t, "a.jsonl", rec("a-1", nil)+"\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Load(ctx, path, LoadOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestSelect(t *testing.T) {
	ins := []core.Instance{{InstanceID: "a"}, {InstanceID: "b"}, {InstanceID: "c"}}
	got, err := Select(ins, []string{"c", "a", "c"})
	if err != nil || len(got) != 2 || got[0].InstanceID != "a" || got[1].InstanceID != "c" {
		t.Errorf("Select = %v, %v", got, err)
	}
	got, err = Select(ins, nil)
	if err != nil || len(got) != 3 {
		t.Errorf("Select(nil) = %v, %v", got, err)
	}
	_, err = Select(ins, []string{"zz", "a", "yy", "zz"})
	if err == nil || err.Error() != "2 instance id(s) not in the dataset: zz, yy" {
		t.Errorf("Select unknown = %v", err)
	}
}

// BenchmarkLoadVerified loads the 9.5 MB / 500-record Verified JSONL.
func BenchmarkLoadVerified(b *testing.B) {
	path := filepath.Join(refDir(b), "datasets", "SWE-bench_Verified", "test.jsonl")
	b.ReportAllocs()
	for b.Loop() {
		ins, err := Load(context.Background(), path, LoadOptions{})
		if err != nil || len(ins) != 500 {
			b.Fatalf("%d records, %v", len(ins), err)
		}
	}
}

func TestQuoteShort(t *testing.T) {
	long := strings.Repeat("é", 60)
	got := quoteShort(long)
	if !strings.Contains(got, "…") || strings.Contains(got, `\x`) {
		t.Errorf("quoteShort = %s", got)
	}
	if quoteShort("abc") != `"abc"` {
		t.Error(quoteShort("abc"))
	}
}

// BenchmarkLoadVerifiedEncodingJSON is the baseline BenchmarkLoadVerified
// is measured against: the same file read once and decoded with
// encoding/json into the same fields.
func BenchmarkLoadVerifiedEncodingJSON(b *testing.B) {
	path := filepath.Join(refDir(b), "datasets", "SWE-bench_Verified", "test.jsonl")
	b.ReportAllocs()
	for b.Loop() {
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		var out []core.Instance
		for _, line := range bytes.Split(data, []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			var r struct {
				core.Instance
				F2P string `json:"FAIL_TO_PASS"`
				P2P string `json:"PASS_TO_PASS"`
			}
			if err := json.Unmarshal(line, &r); err != nil {
				b.Fatal(err)
			}
			if err := json.Unmarshal([]byte(r.F2P), &r.Instance.FailToPass); err != nil {
				b.Fatal(err)
			}
			if err := json.Unmarshal([]byte(r.P2P), &r.Instance.PassToPass); err != nil {
				b.Fatal(err)
			}
			out = append(out, r.Instance)
		}
		if len(out) != 500 {
			b.Fatal(len(out))
		}
	}
}

// TestImageAssets: image_assets is kept as JSON text whether the record
// holds the object itself or a string holding it (Multimodal's encoding);
// other types are ignored like any unknown field.
func TestImageAssets(t *testing.T) {
	obj := `{"test_patch": [{"path": "a/b.png", "url": "https://x/y.png"}], "patch": []}`
	lines := []string{
		rec("i-1", map[string]any{"image_assets": json.RawMessage(obj)}),
		rec("i-2", map[string]any{"image_assets": obj}),
		rec("i-3", map[string]any{}),
	}
	path := writeFile(t, "assets.jsonl", strings.Join(lines, "\n")+"\n")
	got, err := Load(context.Background(), path, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// rec re-encodes the object compactly: record 1 holds that text.
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(obj)); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{compact.String(), obj, ""} {
		if got[i].ImageAssets != want {
			t.Errorf("record %d: image_assets %q, want %q", i+1, got[i].ImageAssets, want)
		}
	}
}

// TestSelfContainedRecords: a record carrying its own eval_script,
// log_parser and image (upstream v5) is not checked against the spec
// tables, whatever its repo and version; the same record without one of
// them is.
func TestSelfContainedRecords(t *testing.T) {
	lines := []string{
		rec("acme__gadget-1", map[string]any{"repo": "acme/gadget"}),
		rec("acme__widget-2", map[string]any{"version": "9.9"}),
		rec("acme__gadget-3", map[string]any{"repo": "acme/gadget", "image": nil}),
	}
	path := writeFile(t, "v5.jsonl", strings.Join(lines, "\n"))
	got, err := Load(context.Background(), path, LoadOptions{Known: widgetKnown})
	var ids []string
	for _, in := range got {
		ids = append(ids, in.InstanceID)
	}
	if want := []string{"acme__gadget-1", "acme__widget-2"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("valid records %v, want %v", ids, want)
	}
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 || !strings.Contains(ve.Problems[0].Error(), `v5.jsonl:3: field "repo": unknown repo "acme/gadget"`) {
		t.Errorf("err = %v, want only line 3's unknown repo", err)
	}
}

// TestOtherColumnsKept: columns the loader has no field for are kept, in
// the order read, as JSON text, from JSON lines, a JSON array and parquet
// (scalars and lists); a repeated key keeps its last value.
func TestOtherColumnsKept(t *testing.T) {
	line := rec("acme__widget-1", map[string]any{"unknown_field": nil, "difficulty": "15 min - 1 hour",
		"score": json.RawMessage("1.50"), "tags": []any{"a", 1, nil}, "meta": map[string]any{"k": "v"}})
	want := []core.Column{{Name: "difficulty", Value: `"15 min - 1 hour"`}, {Name: "meta", Value: `{"k":"v"}`},
		{Name: "score", Value: "1.50"}, {Name: "tags", Value: `["a",1,null]`}}
	for _, tc := range []struct{ name, content string }{
		{"x.jsonl", line + "\n"},
		{"x.json", "[\n" + line + "\n]\n"},
	} {
		got, err := Load(context.Background(), writeFile(t, tc.name, tc.content), LoadOptions{})
		if err != nil || len(got) != 1 {
			t.Fatalf("%s: %v", tc.name, err)
		}
		// json.Marshal writes keys sorted: the order read is that order.
		if !reflect.DeepEqual(got[0].Extra, want) {
			t.Errorf("%s: other columns\n got %q\nwant %q", tc.name, got[0].Extra, want)
		}
	}
	dup := strings.Replace(line, `"difficulty":"15 min - 1 hour"`, `"difficulty":"easy","difficulty":"hard"`, 1)
	got, err := Load(context.Background(), writeFile(t, "dup.jsonl", dup), LoadOptions{})
	if err != nil || len(got) != 1 || got[0].Extra[0] != (core.Column{Name: "difficulty", Value: `"hard"`}) {
		t.Errorf("a repeated key: %v, %q", err, got)
	}

	type pqOther struct {
		InstanceID string   `parquet:"instance_id"`
		Repo       string   `parquet:"repo"`
		BaseCommit string   `parquet:"base_commit"`
		TestPatch  string   `parquet:"test_patch"`
		Version    string   `parquet:"version"`
		Difficulty string   `parquet:"difficulty"`
		Count      int64    `parquet:"eval_count"`
		Ratio      float64  `parquet:"ratio"`
		Flag       bool     `parquet:"flag"`
		Tags       []string `parquet:"tags,list"`
		Note       *string  `parquet:"note,optional"`
	}
	path := filepath.Join(t.TempDir(), "x.parquet")
	if err := parquet.WriteFile(path, []pqOther{{InstanceID: "acme__widget-1", Repo: "acme/widget", BaseCommit: strings.Repeat("a", 40),
		TestPatch: "t", Version: "1.0", Difficulty: "<15 min", Count: 3, Ratio: 0.5, Flag: true, Tags: []string{"x", "y"}}}); err != nil {
		t.Fatal(err)
	}
	got, err = Load(context.Background(), path, LoadOptions{})
	if err != nil || len(got) != 1 {
		t.Fatalf("parquet: %v", err)
	}
	wantPQ := []core.Column{{Name: "difficulty", Value: `"<15 min"`}, {Name: "eval_count", Value: "3"}, {Name: "ratio", Value: "0.5"},
		{Name: "flag", Value: "true"}, {Name: "tags", Value: `["x", "y"]`}, {Name: "note", Value: "null"}}
	if !reflect.DeepEqual(got[0].Extra, wantPQ) {
		t.Errorf("parquet: other columns\n got %q\nwant %q", got[0].Extra, wantPQ)
	}
}
