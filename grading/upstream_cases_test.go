package grading

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestReferenceUpstreamCases runs every parser on the small logs of
// testdata/upstream-cases, whose expected status maps (in insertion order)
// and exceptions are what upstream v4.1.0's own Python functions returned
// (see its README.md).
func TestReferenceUpstreamCases(t *testing.T) {
	total, raising := 0, 0
	parsers := map[string]bool{}
	for _, file := range []string{"edge.jsonl", "sampled.jsonl"} {
		path := filepath.Join("testdata", "upstream-cases", file)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		line := 0
		for sc.Scan() {
			line++
			var c struct {
				Parser     string      `json:"parser"`
				InstanceID string      `json:"instance_id"`
				Why        string      `json:"why"`
				Log        string      `json:"log"`
				StatusMap  [][2]string `json:"status_map"`
				Raises     string      `json:"raises"`
			}
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
				t.Fatalf("%s:%d: %v", path, line, err)
			}
			total++
			parsers[c.Parser] = true
			name := fmt.Sprintf("%s:%d %s %s", file, line, c.Parser, c.Why)
			sm, err := ParseLogWith(c.Parser, c.InstanceID, c.Log)
			if c.Raises != "" {
				raising++
				if !errors.Is(err, ErrUpstreamParserRaises) {
					t.Errorf("%s: upstream raises %s; got %v, err %v\nlog %q", name, c.Raises, sm, err, c.Log)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %v\nlog %q", name, err, c.Log)
				continue
			}
			var got [][2]string
			for _, k := range sm.Keys() {
				got = append(got, [2]string{k, sm.m[k]})
			}
			if fmt.Sprint(got) != fmt.Sprint(c.StatusMap) || len(got) != len(c.StatusMap) {
				t.Errorf("%s:\n got  %q\n want %q\nlog %q", name, got, c.StatusMap, c.Log)
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	for _, n := range ParserNames() {
		if !parsers[n] {
			t.Errorf("no case for %s", n)
		}
	}
	t.Logf("%d cases (%d where upstream raises), %d parser functions", total, raising, len(parsers))
}
