package dataset

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/swebuild/swebuild/internal/fifotest"
)

// endlessFIFO is a FIFO a writer fills with line for ever (until the test
// ends): a non-regular dataset with no size.
func endlessFIFO(t *testing.T, line string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "endless.jsonl")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer f.Close()
		buf := []byte(strings.Repeat(line, 64<<10/len(line)+1))
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := f.Write(buf); err != nil {
				return
			}
		}
	}()
	return path
}

// allocated runs f and returns the bytes it allocated (the whole process's
// heap allocations, which this test's other goroutines barely add to).
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// A non-regular dataset (no size to check before reading) is refused while
// it is read, in memory bounded by the limit: an endless stream of JSONL is
// refused once the limit has come, having allocated little more than the
// limit (io.ReadAll's growing buffer allocated about 4 times it: plan
// --dataset /dev/zero held 2.1 GB at the 1 GiB limit); a stream that is no
// dataset at all (/dev/zero) is refused after its first MiB.
func TestNonRegularDatasetIsRefusedInBoundedMemory(t *testing.T) {
	const limit = 32 << 20
	fifo := endlessFIFO(t, `{"instance_id": "x"}`+"\n")
	var err error
	n := allocated(func() {
		_, err = Load(context.Background(), fifo, LoadOptions{Limits: Limits{MaxFileBytes: limit}})
	})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("endless JSONL: %v, want ErrTooLarge", err)
	}
	t.Logf("endless JSONL, limit %d MiB: %.1f MiB allocated", limit>>20, float64(n)/(1<<20))
	if n > limit+limit/4 {
		t.Errorf("endless JSONL: %.1f MiB allocated for a %d MiB limit", float64(n)/(1<<20), limit>>20)
	}

	n = allocated(func() {
		_, err = Load(context.Background(), "/dev/zero", LoadOptions{})
	})
	t.Logf("/dev/zero, default limit: %v; %.1f MiB allocated", err, float64(n)/(1<<20))
	var ve *ValidationError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "not a dataset") {
		t.Errorf("/dev/zero: %v, want a 'not a dataset' problem", err)
	}
	if n > 4<<20 {
		t.Errorf("/dev/zero: %.1f MiB allocated, want at most 4", float64(n)/(1<<20))
	}
}

// A cancelled context stops the read of an endless stream.
func TestNonRegularDatasetReadHonoursCancellation(t *testing.T) {
	fifo := endlessFIFO(t, `{"instance_id": "x"}`+"\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Load(ctx, fifo, LoadOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

// A dataset FIFO that no process writes to, or whose writer sends
// nothing, is given up when the context is done (SIGTERM): before, the
// open or the first read blocked for ever and the command ignored SIGTERM.
func TestDatasetFIFOHonoursCancellation(t *testing.T) {
	for _, tc := range []struct {
		name string
		path func(t *testing.T) string
	}{
		{"no writer", func(t *testing.T) string { return fifotest.NoWriter(t, "", "dataset.jsonl") }},
		{"silent writer", func(t *testing.T) string { return fifotest.Silent(t, "", "dataset.jsonl") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.path(t)
			err := fifotest.Within(t, 100*time.Millisecond, 10*time.Second, func(ctx context.Context) error {
				_, err := Load(ctx, p, LoadOptions{})
				return err
			})
			if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), p) {
				t.Fatalf("err = %v; want context.Canceled naming %s", err, p)
			}
		})
	}
}
