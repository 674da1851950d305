package core

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/swebuild/swebuild/internal/fifotest"
)

// ReadAllContext, the bounded reader of --freeze documents, grade --log
// and the ledger readers: a regular file over the limit is refused by its
// size (nothing allocated for it), an endless FIFO once the limit has
// come (the writer's byte count bounds the test), FIFOs with no writer or
// a silent one when the context is done; inputs at the limit are read
// whole.
func TestReadAllContextBounds(t *testing.T) {
	const limit = 8 << 20
	dir := t.TempDir()
	exact := filepath.Join(dir, "exact")
	want := bytes.Repeat([]byte("x"), limit)
	if err := os.WriteFile(exact, want, 0o644); err != nil {
		t.Fatal(err)
	}
	over := filepath.Join(dir, "over")
	if err := os.WriteFile(over, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(over, 1<<30); err != nil {
		t.Fatal(err)
	}
	t.Run("regular file at the limit", func(t *testing.T) {
		got, err := ReadAllContext(context.Background(), exact, limit)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%d bytes, %v; want the %d bytes", len(got), err, limit)
		}
	})
	t.Run("regular file over the limit", func(t *testing.T) {
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		_, err := ReadAllContext(context.Background(), over, limit)
		runtime.ReadMemStats(&b)
		if !errors.Is(err, ErrTooLarge) || err.Error() != over+": 1073741824 bytes, more than the limit of 8388608" {
			t.Fatalf("err = %v", err)
		}
		if n := b.TotalAlloc - a.TotalAlloc; n > 1<<20 {
			t.Errorf("%d bytes allocated refusing a file by its size", n)
		}
	})
	t.Run("endless FIFO", func(t *testing.T) {
		e := fifotest.NewEndless(t, "", "endless", "x\n", limit+4<<20)
		done := make(chan error, 1)
		go func() { _, err := ReadAllContext(context.Background(), e.Path, limit); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrTooLarge) || err.Error() != e.Path+": more than the limit of 8388608 bytes" {
				t.Fatalf("err = %v", err)
			}
		case <-e.Exceeded:
			t.Fatalf("read more than %d bytes of an endless FIFO with a limit of %d", e.Bound, limit)
		}
	})
	for _, tc := range []struct {
		name string
		path func(t *testing.T) string
	}{
		{"FIFO with no writer", func(t *testing.T) string { return fifotest.NoWriter(t, "", "nowriter") }},
		{"FIFO with a silent writer", func(t *testing.T) string { return fifotest.Silent(t, "", "silent") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.path(t)
			err := fifotest.Within(t, 100*time.Millisecond, 10*time.Second, func(ctx context.Context) error {
				_, err := ReadAllContext(ctx, p, limit)
				return err
			})
			if !errors.Is(err, context.Canceled) || !bytes.Contains([]byte(err.Error()), []byte(p)) {
				t.Fatalf("err = %v; want context.Canceled naming %s", err, p)
			}
		})
	}
}
