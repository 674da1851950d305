package dataset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/swebuild/swebuild/core"
)

// hugeMin is the size from which readFile reads a regular file into one
// buffer of its size, advised as huge pages (adviseHuge).
const hugeMin = 4 << 20

// readFile is os.ReadFile for a dataset, refusing more than max bytes (an
// error wrapping ErrTooLarge): a regular file by its size, before reading;
// anything else (a pipe, /dev/zero) once max bytes have come. A large file
// is read into one buffer of its size, first advised as huge pages
// (adviseHuge, where the system has them).
func readFile(ctx context.Context, path string, max int64) ([]byte, error) {
	// Opening a FIFO no process writes to blocks, and so does reading one
	// that sends nothing: both give up when ctx is done (a SIGTERM).
	f, err := core.OpenContext(ctx, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	if fi.Mode().IsRegular() && size > max {
		return nil, tooLarge(size, max)
	}
	if !fi.Mode().IsRegular() || size < hugeMin || int64(int(size)) != size {
		return readAtMost(ctx, f, max, true)
	}
	// One spare byte shows whether the file grew since Stat.
	buf := make([]byte, size+1)
	adviseHuge(buf)
	n, err := io.ReadFull(f, buf)
	switch err {
	case io.ErrUnexpectedEOF, io.EOF:
		return buf[:n], nil // the file is (now) no longer than size
	case nil:
		if int64(len(buf)) > max {
			return nil, tooLarge(int64(len(buf)), max)
		}
		rest, err := readAtMost(ctx, f, max-int64(len(buf)), false)
		if err != nil {
			return nil, err
		}
		return append(buf, rest...), nil
	default:
		return nil, err
	}
}

// readChunk is how much readAtMost reads at a time.
const readChunk = 1 << 20

// readAtMost reads r, a file with no size to check first (a pipe, a FIFO,
// /dev/zero), to the end, failing with an error wrapping ErrTooLarge as
// soon as more than max bytes have come. It reads in chunks of 1 MiB kept
// as they are (no growing buffer copied over and over: io.ReadAll allocated
// about 4 times the limit), joins them once at the end, and stops between
// chunks when ctx is done. When the first chunk already shows that the
// input is no dataset (its first byte after spaces is not '{', '[' or the
// start of parquet's "PAR1"), reading stops there and that chunk is
// returned, for the decoder to report where the input went wrong (only
// when r is at the start of the file: start).
func readAtMost(ctx context.Context, r io.Reader, max int64, start bool) ([]byte, error) {
	var chunks [][]byte
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		buf := make([]byte, min(readChunk, max+1-total))
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			chunks = append(chunks, buf[:n])
			total += int64(n)
		}
		if start && len(chunks) == 1 && n > 0 && notADataset(buf[:n]) {
			return buf[:n], nil
		}
		if total > max {
			return nil, fmt.Errorf("more than %d bytes: %w of %s a file", max, ErrTooLarge, sizeString(max))
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, cerr // the file was closed under a blocked read
			}
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(chunks) == 1 {
		return chunks[0], nil
	}
	return bytes.Join(chunks, nil), nil
}

// notADataset reports whether the start of an input rules out every format
// decode reads; all spaces (or a byte order mark) decides nothing.
func notADataset(b []byte) bool {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return false
	}
	switch b[0] {
	case '{', '[':
		return false
	case 'P':
		return !bytes.HasPrefix([]byte("PAR1"), b[:min(len(b), 4)])
	}
	return true
}

func tooLarge(size, max int64) error {
	return fmt.Errorf("%d bytes: %w of %s a file", size, ErrTooLarge, sizeString(max))
}
