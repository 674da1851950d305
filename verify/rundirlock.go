package verify

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFileName is the file in a run directory that a verify holds locked
// for as long as it writes there.
const LockFileName = ".verify.lock"

// ErrRunDirInUse is returned (wrapped) by LockRunDir when another verify,
// in this process or another, holds the run directory.
var ErrRunDirInUse = errors.New("run directory in use by another verify")

// LockRunDir creates dir if needed and takes an exclusive lock on it (an
// flock on dir/.verify.lock, released by the returned function or when the
// process ends). Two verifies given one run directory would overwrite each
// other's summary and report files: the second is refused with an error
// naming the directory and, where known, the process holding it. The lock
// is per open file, so two runs in one process exclude each other too.
func LockRunDir(dir string) (unlock func() error, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating run directory: %w", err)
	}
	path := filepath.Join(dir, LockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking run directory %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := ""
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				holder = fmt.Sprintf(" (pid %d)", pid)
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("--run-dir %s: %w%s; give each verify a run directory of its own (or none: a new one is made)", dir, ErrRunDirInUse, holder)
		}
		return nil, fmt.Errorf("locking run directory %s: %w", dir, err)
	}
	// Who holds it, for the next one's error; the lock, not this text, is
	// what excludes.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() error {
		// Closing the file releases the flock.
		if err := f.Close(); err != nil {
			return fmt.Errorf("unlocking run directory %s: %w", dir, err)
		}
		return nil
	}, nil
}
