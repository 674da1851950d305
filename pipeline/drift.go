package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/drift"
	"github.com/swebuild/swebuild/publication"
)

// DriftOptions are one `swebuild drift`: two publications, each a records
// file (a build metadata file or a publish ledger) or a repository prefix
// whose images the loaded instances enumerate.
type DriftOptions struct {
	// Inputs are the dataset or task repo enumerating a prefix-named side;
	// read only when a side is one, and then required.
	Inputs
	// Images (A) and Against (B).
	Images, Against string
	// Prefix holds the tag and naming of a prefix-named side (its Repo is
	// the side's value).
	Prefix publication.Prefix
	// Reader reads both publications (required).
	Reader *publication.Reader
	// Jobs is how many images are read at once (default 8).
	Jobs int
	// Save, when set, is a directory A's documents are written to (the
	// input of a frozen rebuild).
	Save string
	// Records are the publish ledger of a prefix-named side: they give its
	// images' spec keys and pin rules (drift.AddInputs), so a changed
	// digest gets its cause. A records-file side has its own.
	Records []core.Image
}

// ErrNoInstances is a side named by a repository prefix with neither a
// dataset nor a task repo to enumerate its images.
var ErrNoInstances = errors.New("not a file, so a repository prefix: a dataset or task repo is required to enumerate its images")

// DriftSideError is a failure of one side: "A" (Images) or "B" (Against).
type DriftSideError struct {
	Side, Set string
	Err       error
}

func (e *DriftSideError) Error() string {
	return fmt.Sprintf("publication %s %s: %v", e.Side, e.Set, e.Err)
}
func (e *DriftSideError) Unwrap() error { return e.Err }

// Drift reads the environment documents of both publications through the
// reader and compares them (drift.Compare): per image, matched by kind,
// name and platform. Load problems and per-arch images a prefix lacks are
// logged to Log, not failed on.
func Drift(ctx context.Context, o DriftOptions) (*drift.Report, error) {
	if o.Reader == nil {
		return nil, errors.New("drift: no publication reader")
	}
	d := drifter{o: o, log: writerOr(o.Log)}
	if o.Save != "" {
		if err := os.MkdirAll(o.Save, 0o755); err != nil {
			return nil, fmt.Errorf("the directory to save documents in: %w", err)
		}
	}
	var sides [2][]drift.Image
	for i, s := range []struct{ side, set, save string }{{"A", o.Images, o.Save}, {"B", o.Against, ""}} {
		targets, err := d.targets(ctx, s.set)
		if err == nil {
			f := &drift.Fetcher{Reader: o.Reader, Jobs: o.Jobs, Save: s.save}
			sides[i], err = f.Fetch(ctx, targets)
		}
		if err != nil {
			return nil, &DriftSideError{Side: s.side, Set: s.set, Err: err}
		}
	}
	return drift.Compare(o.Images, sides[0], o.Against, sides[1])
}

type drifter struct {
	o      DriftOptions
	log    io.Writer
	loaded *Loaded
}

// targets are the images of one side: a records file's env and instance
// images, or the per-arch instance images the reader finds under a prefix.
func (d *drifter) targets(ctx context.Context, set string) ([]drift.Target, error) {
	if st, err := os.Stat(set); err == nil && !st.IsDir() {
		recs, err := core.ReadRecords(set, d.log)
		if err != nil {
			return nil, err
		}
		return drift.TargetsFromRecords(set, recs)
	}
	if !d.o.Inputs.Given() {
		return nil, ErrNoInstances
	}
	if d.loaded == nil {
		l, err := Load(ctx, d.o.Inputs)
		if l == nil {
			return nil, err
		}
		if err != nil {
			fmt.Fprintf(d.log, "drift: %v\n", err)
		}
		d.loaded = l
	}
	prefix := d.o.Prefix
	prefix.Repo = set
	insts, err := d.o.Reader.Read(ctx, prefix, d.loaded.Wants(nil))
	if err != nil {
		return nil, err
	}
	out, missing, err := drift.TargetsFromPublication(insts)
	if err != nil {
		return nil, err
	}
	drift.AddInputs(out, d.o.Records)
	if missing > 0 {
		fmt.Fprintf(d.log, "drift: %s: %d per-arch images missing (not compared)\n", set, missing)
	}
	return out, nil
}

// Wants are the loaded instances as a publication holds them: each with
// the platforms the plan decides (PlatformsOf), narrowed to only when it is
// not empty.
func (l *Loaded) Wants(only []core.Platform) []publication.Want {
	decide := l.PlatformsOf()
	out := make([]publication.Want, len(l.Instances))
	for i := range l.Instances {
		w := publication.Want{ID: l.Instances[i].InstanceID}
		for _, p := range decide(&l.Instances[i]) {
			if len(only) == 0 || slices.Contains(only, p) {
				w.Platforms = append(w.Platforms, p)
			}
		}
		out[i] = w
	}
	return out
}
