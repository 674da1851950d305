package dataset

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/swebuild/swebuild/core"
)

// TestChunkedJSONLMatchesOnePass loads a large JSONL file with problems
// spread through it (malformed lines, a duplicate id, an unknown version,
// blank lines, a byte order mark, no newline at the end) in 1 to 5 chunks and
// requires the same records, sources and problems (with their line and
// column) every time.
func TestChunkedJSONLMatchesOnePass(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(refDir(t), "datasets", "SWE-bench_Verified", "test.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte{'\n'})
	if len(lines) != 500 {
		t.Fatalf("%d lines", len(lines))
	}
	var b bytes.Buffer
	b.WriteString("\xef\xbb\xbf")
	for i, l := range lines {
		switch {
		case i%97 == 5:
			b.Write(l[:len(l)/2]) // cut in the middle: malformed
		case i%131 == 7:
			// unknown version, in a record without its own eval_script (a
			// record with one is not checked against the tables)
			l = bytes.Replace(l, []byte(`"eval_script":"`), []byte(`"no_eval_script":"`), 1)
			b.Write(bytes.Replace(l, []byte(`"version":"`), []byte(`"version":"9`), 1))
		case i%151 == 3:
			b.WriteString("  \r\n")
			b.Write(l)
		default:
			b.Write(l)
		}
		if i != len(lines)-1 {
			b.WriteByte('\n')
		}
	}
	b.WriteByte('\n')
	b.Write(lines[42]) // a duplicate, last line without a newline
	src := b.Bytes()
	if len(src) < 5*minChunk {
		t.Fatalf("only %d bytes: too small for 5 chunks", len(src))
	}
	known := specsKnown(t)
	load := func(parts int) ([]core.Instance, []Problem) {
		buf := bytes.Clone(src) // decoding is in place
		ins, err := loadJSONLParts(context.Background(), "big.jsonl", buf, 3, LoadOptions{Known: known}, parts)
		var verr *ValidationError
		if !errors.As(err, &verr) {
			t.Fatalf("%d parts: error %v, want a ValidationError", parts, err)
		}
		return ins, verr.Problems
	}
	wantIns, wantProblems := load(1)
	if len(wantIns) < 480 || len(wantProblems) < 8 {
		t.Fatalf("one pass: %d records, %d problems: the corruption did not take", len(wantIns), len(wantProblems))
	}
	for parts := 2; parts <= 5; parts++ {
		if n := len(jsonlChunks(src, 3, parts)) - 1; n != parts {
			t.Errorf("%d parts asked, %d made", parts, n)
		}
		ins, problems := load(parts)
		if !reflect.DeepEqual(ins, wantIns) {
			t.Errorf("%d parts: records differ from one pass", parts)
		}
		if !reflect.DeepEqual(problems, wantProblems) {
			t.Errorf("%d parts: problems differ from one pass:\n got %v\nwant %v", parts, problems, wantProblems)
		}
	}
}
