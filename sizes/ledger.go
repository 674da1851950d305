package sizes

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/swebuild/swebuild/core"
)

// LoadImageFile reads the images of a record file written by the pipeline
// (JSON lines of core.Image: a build metadata file or a publish ledger): the
// last record of each instance image wins; built or published images are
// measured at their digest-pinned ref, failed ones are reported missing
// (with the record's error), built images that were never pushed (no ref)
// are errors. Errors name the file, line and field.
//
// A publish ledger in the older format (before publish wrote core records)
// is converted by core.ConvertLegacyLedger. The file is read with the
// limits of every record file before any conversion (at most
// core.MaxFileBytes; core.ReadAllContext), and reading stops when ctx is
// done.
func LoadImageFile(ctx context.Context, path string) ([]Target, error) {
	data, err := core.ReadAllContext(ctx, path, core.MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("reading image file: %w", err)
	}
	if core.IsLegacyLedger(data) {
		recs, err := core.ConvertLegacyLedger(data, path)
		if err != nil {
			return nil, err
		}
		return targetsFromRecords(path, recs)
	}
	recs, err := core.DecodeRecords(bytes.NewReader(data), path, nil) // a torn last line is dropped
	if err != nil {
		return nil, err
	}
	return targetsFromRecords(path, recs)
}

func targetsFromRecords(path string, recs []core.Image) ([]Target, error) {
	var out []Target
	for _, rec := range core.Latest(recs) {
		if rec.Kind != core.KindInstance {
			continue
		}
		t := Target{Instance: rec.InstanceID, Repo: RepoFromID(rec.InstanceID), Platform: rec.Platform, Ref: rec.Ref}
		switch {
		case rec.Status == core.StatusFailed:
			t.Ref = ""
			t.Missing = "failed according to " + path + ": " + rec.Error
		case rec.Ref == "":
			t.Err = fmt.Sprintf("%s: %s %s: no ref, not in a registry", path, rec.InstanceID, rec.Platform)
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no instance images", path)
	}
	sortTargets(out)
	return out, nil
}

// pinRef replaces the tag or digest of ref by digest:
// "h:5000/r/x:k-1" + "sha256:ab" -> "h:5000/r/x@sha256:ab".
func pinRef(ref, digest string) string {
	repo := ref
	if i := strings.Index(repo, "@"); i >= 0 {
		repo = repo[:i]
	}
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	return repo + "@" + digest
}
