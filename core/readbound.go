package core

import (
	"bytes"
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
	return n, doneOr(c.ctx, err)
}

// doneOr is err, or ctx's error when err is one and ctx is done (a read
// cut short by it: an OpenContext file is closed then).
func doneOr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
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
	f, err := OpenContext(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("reading records: %w", err)
	}
	defer f.Close()
	recs, err := readRecords(f, path, warn)
	if cerr := ctx.Err(); cerr != nil {
		return nil, fmt.Errorf("reading records from %s: %w", path, cerr)
	}
	return recs, err
}

// File is a file opened by OpenContext: it is closed when its context is
// done, which ends a read blocked on a pipe (pipes are read through the
// runtime's poller); Read and Stat then give the context's error (as a
// ctxReader does), not "file already closed". Close it as any file.
type File struct {
	*os.File
	ctx  context.Context
	stop func() bool
}

// Read is os.File's Read through a ctxReader: once the context is done it
// fails with the context's error.
func (f *File) Read(p []byte) (int, error) {
	return ctxReader{ctx: f.ctx, r: f.File}.Read(p)
}

// Stat is os.File's Stat; an error once the context is done is its error.
func (f *File) Stat() (os.FileInfo, error) {
	fi, err := f.File.Stat()
	return fi, doneOr(f.ctx, err)
}

// Close closes the file and forgets its context.
func (f *File) Close() error {
	f.stop()
	return f.File.Close()
}

// OpenContext opens path for reading and gives up when ctx is done: while
// opening a FIFO no process writes to (the error then wraps ctx's and says
// so), and afterwards while reading (the file is closed, so a read blocked
// on a pipe that sends nothing returns).
func OpenContext(ctx context.Context, path string) (*File, error) {
	f, err := openContext(ctx, path)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("opening %s: waiting for a writer: %w", path, err)
		}
		return nil, err
	}
	if cerr := ctx.Err(); cerr != nil {
		// Done already: the AfterFunc below would close f at some moment
		// of the caller's first call, which then fails as "file already
		// closed" instead of with ctx's error.
		_ = f.Close()
		return nil, fmt.Errorf("opening %s: %w", path, cerr)
	}
	return &File{File: f, ctx: ctx, stop: context.AfterFunc(ctx, func() { _ = f.Close() })}, nil
}

// ErrTooLarge is wrapped by ReadAllContext's error for an input over its
// limit.
var ErrTooLarge = errors.New("more than the limit")

// readChunk is how much ReadAllContext reads at a time from an input with
// no size to check first.
const readChunk = 1 << 20

// ReadAllContext reads the file at path whole, at most max bytes, as the
// dataset loader reads a dataset: a regular file longer than max is
// refused by its size before any byte is read, and read into one buffer of
// its size; anything else (a pipe, a FIFO, /dev/zero, a device) is read in
// chunks of 1 MiB kept as they are and joined once (no growing buffer
// copied over and over), and refused as soon as more than max bytes have
// come. It gives up when ctx is done (a SIGTERM): while opening a FIFO no
// process writes to, and between and during reads. Errors name the file.
func ReadAllContext(ctx context.Context, path string, max int64) ([]byte, error) {
	f, err := OpenContext(ctx, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, readErr(ctx, path, err)
	}
	var chunks [][]byte
	var total int64
	if fi.Mode().IsRegular() {
		if fi.Size() > max {
			return nil, fmt.Errorf("%s: %d bytes, %w of %d", path, fi.Size(), ErrTooLarge, max)
		}
		// One spare byte shows whether the file grew since Stat.
		buf := make([]byte, fi.Size()+1)
		n, err := io.ReadFull(f, buf)
		switch {
		case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
			return buf[:n], nil
		case err != nil:
			return nil, readErr(ctx, path, err)
		}
		chunks, total = [][]byte{buf}, int64(n)
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, readErr(ctx, path, err)
		}
		if total > max {
			return nil, fmt.Errorf("%s: %w of %d bytes", path, ErrTooLarge, max)
		}
		buf := make([]byte, min(readChunk, max+1-total))
		n, err := io.ReadFull(f, buf)
		if n > 0 {
			chunks = append(chunks, buf[:n])
			total += int64(n)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			if total > max {
				return nil, fmt.Errorf("%s: %w of %d bytes", path, ErrTooLarge, max)
			}
			break
		}
		if err != nil {
			return nil, readErr(ctx, path, err)
		}
	}
	if len(chunks) == 1 {
		return chunks[0], nil
	}
	return bytes.Join(chunks, nil), nil
}

// readErr is a read of path that failed: ctx's error when ctx is done (the
// file closed under the read), else err.
func readErr(ctx context.Context, path string, err error) error {
	return fmt.Errorf("reading %s: %w", path, doneOr(ctx, err))
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
