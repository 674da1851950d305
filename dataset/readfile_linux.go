//go:build linux

package dataset

import (
	"context"
	"io"

	"github.com/swebuild/swebuild/core"
	"syscall"
	"unsafe"
)

// hugeMin is the size from which readFile asks for transparent huge pages.
const hugeMin = 4 << 20

// readFile is os.ReadFile for a dataset, refusing more than max bytes (an
// error wrapping ErrTooLarge): a regular file by its size, before reading;
// anything else (a pipe, /dev/zero) once max bytes have come. A large file
// is read into a buffer first advised as MADV_HUGEPAGE, so filling it takes
// a few 2 MiB page faults instead of one fault per 4 KiB page (on a VM each
// fault costs tens of microseconds; Verified is 2,400 pages). The advice is
// only a hint; without THP the read works as before.
//
// Measured 2026-12-01 (2 vCPUs, THP "madvise", load average 1.5-1.8, 21
// interleaved rounds, `go run ./internal/benchtools/plainbench`), median
// wall: `swebuild plan` over Verified 0.273 s without the advice -> 0.224 s
// with it (x1.22), over Multilingual 0.163 -> 0.144 s (x1.14), `swebuild
// render --arch all --pins none` over Verified 0.253 -> 0.199 s (x1.30).
// io.ReadAll(io.LimitReader(f, max+1)) for every file, growing its buffer,
// costs more still: plan Verified 0.381 s (x1.64), render Verified 0.391 s
// (x1.97).
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
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr // f was closed when ctx was done
		}
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
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr // f was closed when ctx was done
		}
		return nil, err
	}
}

// adviseHuge marks the whole pages inside b as MADV_HUGEPAGE. Errors are
// ignored: the kernel may lack THP or refuse, and the read works anyway.
func adviseHuge(b []byte) {
	const page = 4096
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	end := start + uintptr(len(b))
	alignedStart := (start + page - 1) &^ (page - 1)
	alignedEnd := end &^ (page - 1)
	if alignedEnd <= alignedStart {
		return
	}
	region := b[alignedStart-start : alignedEnd-start]
	_ = syscall.Madvise(region, syscall.MADV_HUGEPAGE)
}
