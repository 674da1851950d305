package publish

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/registry"
)

// A publish ledger that is not a file of records is refused before it is
// read, naming it: /dev/zero and a FIFO fed for ever (both were read until
// memory ran out, SIGTERM ignored), a sparse file over the record files'
// limit (a 2 GiB one peaked at 4.6 GB) and the same refused by its size.
// A ledger within the limit stops being read when the context is done.
// Bounds, not a stopwatch: bytes the FIFO gave, bytes allocated.
func TestLedgerReadWithTheRecordFileLimits(t *testing.T) {
	sparse := func(t *testing.T, size int64) string {
		p := filepath.Join(t.TempDir(), "ledger.jsonl")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(size); err != nil {
			t.Skipf("sparse file: %v", err)
		}
		return p
	}
	const fedBound = 64 << 20    // bytes a FIFO may give before the test fails
	const allocBound = 256 << 20 // bytes a refusal may allocate
	for _, tc := range []struct {
		name      string
		path      func(t *testing.T, fed *atomic.Int64, fedTooMuch chan struct{}) string
		cancelled bool // the context is done before the run starts
		want      error
		wantText  string
	}{
		{name: "dev-zero", path: func(*testing.T, *atomic.Int64, chan struct{}) string { return "/dev/zero" },
			want: core.ErrNotRegular, wantText: "/dev/zero: not a regular file but a character device"},
		{name: "fifo", path: func(t *testing.T, fed *atomic.Int64, fedTooMuch chan struct{}) string {
			p := filepath.Join(t.TempDir(), "ledger.jsonl")
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
			// A writer that writes zeros for ever (until the bound).
			go func() {
				w, err := os.OpenFile(p, os.O_WRONLY, 0)
				if err != nil {
					return
				}
				defer w.Close()
				buf := make([]byte, 1<<20)
				for fed.Load() <= fedBound {
					n, err := w.Write(buf)
					fed.Add(int64(n))
					if err != nil {
						return
					}
				}
				close(fedTooMuch)
			}()
			return p
		}, want: core.ErrNotRegular, wantText: "not a regular file but a FIFO"},
		{name: "sparse-over-the-limit", path: func(t *testing.T, _ *atomic.Int64, _ chan struct{}) string {
			return sparse(t, core.MaxFileBytes+1)
		}, want: core.ErrFileTooLarge, wantText: "1073741825 bytes, more than 1073741824"},
		{name: "cancelled", path: func(t *testing.T, _ *atomic.Int64, _ chan struct{}) string {
			return sparse(t, core.MaxFileBytes)
		}, cancelled: true, want: context.Canceled, wantText: "context canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fed atomic.Int64
			fedTooMuch := make(chan struct{})
			path := tc.path(t, &fed, fedTooMuch)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancelled {
				cancel()
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			done := make(chan error, 1)
			go func() {
				_, err := Run(ctx, nil, RunOptions{LedgerPath: path, Registry: registry.Options{Keychain: regtest.Anonymous()}})
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-fedTooMuch:
				cancel()
				t.Fatalf("the ledger reader took more than %d MiB from an endless FIFO", fedBound>>20)
			}
			runtime.ReadMemStats(&after)
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > allocBound {
				t.Errorf("%d MiB allocated reading %s; want at most %d MiB", alloc>>20, path, allocBound>>20)
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.wantText) || !strings.Contains(err.Error(), path) {
				t.Fatalf("publish with ledger %s: %v; want an error naming it and %q (%v)", path, err, tc.wantText, tc.want)
			}
		})
	}
}
