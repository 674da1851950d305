package core

// Files are replaced atomically one way in swebuild (caches, the metadata
// file, an OCI layout's index, verification records, pulled ledgers):
// readers see the old file or the whole new one, never a part.

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteAtomic replaces path with what write writes: into a temporary file in
// path's directory (which must exist), flushed to disk, given perm, then
// renamed over path. On any failure the temporary file is removed and
// path is left as it was. write's own error is returned as it is; the
// others name path.
func WriteAtomic(path string, perm fs.FileMode, write func(io.Writer) error) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := write(f); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	err = f.Sync()
	if err == nil {
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// WriteBytesAtomic is WriteAtomic of data.
func WriteBytesAtomic(path string, data []byte, perm fs.FileMode) error {
	return WriteAtomic(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}
