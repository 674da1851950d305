package pyjson

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestDumpsIndent4 compares the writer with what CPython 3's
// json.dumps(json.loads(in), indent=4) printed for each input (run by hand
// with the machine's python3 when the table was written).
func TestDumpsIndent4(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"empty object", `{}`, `{}`},
		{"empty array", `[]`, `[]`},
		{"empty array in object", `{"a":[]}`, "{\n    \"a\": []\n}"},
		{"empty object and array", `{"a": {}, "b": [1, 2]}`,
			"{\n    \"a\": {},\n    \"b\": [\n        1,\n        2\n    ]\n}"},
		{"literals", `[true,false,null]`, "[\n    true,\n    false,\n    null\n]"},
		{"key order kept", `{"z": 1, "a": 2}`, "{\n    \"z\": 1,\n    \"a\": 2\n}"},
		{"nesting", `{"n": -1.5, "e": 12, "nested": [{"k": [[]]}]}`,
			"{\n    \"n\": -1.5,\n    \"e\": 12,\n    \"nested\": [\n        {\n            \"k\": [\n                []\n            ]\n        }\n    ]\n}"},
		{"non-ASCII escaped", `"café \ud83d\ude00"`, `"caf\u00e9 \ud83d\ude00"`},
		{"non-ASCII written raw in the input", "\"caf\u00e9 \U0001F600\"", `"caf\u00e9 \ud83d\ude00"`},
		{"short escapes", `"tab\there\nnl \"q\" back\\slash \u0008\u000c\r \u0001 \u007f"`,
			`"tab\there\nnl \"q\" back\\slash \b\f\r \u0001 \u007f"`},
		{"HTML characters not escaped", `"<>&/"`, `"<>&/"`},
		{"non-ASCII key", `{"\u00e9": "x"}`, "{\n    \"\\u00e9\": \"x\"\n}"},
		{"line separator", `["\u2028"]`, "[\n    \"\\u2028\"\n]"},
		{"top-level scalar", `42`, `42`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := DumpsIndent4([]byte(c.in))
			if err != nil {
				t.Fatalf("DumpsIndent4(%s): %v", c.in, err)
			}
			if string(got) != c.want {
				t.Errorf("DumpsIndent4(%s)\n got %q\nwant %q", c.in, got, c.want)
			}
		})
	}
}

func TestDumpsIndent4Malformed(t *testing.T) {
	for _, in := range []string{``, `{"a": }`, `[1, 2`, `{"a": [1`, `{"a" 1}`, `}`, `{} {}`, `[1] 2`} {
		if got, err := DumpsIndent4([]byte(in)); err == nil {
			t.Errorf("DumpsIndent4(%s) = %q, want an error", in, got)
		}
	}
}

// TestDumpsIndent4UpstreamReports re-encodes the report.json files the
// official harness wrote (json.dumps(report, indent=4)) from their compact
// form and wants the upstream bytes back.
func TestDumpsIndent4UpstreamReports(t *testing.T) {
	root := filepath.Join("..", "..", "..", "shared", "swebench-reference", "eval-logs")
	if _, err := os.Stat(root); err != nil {
		t.Skipf("no reference data: %v", err)
	}
	n := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "report.json" {
			return err
		}
		want, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, want); err != nil {
			t.Errorf("%s: %v", path, err)
			return nil
		}
		got, err := DumpsIndent4(compact.Bytes())
		if err != nil {
			t.Errorf("%s: %v", path, err)
			return nil
		}
		if !bytes.Equal(got, bytes.TrimRight(want, "\n")) {
			t.Errorf("%s: re-encoded report differs from upstream's\n got %.300q\nwant %.300q", path, got, want)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("no report.json under %s", root)
	}
}
