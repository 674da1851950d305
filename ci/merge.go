package ci

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/swebuild/swebuild/publish"
)

// Instance statuses after a merge.
const (
	// StatusIndexed: every image is verified (built now or reused); the
	// instance's multi-arch index is (re)written.
	StatusIndexed = "indexed"
	// StatusUnchanged: every image was reused; the index already exists.
	StatusUnchanged = "unchanged"
	// StatusRegressed: an image that was verified before failed now.
	StatusRegressed = "regressed"
	// StatusFailed: an image failed that had never been verified.
	StatusFailed = "failed"
)

// Image is one platform image of a merged instance.
type Image struct {
	Platform   string `json:"platform"`
	Source     string `json:"source"` // "built" or "existing"
	Repository string `json:"repository,omitempty"`
	Digest     string `json:"digest,omitempty"`
	Ref        string `json:"ref,omitempty"`
	SpecKey    string `json:"spec_key,omitempty"`
	Verified   bool   `json:"verified"`
	Error      string `json:"error,omitempty"`
	Shard      string `json:"shard,omitempty"`
	Size       int64  `json:"size,omitempty"`
}

// Outcome is the merge decision for one instance.
type Outcome struct {
	InstanceID string  `json:"instance_id"`
	Status     string  `json:"status"`
	Images     []Image `json:"images"`
}

// Index reports whether the instance's index is to be written.
func (o Outcome) Index() bool { return o.Status == StatusIndexed }

// MergeCounts counts outcomes by status.
type MergeCounts struct {
	Instances int `json:"instances"`
	Indexed   int `json:"indexed"`
	Unchanged int `json:"unchanged"`
	Regressed int `json:"regressed"`
	Failed    int `json:"failed"`
}

// MergeReport is what `swebuild ci merge` writes and `ci summary` reads.
type MergeReport struct {
	Platforms []string        `json:"platforms"`
	Counts    MergeCounts     `json:"counts"`
	Shards    []PlatformCount `json:"shards,omitempty"`
	Outcomes  []Outcome       `json:"outcomes"`
	// Unexpected lists results no plan target asked for ("file:line id platform").
	Unexpected []string `json:"unexpected,omitempty"`
}

// Failed reports whether any instance regressed or failed.
func (r MergeReport) Failed() bool { return r.Counts.Regressed+r.Counts.Failed > 0 }

// Merge decides, per planned instance, what to index and what regressed.
// An instance is indexed only when every one of its images is verified; an
// instance with any failed or missing image keeps its previous index (if
// any) and is reported as regressed (some image was verified before) or
// failed. Several records about one image (metadata entry, verify summary)
// are combined (see Combine).
func Merge(plan Plan, results []Result) MergeReport {
	latest := Combine(results)
	planned := map[Key]bool{}
	rep := MergeReport{Platforms: plan.Platforms, Shards: plan.Counts, Outcomes: make([]Outcome, 0, len(plan.Instances))}
	for _, in := range plan.Instances {
		o := Outcome{InstanceID: in.InstanceID}
		built, bad, regressed := 0, 0, false
		for _, t := range in.Targets {
			k := Key{in.InstanceID, t.Platform}
			planned[k] = true
			if t.Action == ActionExisting {
				o.Images = append(o.Images, Image{Platform: t.Platform, Source: "existing", Repository: t.Repository, Digest: t.Digest, SpecKey: t.SpecKey, Verified: true})
				continue
			}
			img := Image{Platform: t.Platform, Source: "built", Shard: t.Shard}
			r, ok := latest[k]
			switch {
			case !ok:
				img.Error = fmt.Sprintf("no result from shard %s", t.Shard)
			default:
				img.Repository, img.Digest, img.Verified, img.Error, img.Size = r.Repository, r.Digest, r.Verified, r.Error, r.Size
				img.Ref, img.SpecKey = r.Ref, r.SpecKey
				if img.Error == "" && !r.Verified {
					img.Error = "gold patch did not verify"
				}
				if img.Error == "" && r.Digest == "" {
					img.Error = "verified but no digest was pushed"
				}
			}
			if img.Error != "" {
				img.Verified = false
				bad++
				regressed = regressed || t.PreviouslyVerified
			} else {
				built++
			}
			o.Images = append(o.Images, img)
		}
		switch {
		case bad > 0 && regressed:
			o.Status = StatusRegressed
			rep.Counts.Regressed++
		case bad > 0:
			o.Status = StatusFailed
			rep.Counts.Failed++
		case built > 0:
			o.Status = StatusIndexed
			rep.Counts.Indexed++
		default:
			o.Status = StatusUnchanged
			rep.Counts.Unchanged++
		}
		rep.Counts.Instances++
		rep.Outcomes = append(rep.Outcomes, o)
	}
	for _, r := range results {
		if !planned[Key{r.InstanceID, r.Platform}] {
			rep.Unexpected = append(rep.Unexpected, fmt.Sprintf("%s %s %s", r.Source, r.InstanceID, r.Platform))
		}
	}
	sort.Strings(rep.Unexpected)
	return rep
}

// IndexImages returns the images of every instance to index, in instance
// order, as records for publishing: one line per (instance, platform).
func (r MergeReport) IndexImages() []Result {
	var out []Result
	for _, o := range r.Outcomes {
		if !o.Index() {
			continue
		}
		for _, img := range o.Images {
			out = append(out, Result{InstanceID: o.InstanceID, Platform: img.Platform, Repository: img.Repository, Digest: img.Digest, Ref: img.Ref, SpecKey: img.SpecKey, Verified: true, Size: img.Size})
		}
	}
	return out
}

// LedgerUpdates returns the records this run adds to the ledger: every image
// built now, verified or not, so the ledger's last word on an image is
// always the latest attempt (a failed image is retried next night).
func (r MergeReport) LedgerUpdates() []Result {
	var out []Result
	for _, o := range r.Outcomes {
		for _, img := range o.Images {
			if img.Source != "built" {
				continue
			}
			out = append(out, Result{InstanceID: o.InstanceID, Platform: img.Platform, Repository: img.Repository, Digest: img.Digest, Ref: img.Ref, SpecKey: img.SpecKey, Verified: img.Verified && img.Error == "", Error: img.Error, Size: img.Size})
		}
	}
	return out
}

// PublishMetadata returns the build metadata file (publish's contract) that
// makes `swebuild publish` write the index of every instance to index: one
// entry per platform image, built now or reused, each pinned by digest.
// Images without a spec key or a pullable reference are errors: publish
// would refuse them.
func (r MergeReport) PublishMetadata() (*publish.Metadata, error) {
	md := &publish.Metadata{Images: []publish.Image{}}
	var errs []string
	for _, img := range r.IndexImages() {
		ref := img.Ref
		if ref == "" || !strings.HasSuffix(ref, "@"+img.Digest) {
			if img.Repository == "" {
				errs = append(errs, fmt.Sprintf("%s %s: no repository to pull %s from", img.InstanceID, img.Platform, img.Digest))
				continue
			}
			ref = img.Repository + "@" + img.Digest
		}
		if img.SpecKey == "" {
			errs = append(errs, fmt.Sprintf("%s %s: no spec_key", img.InstanceID, img.Platform))
			continue
		}
		verified := true
		md.Images = append(md.Images, publish.Image{
			InstanceID: img.InstanceID, Node: publish.NodeInstance, Platform: img.Platform,
			Digest: img.Digest, Ref: ref, SpecKey: img.SpecKey, Verified: &verified,
		})
	}
	if len(errs) > 0 {
		return md, fmt.Errorf("building publish metadata:\n  %s", strings.Join(errs, "\n  "))
	}
	return md, nil
}

// WriteReport writes the merge report as indented JSON.
func WriteReport(path string, r MergeReport) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding merge report: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing merge report: %w", err)
	}
	return nil
}

// ReadReport reads a merge report written by WriteReport.
func ReadReport(path string) (MergeReport, error) {
	var r MergeReport
	b, err := os.ReadFile(path)
	if err != nil {
		return r, fmt.Errorf("reading merge report: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("reading merge report %s: %w", path, err)
	}
	return r, nil
}
