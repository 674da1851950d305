package grading

import (
	"encoding/json"
	"testing"
)

// Expected strings are what Python's json.dumps(s) prints (ensure_ascii):
// see the json module documentation; the byte-level layout of whole reports
// is checked against stored report.json files in TestReferencePairs.
func TestPyJSONString(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`plain [1] a::b`, `"plain [1] a::b"`},
		{`q"b\`, `"q\"b\\"`},
		{"\n\r\t\b\f", `"\n\r\t\b\f"`},
		{"\x00\x1b\x7f", `"\u0000\u001b\u007f"`},
		{"é", `"\u00e9"`},
		{"<&>", `"<&>"`},
		{"\u2028", `"\u2028"`},
		{"😀", `"\ud83d\ude00"`},
		{"\xff", `"\ufffd"`},
	} {
		w := pyJSONWriter{}
		w.str(c.in)
		if string(w.buf) != c.want {
			t.Errorf("%q: got %s, want %s", c.in, w.buf, c.want)
		}
		var back string
		if c.in != "\xff" {
			if err := json.Unmarshal(w.buf, &back); err != nil || back != c.in {
				t.Errorf("%q does not round-trip: %q, %v", c.in, back, err)
			}
		}
	}
}

func TestStatusMapJSON(t *testing.T) {
	sm := NewStatusMap()
	if string(sm.JSON()) != "{}" {
		t.Errorf("empty: %s", sm.JSON())
	}
	sm.set("b", StatusPassed)
	sm.set("a", StatusFailed)
	sm.set("b", StatusError)
	want := "{\n    \"b\": \"ERROR\",\n    \"a\": \"FAILED\"\n}"
	if string(sm.JSON()) != want {
		t.Errorf("got:\n%s\nwant:\n%s", sm.JSON(), want)
	}
}
