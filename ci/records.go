package ci

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/swebuild/swebuild/core"
)

// Key names one image: an instance on a platform.
type Key struct {
	InstanceID string
	Platform   core.Platform
}

// KeyOf is the key of an instance record.
func KeyOf(r core.Image) Key { return Key{r.InstanceID, r.Platform} }

// Usable reports whether an instance record can go into an index: built or
// published without error, with a digest, and verified.
func Usable(r core.Image) bool { return r.OK() && r.IsVerified() && r.Digest != "" }

// Repository is the repository part of a record's digest-pinned ref.
func Repository(r core.Image) string {
	repo, _, _ := strings.Cut(r.Ref, "@")
	return repo
}

// ReadRecords reads image records (core.Image JSON lines) from files and
// directories: a directory contributes every *.jsonl file below it, in name
// order (shards write their build metadata as meta/<id>.jsonl). Every file
// is read (core.ReadRecords: a torn last line is dropped with a warning to
// warn), so all bad lines are reported together (file:line: field:
// message); the good records are returned with the error.
func ReadRecords(paths []string, warn io.Writer) ([]core.Image, error) {
	files, err := expandPaths(paths)
	if err != nil {
		return nil, err
	}
	var out []core.Image
	var errs []error
	for _, f := range files {
		recs, err := core.ReadRecords(f, warn)
		out = append(out, recs...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("reading records:\n%w", err)
	}
	return out, nil
}

func expandPaths(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("reading records: %w", err)
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		var found []string
		err = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(path, ".jsonl") {
				found = append(found, path)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", p, err)
		}
		sort.Strings(found)
		files = append(files, found...)
	}
	return files, nil
}

// Latest keeps the last instance record per (instance, platform), the way a
// ledger appended run after run is read; other kinds are left out.
func Latest(recs []core.Image) map[Key]core.Image {
	out := make(map[Key]core.Image, len(recs))
	for _, r := range recs {
		if r.Kind == core.KindInstance {
			out[KeyOf(r)] = r
		}
	}
	return out
}

// ReadLedger reads a publish ledger as core.ReadRecords does (a torn last
// line, what a killed publish leaves, is dropped with a warning to warn); a
// missing file is an empty ledger.
//
// A ledger written before publish wrote core records is converted by
// core's converter (a nightly reads the ledger before publish opens,
// and so migrates, it). The file is read with the limits of every record
// file before any conversion (core.ReadAllContext: at most
// core.MaxFileBytes, a regular file refused by its size before a byte is
// read), and reading stops when ctx is done.
func ReadLedger(ctx context.Context, path string, warn io.Writer) ([]core.Image, error) {
	data, err := core.ReadAllContext(ctx, path, core.MaxFileBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading ledger: %w", err)
	}
	if core.IsLegacyLedger(data) {
		return core.ConvertLegacyLedger(data, path)
	}
	return core.DecodeRecords(bytes.NewReader(data), path, warn)
}
