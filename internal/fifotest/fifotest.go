// Package fifotest makes the inputs that never end or never start for
// tests of bounded readers: FIFOs with no writer (opening blocks), with a
// writer that sends nothing (reading blocks) and with one that writes for
// ever, counting what it wrote so a test bounds it in bytes, not time.
package fifotest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// newFIFO returns a new FIFO named name in a temp dir (skips the test when
// the system has none).
func newFIFO(tb testing.TB, dir, name string) string {
	tb.Helper()
	if dir == "" {
		dir = tb.TempDir()
	}
	p := filepath.Join(dir, name)
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		tb.Skipf("mkfifo: %v", err)
	}
	return p
}

// NoWriter returns a FIFO no process writes to: opening it for reading
// blocks. Its directory is dir (a temp dir when empty).
func NoWriter(tb testing.TB, dir, name string) string {
	tb.Helper()
	return newFIFO(tb, dir, name)
}

// Silent returns a FIFO whose writer opens it and sends nothing until the
// test ends: opening succeeds, reading blocks.
func Silent(tb testing.TB, dir, name string) string {
	tb.Helper()
	p := newFIFO(tb, dir, name)
	done := make(chan struct{})
	tb.Cleanup(func() { close(done) })
	go func() {
		// O_RDWR: the open does not wait for a reader, so the writer is
		// there before the test reads.
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			return
		}
		<-done
		f.Close()
	}()
	return p
}

// Endless is a FIFO a writer fills with a line for ever, until the test
// ends or Bound bytes have been written (then Exceeded is closed).
type Endless struct {
	Path     string
	Bound    int64
	Exceeded chan struct{}
	written  atomic.Int64
}

// Written is how many bytes the writer has written.
func (e *Endless) Written() int64 { return e.written.Load() }

// NewEndless starts the writer of an endless FIFO.
func NewEndless(tb testing.TB, dir, name, line string, bound int64) *Endless {
	tb.Helper()
	e := &Endless{Path: newFIFO(tb, dir, name), Bound: bound, Exceeded: make(chan struct{})}
	done := make(chan struct{})
	tb.Cleanup(func() { close(done) })
	go func() {
		f, err := os.OpenFile(e.Path, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer f.Close()
		go func() { <-done; f.Close() }()
		buf := []byte(strings.Repeat(line, 64<<10/len(line)+1))
		for e.written.Load() <= bound {
			n, err := f.Write(buf)
			e.written.Add(int64(n))
			if err != nil {
				return
			}
		}
		close(e.Exceeded)
	}()
	return e
}

// Within runs f with a context cancelled after cancelAfter and fails the
// test when f has not returned by the deadline (a reader that ignores its
// context would block for ever). It returns f's error.
func Within(tb testing.TB, cancelAfter, deadline time.Duration, f func(ctx context.Context) error) error {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(cancelAfter, cancel)
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(deadline):
		tb.Fatalf("still reading %v after the context was cancelled", deadline-cancelAfter)
		return nil
	}
}
