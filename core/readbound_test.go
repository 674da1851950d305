package core

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// finishes runs f and fails the test when it has not returned within d.
func finishes[T any](t *testing.T, d time.Duration, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- f() }()
	select {
	case v := <-done:
		return v
	case <-time.After(d):
		t.Fatalf("still reading after %v", d)
		panic("unreachable")
	}
}

type readResult struct {
	recs []Image
	err  error
}

// An endless file (/dev/zero: no newline, ever) is refused once
// MaxFileBytes have been read, in bounded memory, instead of being skipped
// as one long line for ever (issue 20 row 8: publish spun at 100% CPU).
func TestEndlessRecordFileIsRefusedAtTheLimit(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	r := finishes(t, 30*time.Second, func() readResult {
		recs, err := ReadFile("/dev/zero")
		return readResult{recs, err}
	})
	if !errors.Is(r.err, ErrFileTooLarge) || len(r.recs) != 0 {
		t.Fatalf("ReadFile(/dev/zero) = %d records, %v; want ErrFileTooLarge", len(r.recs), r.err)
	}
}

// ReadFileContext gives up as soon as its context is done: on an endless
// file, and on a FIFO that no process writes to (whose open blocks).
func TestReadFileContextHonoursCancellation(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	writerFifo := filepath.Join(t.TempDir(), "fifo2")
	if err := syscall.Mkfifo(writerFifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// A writer that opens and never writes: the open succeeds, the read
	// blocks.
	go func() {
		f, err := os.OpenFile(writerFifo, os.O_WRONLY, 0)
		if err == nil {
			time.Sleep(30 * time.Second)
			f.Close()
		}
	}()
	for _, path := range []string{"/dev/zero", fifo, writerFifo} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			if path == "/dev/zero" {
				cancel() // it ends by itself at MaxFileBytes in well under a second
			}
			time.AfterFunc(200*time.Millisecond, cancel)
			start := time.Now()
			r := finishes(t, 5*time.Second, func() readResult {
				recs, err := ReadFileContext(ctx, path)
				return readResult{recs, err}
			})
			if !errors.Is(r.err, context.Canceled) {
				t.Errorf("err = %v, want context.Canceled", r.err)
			}
			if el := time.Since(start); el > 2*time.Second {
				t.Errorf("returned %v after the cancel", el-200*time.Millisecond)
			}
		})
	}
}

// A FIFO with a writer is read as any file.
func TestReadFileContextReadsAFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	line, err := Marshal(built("a__a-1", AMD64))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		f.Write(line)
		f.Close()
	}()
	r := finishes(t, 5*time.Second, func() readResult {
		recs, err := ReadFileContext(context.Background(), fifo)
		return readResult{recs, err}
	})
	if r.err != nil || len(r.recs) != 1 || r.recs[0].InstanceID != "a__a-1" {
		t.Fatalf("got %v, %v", r.recs, r.err)
	}
}
