package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests"
)

// Source is what a publish run reads: the instance images of an OCI
// layout a build wrote (Layout, a directory) or the records of a build
// metadata file (MetadataFile); one is set.
type Source struct {
	MetadataFile, Layout string
}

// Read returns the records to publish, the default ledger beside the
// source (publish-ledger.jsonl beside the metadata file or the layout
// directory) and the problems of the entries that cannot be published
// (nil when none): the valid records are still returned. err is set when
// nothing can be published.
func (s Source) Read(ctx context.Context, warn io.Writer) (recs []core.Image, ledger string, problems, err error) {
	if s.Layout == "" {
		ledger = filepath.Join(filepath.Dir(s.MetadataFile), "publish-ledger.jsonl")
		recs, problems = core.ReadRecordsContext(ctx, s.MetadataFile, warn)
	} else {
		ledger = filepath.Join(filepath.Dir(filepath.Clean(s.Layout)), "publish-ledger.jsonl")
		var errs []error
		if recs, errs, err = RecordsFromLayout(s.Layout); err != nil {
			return nil, "", nil, err
		}
		problems = errors.Join(errs...)
		if len(recs) == 0 && problems == nil {
			return nil, "", nil, fmt.Errorf("OCI layout %s names no instance image (index.json entries with %s)", s.Layout, manifests.AnnotationInstanceID)
		}
	}
	if len(recs) == 0 && problems != nil {
		return nil, "", nil, problems
	}
	return recs, ledger, problems, nil
}

// ProblemsErr is the error a run ends with when some entries could not
// be published (problems, as Read returned them).
func (s Source) ProblemsErr(problems error) error {
	switch {
	case problems == nil:
		return nil
	case s.Layout != "":
		return errors.New("OCI layout has entries that cannot be published (see above)")
	}
	return errors.New("metadata file has invalid records (see above)")
}
