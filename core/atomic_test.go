package core

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	if err := WriteBytesAtomic(path, []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "one\n" {
		t.Fatalf("after the first write: %q, %v", b, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, %v", fi.Mode(), err)
	}
	// A writer that fails half way leaves the old file and no temporary
	// file; its error is returned as it is.
	boom := errors.New("boom")
	err := WriteAtomic(path, 0o600, func(w io.Writer) error {
		io.WriteString(w, "tw")
		return boom
	})
	if err != boom {
		t.Errorf("failed write: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "one\n" {
		t.Errorf("after a failed write: %q", b)
	}
	if err := WriteBytesAtomic(path, []byte("two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v", fi.Mode(), err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 1 || ents[0].Name() != "f.json" {
		t.Errorf("directory holds %v (%v), want only f.json", ents, err)
	}
	// A missing directory is an error naming the file.
	missing := filepath.Join(dir, "no", "f.json")
	if err := WriteBytesAtomic(missing, nil, 0o644); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing directory: %v", err)
	}
}
