package ci

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// ReadReports fills the sizes, drift and repair sections from the Markdown
// reports of those steps (a path "" adds nothing). A missing sizes or
// drift report counts as that step failed; a missing repair report is only
// said.
func (o *SummaryOptions) ReadReports(sizes, drift, repair string) error {
	for _, r := range []struct {
		path, what string
		text       *string
		failed     *bool
	}{
		{drift, "drift", &o.Drift, &o.DriftFailed},
		{repair, "repair", &o.Repair, nil},
		{sizes, "sizes", &o.Sizes, &o.SizesFailed},
	} {
		if r.path == "" {
			continue
		}
		b, err := os.ReadFile(r.path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if r.failed != nil {
				*r.failed = true
			}
			*r.text = fmt.Sprintf("(no %s report: %s is missing)", r.what, r.path)
		case err != nil:
			return fmt.Errorf("reading %s report: %w", r.what, err)
		default:
			*r.text = string(b)
		}
	}
	return nil
}

// AppendSummary writes the job summary (WriteSummary) to w, or, when path
// is set, appends it to that file (as to $GITHUB_STEP_SUMMARY). The error
// is RunErr's when the summary was written.
func AppendSummary(path string, w io.Writer, r MergeReport, o SummaryOptions) error {
	var buf bytes.Buffer
	if err := WriteSummary(&buf, r, o); err != nil {
		return err
	}
	if path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("opening summary output: %w", err)
		}
		defer f.Close()
		w = f
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("writing summary: %w", err)
	}
	return nil
}

// RunErr is the error of a run that must fail (RunFailed), nil otherwise.
func (o SummaryOptions) RunErr(r MergeReport) error {
	if !o.RunFailed(r) {
		return nil
	}
	return fmt.Errorf("run failed: %d regressed, %d failed, sizes failed: %v, drift failed: %v", r.Counts.Regressed, r.Counts.Failed, o.SizesFailed, o.DriftFailed)
}
