package verify

import (
	"errors"
	"strings"
	"testing"
)

// TestLockRunDir (issue 20 row 13): two verifies in one process given the
// same run directory exclude each other; the second is told which directory
// and why; after the first unlocks, the directory can be taken again.
func TestLockRunDir(t *testing.T) {
	dir := t.TempDir() + "/run"
	unlock, err := LockRunDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = LockRunDir(dir)
	if !errors.Is(err, ErrRunDirInUse) {
		t.Fatalf("second lock of %s: err = %v, want ErrRunDirInUse", dir, err)
	}
	if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "pid ") {
		t.Errorf("error does not name the directory and holder: %v", err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	unlock2, err := LockRunDir(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	if err := unlock2(); err != nil {
		t.Fatal(err)
	}
}
