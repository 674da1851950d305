package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// MaxFileBytes is the most a record file may hold (1 GiB: the ledger of a
// nightly over every SWE-bench split is a few MiB). Reading stops with an
// error wrapping ErrFileTooLarge once more has come: an endless file
// (/dev/zero, a pipe that never closes) is refused in bounded memory instead
// of read for ever.
const MaxFileBytes = 1 << 30

// ErrFileTooLarge is wrapped by the error for a record file over
// MaxFileBytes.
var ErrFileTooLarge = errors.New("record file over the size limit")

// cappedReader fails once more than max bytes have been read.
type cappedReader struct {
	r    io.Reader
	left int64
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, fmt.Errorf("more than %d bytes: %w", MaxFileBytes, ErrFileTooLarge)
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return n, fmt.Errorf("more than %d bytes: %w", MaxFileBytes, ErrFileTooLarge)
	}
	return n, err
}

// ctxReader fails with ctx's error once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(p)
	if err != nil && c.ctx.Err() != nil {
		return n, c.ctx.Err()
	}
	return n, err
}

// ReadFileContext is ReadFile that gives up when ctx is done (a SIGTERM):
// while opening a FIFO no process writes to, and while reading a file
// that never ends or a pipe that sends nothing.
func ReadFileContext(ctx context.Context, path string) ([]Image, error) {
	return ReadRecordsContext(ctx, path, nil)
}

// ReadRecordsContext is ReadRecords that stops when ctx is done (a FIFO
// with no writer, an endless file): see ReadFileContext.
func ReadRecordsContext(ctx context.Context, path string, warn io.Writer) ([]Image, error) {
	f, err := openContext(ctx, path)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("reading records from %s: waiting for a writer: %w", path, err)
		}
		return nil, fmt.Errorf("reading records: %w", err)
	}
	defer f.Close()
	// Closing the file ends a read blocked on a pipe (pipes are read
	// through the runtime's poller).
	stop := context.AfterFunc(ctx, func() { _ = f.Close() })
	defer stop()
	recs, err := readRecords(ctxReader{ctx: ctx, r: f}, path, warn)
	if cerr := ctx.Err(); cerr != nil {
		return nil, fmt.Errorf("reading records from %s: %w", path, cerr)
	}
	return recs, err
}

// openContext opens path for reading. Opening a FIFO blocks until a writer
// opens it; when ctx is done first the open is abandoned (and unblocked by
// opening the FIFO for writing once, which ends it at once).
func openContext(ctx context.Context, path string) (*os.File, error) {
	fi, err := os.Stat(path)
	if err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		return os.Open(path)
	}
	type opened struct {
		f   *os.File
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		f, err := os.Open(path)
		ch <- opened{f, err}
	}()
	select {
	case o := <-ch:
		return o.f, o.err
	case <-ctx.Done():
		if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_ = w.Close()
		}
		go func() {
			if o := <-ch; o.f != nil {
				_ = o.f.Close()
			}
		}()
		return nil, ctx.Err()
	}
}
