package core

import (
	"io"
	"os"
	"sync"
)

// SyncWriter is w, safe for many goroutines writing at once (a command's
// workers, its downloads' progress lines): an *os.File already is, and is
// returned as it is, so a terminal is still found behind it (BuildKit's
// display); anything else (a test's buffer) is written under a lock, and
// a writer SyncWriter returned is not wrapped again.
func SyncWriter(w io.Writer) io.Writer {
	switch w.(type) {
	case *os.File, *lockedWriter:
		return w
	}
	return &lockedWriter{w: w}
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
