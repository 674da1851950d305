package core

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

// TestSyncWriter: a command's writers take lines from many goroutines at
// once. A buffer gets every line whole; a terminal (an *os.File) is
// handed on as it is, so BuildKit's display still finds it.
func TestSyncWriter(t *testing.T) {
	if w := SyncWriter(os.Stderr); w != os.Stderr {
		t.Errorf("SyncWriter(os.Stderr) = %T, want os.Stderr itself", w)
	}
	var buf bytes.Buffer
	w := SyncWriter(&buf)
	if again := SyncWriter(w); again != w {
		t.Errorf("SyncWriter of its own writer wraps it again")
	}
	const writers, lines = 8, 500
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			for j := range lines {
				fmt.Fprintf(w, "writer %d line %d\n", i, j)
			}
		})
	}
	wg.Wait()
	got := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(got) != writers*lines {
		t.Fatalf("%d lines, want %d", len(got), writers*lines)
	}
	for _, l := range got {
		var i, j int
		if n, err := fmt.Sscanf(l, "writer %d line %d", &i, &j); n != 2 || err != nil {
			t.Fatalf("line %q is not whole", l)
		}
	}
}
