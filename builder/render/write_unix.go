//go:build unix

package render

import (
	"fmt"
	"syscall"
	"unsafe"
)

// writeFile writes data to path with open/write/close only: os.OpenFile on
// a regular file also tries to register it with the poller (extra fcntl
// calls), which is a third of the syscalls when writing thousands of small
// files.
func writeFile(path, data string) error {
	fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_TRUNC|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	b := unsafe.Slice(unsafe.StringData(data), len(data))
	for len(b) > 0 {
		n, werr := syscall.Write(fd, b)
		if werr == syscall.EINTR {
			continue
		}
		if werr != nil {
			syscall.Close(fd)
			return fmt.Errorf("writing %s: %w", path, werr)
		}
		b = b[n:]
	}
	if err := syscall.Close(fd); err != nil {
		return fmt.Errorf("closing %s: %w", path, err)
	}
	return nil
}
