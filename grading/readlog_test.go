package grading

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/swebuild/swebuild/internal/fifotest"
)

func TestReadLog(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.txt")
	if err := os.WriteFile(small, []byte("PASSED a\r\nFAILED b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		path    string
		limit   int64
		want    string
		wantErr string
	}{
		{"whole file, bytes as they are", small, 0, "PASSED a\r\nFAILED b\n", ""},
		{"exactly at the limit", small, 19, "PASSED a\r\nFAILED b\n", ""},
		{"regular file over the limit", small, 18, "", "19 bytes, more than the limit of 18"},
		{"endless device stops at the limit", "/dev/zero", 1 << 20, "", "more than the limit of 1048576 bytes"},
		{"missing file", filepath.Join(dir, "nope.txt"), 0, "", "nope.txt: no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ReadLog(context.Background(), c.path, c.limit)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), c.path) {
					t.Fatalf("err = %v, want one naming %s and containing %q", err, c.path, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("ReadLog = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// grade --log on endless or stalled inputs: /dev/zero is refused at the
// limit in memory bounded by it (chunks, no buffer doubling: with 256 MiB
// it held 1 GB before), and a FIFO no process writes to, or one whose
// writer sends nothing, is given up when the context is done (SIGTERM):
// before, grade waited for ever.
func TestReadLogEndlessAndStalledInputs(t *testing.T) {
	const limit = 16 << 20
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	_, err := ReadLog(context.Background(), "/dev/zero", limit)
	runtime.ReadMemStats(&b)
	if err == nil || !strings.Contains(err.Error(), "/dev/zero: more than the limit of 16777216 bytes") {
		t.Errorf("/dev/zero: %v", err)
	}
	if n := b.TotalAlloc - a.TotalAlloc; n > limit+limit/4 {
		t.Errorf("/dev/zero: %d MiB allocated for a %d MiB limit", n>>20, limit>>20)
	}
	for _, tc := range []struct {
		name string
		path func(t *testing.T) string
	}{
		{"FIFO with no writer", func(t *testing.T) string { return fifotest.NoWriter(t, "", "test_output.txt") }},
		{"FIFO with a silent writer", func(t *testing.T) string { return fifotest.Silent(t, "", "test_output.txt") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.path(t)
			err := fifotest.Within(t, 100*time.Millisecond, 10*time.Second, func(ctx context.Context) error {
				_, err := ReadLog(ctx, p, 0)
				return err
			})
			if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), p) {
				t.Fatalf("err = %v; want context.Canceled naming %s", err, p)
			}
		})
	}
}
