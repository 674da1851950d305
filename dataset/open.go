package dataset

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/dataset/hub"
)

// Source says where a dataset's records were read from. The pipeline
// records its String form with every image (core.Image.Dataset), so that
// what was published names the exact dataset revision it was built from.
type Source struct {
	// Name is the file path as given, or the hub dataset's owner/name.
	Name string
	// Revision and Split are set for a hub dataset: the commit its files
	// were read at, and the split.
	Revision string
	Split    string
	// Files are the files read, as named in record sources (a path, or
	// hf://datasets/NAME@COMMIT/PATH).
	Files []string
}

// String is the file path, or NAME@COMMIT:SPLIT for a hub dataset (which
// --dataset accepts back, to read the same revision again).
func (s Source) String() string {
	if s.Revision == "" {
		return s.Name
	}
	return s.Name + "@" + s.Revision + ":" + s.Split
}

// FromHub reports whether the records came from a hub dataset.
func (s Source) FromHub() bool { return s.Revision != "" }

// OpenOptions configures Open.
type OpenOptions struct {
	LoadOptions
	// Hub downloads hub datasets. When nil, a hub name is an error
	// wrapping ErrHubDataset.
	Hub *hub.Client
}

// Open reads the dataset arg names: a file (JSONL, JSON array, parquet; see
// Load), or, when no such file exists and arg is a hub name
// NAME[@REVISION][:SPLIT] (see hub.ParseRef), that split of the hub dataset,
// downloaded through opts.Hub and its cache. A name ending in .jsonl, .json
// or .parquet is always a file.
//
// Records, problems and errors are as Load's, over all the split's files:
// each record's Source names its file (hf://datasets/NAME@COMMIT/PATH:line),
// and an id is checked for image-name collisions across the files too.
func Open(ctx context.Context, arg string, opts OpenOptions) ([]core.Instance, Source, error) {
	src := Source{Name: arg, Files: []string{arg}}
	if _, err := os.Stat(arg); err == nil || !errors.Is(err, fs.ErrNotExist) || isFileName(arg) {
		insts, err := Load(ctx, arg, opts.LoadOptions)
		return insts, src, err
	}
	ref, perr := hub.ParseRef(arg)
	if perr != nil {
		if strings.Contains(arg, "/") || hubName().MatchString(arg) {
			return nil, src, fmt.Errorf("dataset %q: no such file, and not a hub dataset name: %w", arg, perr)
		}
		insts, err := Load(ctx, arg, opts.LoadOptions)
		return insts, src, err
	}
	if opts.Hub == nil {
		return nil, src, fmt.Errorf("dataset %q: no such file, and it looks like a HuggingFace dataset name: %w", arg, ErrHubDataset)
	}
	snap, err := opts.Hub.Fetch(ctx, ref)
	if err != nil {
		return nil, src, err
	}
	src = Source{Name: snap.Name, Revision: snap.Revision, Split: snap.Split}
	var all []core.Instance
	var problems []Problem
	for _, f := range snap.Files {
		display := snap.URI(f)
		src.Files = append(src.Files, display)
		insts, err := loadOne(ctx, f.Local, display, opts.LoadOptions)
		var verr *ValidationError
		if err != nil && !errors.As(err, &verr) {
			return nil, src, err
		}
		if verr != nil {
			problems = append(problems, verr.Problems...)
		}
		all = append(all, insts...)
	}
	var err2 error
	if len(problems) > 0 {
		err2 = &ValidationError{File: src.String(), Problems: problems}
	}
	all, err2 = checkNames(src.String(), all, err2)
	return all, src, err2
}

// isFileName reports whether arg names a file by its extension, never a hub
// dataset.
func isFileName(arg string) bool {
	lower := strings.ToLower(arg)
	for _, ext := range []string{".jsonl", ".json", ".parquet"} {
		if strings.HasSuffix(lower, ext) {
			return true
		}
	}
	return false
}
