package builder

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/swebuild/swebuild/builder/graph"
)

// contextFingerprint hashes, for every node of chain and each of its context
// files in name order, the name and, for the file and everything under it
// (symlinks resolved at the top, as contextState does), the relative path,
// mode, size and modification time. That is what BuildKit's own local
// transfer compares to decide which files changed.
func contextFingerprint(chain []*graph.Node) (string, error) {
	h := sha256.New()
	for _, n := range chain {
		names := slices.Sorted(maps.Keys(n.ContextFiles))
		for _, name := range names {
			root, err := filepath.EvalSymlinks(n.ContextFiles[name])
			if err != nil {
				return "", fmt.Errorf("fingerprinting context file %s of %s: %w", name, n.ID(), err)
			}
			fmt.Fprintf(h, "node %s\x00file %s\x00", n.ID(), name)
			if err := walkTree(h, root); err != nil {
				return "", fmt.Errorf("fingerprinting context file %s of %s: %w", name, n.ID(), err)
			}
		}
		if n.ContextDir != "" {
			fmt.Fprintf(h, "node %s\x00dir\x00", n.ID())
			if err := walkTree(h, n.ContextDir); err != nil {
				return "", fmt.Errorf("fingerprinting context directory of %s: %w", n.ID(), err)
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// fingerprintTree is the hash of walkTree over root.
func fingerprintTree(root string) (string, error) {
	h := sha256.New()
	if err := walkTree(h, root); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// walkTree writes to h, for root and everything under it, the relative
// path, mode, size, modification time and symlink target.
func walkTree(h io.Writer, root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%o\x00%d\x00%d\x00", filepath.ToSlash(rel), fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "-> %s\x00", target)
		}
		return nil
	})
}
