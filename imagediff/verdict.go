package imagediff

import (
	"context"
	"fmt"
	"io"
)

// Diff opens images a and b and compares them (Open, Compare); an error
// opening one names it (A or B).
func Diff(ctx context.Context, a, b Source) (*Report, error) {
	ia, err := Open(ctx, a)
	if err != nil {
		return nil, fmt.Errorf("A: %w", err)
	}
	ib, err := Open(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("B: %w", err)
	}
	return Compare(ctx, ia, ib, a.Ref, b.Ref)
}

// Write writes the report as text or, with asJSON, as JSON.
func (r *Report) Write(w io.Writer, asJSON bool) error {
	if asJSON {
		return r.WriteJSON(w)
	}
	return r.WriteText(w)
}

// Err is the error of images that differ (the files, layers and config
// fields that do), nil when identical.
func (r *Report) Err() error {
	if r.Identical {
		return nil
	}
	layers := 0
	for _, l := range r.Layers {
		if !l.Same {
			layers++
		}
	}
	return fmt.Errorf("the images differ: %d file(s) in %d layer(s), %d config field(s)", len(r.Files), layers, len(r.Config))
}
