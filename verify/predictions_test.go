package verify

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestReadPredictionsLimit: a predictions file is read with a size limit,
// whatever it is: a device that never ends (/dev/zero), a regular file over
// the limit (sparse: nothing is written to disk), an endless stream of valid
// lines through a pipe. Each is a clear error naming the file and the limit,
// and reading it allocates about the limit at most, not more.
func TestReadPredictionsLimit(t *testing.T) {
	line := `{"instance_id":"a","model_name_or_path":"m","model_patch":"diff"}` + "\n"
	dir := t.TempDir()
	sparse := filepath.Join(dir, "huge.jsonl")
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(line); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(DefaultMaxPredictionsBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()

	// An endless stream of valid predictions: the limit stops it.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	go func() {
		defer pw.Close()
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(pw, `{"instance_id":"i%d","model_name_or_path":"m","model_patch":"%s"}`+"\n", i, strings.Repeat("x", 1000)); err != nil {
				return
			}
		}
	}()
	stream := fmt.Sprintf("/proc/self/fd/%d", pr.Fd())

	for _, tc := range []struct {
		name, path string
		max        int64
		want       string
		// maxAlloc bounds what reading may allocate: the stream's
		// lines are kept until the limit, plus bufio's buffer.
		maxAlloc uint64
	}{
		{"/dev/zero", "/dev/zero", DefaultMaxPredictionsBytes, "/dev/zero:1: not a predictions file: starts with byte 0x00", 1 << 20},
		{"regular file over the limit", sparse, DefaultMaxPredictionsBytes, fmt.Sprintf("%s: larger than the %d-byte limit", sparse, DefaultMaxPredictionsBytes), 1 << 20},
		{"endless stream", stream, 8 << 20, fmt.Sprintf("%s: larger than the %d-byte limit", stream, 8<<20), 24 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			ps, err := ReadPredictionsMax(tc.path, tc.max)
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if len(ps) != 0 {
				t.Errorf("%d predictions returned with the error", len(ps))
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > tc.maxAlloc {
				t.Errorf("allocated %d bytes reading it, want at most %d", alloc, tc.maxAlloc)
			}
		})
	}

	// At the limit exactly is fine; blank lines keep line numbers right.
	exact := filepath.Join(dir, "exact.jsonl")
	body := "\n" + line + "\n" + `{"model_name_or_path":"m"}` + "\n"
	if err := os.WriteFile(exact, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	ps, err := ReadPredictionsMax(exact, int64(len(body)))
	if err == nil || !strings.Contains(err.Error(), exact+":4: instance_id: missing") || len(ps) != 1 {
		t.Fatalf("file at the limit: %v %+v", err, ps)
	}
	if _, err := ReadPredictionsMax(exact, int64(len(body))-1); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("one byte over the limit: %v", err)
	}
	arr := filepath.Join(dir, "arr.json")
	if err := os.WriteFile(arr, []byte(" ["+strings.TrimSpace(line)+"]"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPredictionsMax(arr, 10); err == nil || !strings.Contains(err.Error(), "10-byte limit") {
		t.Fatalf("array over the limit: %v", err)
	}
	if ps, err := ReadPredictionsMax(arr, 1<<20); err != nil || len(ps) != 1 {
		t.Fatalf("array: %v %+v", err, ps)
	}
	empty := filepath.Join(dir, "empty.jsonl")
	if err := os.WriteFile(empty, []byte("\n \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ps, err := ReadPredictions(empty); err != nil || len(ps) != 0 {
		t.Fatalf("empty: %v %+v", err, ps)
	}
}
