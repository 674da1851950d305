//go:build linux

package dataset

import (
	"syscall"
	"unsafe"
)

// adviseHuge marks the whole pages inside b as MADV_HUGEPAGE (readFile's
// buffer for a file of hugeMin bytes or more), so filling it takes a few
// 2 MiB page faults instead of one fault per 4 KiB page (on a VM each fault
// costs tens of microseconds; Verified is 2,400 pages). Errors are ignored:
// the kernel may lack THP or refuse, and the read works anyway.
//
// Measured 2026-12-01 (2 vCPUs, THP "madvise", load average 1.5-1.8, 21
// interleaved rounds, `go run ./internal/benchtools/plainbench`), median
// wall: `swebuild plan` over Verified 0.273 s without the advice -> 0.224 s
// with it (x1.22), over Multilingual 0.163 -> 0.144 s (x1.14), `swebuild
// render --arch all --pins none` over Verified 0.253 -> 0.199 s (x1.30).
// io.ReadAll(io.LimitReader(f, max+1)) for every file, growing its buffer,
// costs more still: plan Verified 0.381 s (x1.64), render Verified 0.391 s
// (x1.97).
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
