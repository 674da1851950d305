package ci

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/core"
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

// Image is one platform image of a merged instance: its record (the
// shard's, or for a reused image one made from the plan) and where it came
// from. An image that cannot go into the index has status failed and says
// why in its error.
type Image struct {
	core.Image
	Source string `json:"source"` // "built" or "existing"
	Shard  string `json:"shard,omitempty"`
}

// Outcome is the merge decision for one instance.
type Outcome struct {
	InstanceID string  `json:"instance_id"`
	Status     string  `json:"status"`
	Images     []Image `json:"images"`
	// Flaky: an image's gold patch resolved in some of its runs only
	// (core.Image.Flaky): indexed, labelled flaky, not verified.
	Flaky bool `json:"flaky,omitempty"`
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
	// Flaky counts the indexed instances with a flaky gold image.
	Flaky int `json:"flaky,omitempty"`
}

// MergeReport is what `swebuild ci merge` writes and `ci summary` reads.
type MergeReport struct {
	Platforms []core.Platform `json:"platforms"`
	Counts    MergeCounts     `json:"counts"`
	Shards    []PlatformCount `json:"shards,omitempty"`
	Outcomes  []Outcome       `json:"outcomes"`
	// Unexpected lists results no plan target asked for ("file:line id platform").
	Unexpected []string `json:"unexpected,omitempty"`
	// BuiltInShards lists the base and env images an instance shard built
	// itself rather than starting from the env stage's digests ("kind key
	// platform"); empty when every shard reused them.
	BuiltInShards []string `json:"built_in_shards,omitempty"`
}

// Failed reports whether any instance regressed or failed.
func (r MergeReport) Failed() bool { return r.Counts.Regressed+r.Counts.Failed > 0 }

// Merge decides, per planned instance, what to index and what regressed.
// An instance is indexed only when every one of its images is usable
// (built, pushed and verified); an instance with any failed or missing image
// keeps its previous index (if any) and is reported as regressed (some image
// was verified before) or failed. When several records name one image (a
// shard re-run), the last one wins.
func Merge(plan Plan, results []core.Image) MergeReport {
	latest := Latest(results)
	planned := map[Key]bool{}
	rep := MergeReport{Platforms: plan.Platforms, Shards: plan.Counts, Outcomes: make([]Outcome, 0, len(plan.Instances))}
	for _, in := range plan.Instances {
		for _, t := range in.Targets {
			planned[Key{in.InstanceID, t.Platform}] = true
		}
		o := mergeOutcome(in, latest)
		rep.Counts.add(o)
		rep.Outcomes = append(rep.Outcomes, o)
	}
	for _, r := range results {
		if r.Kind == core.KindInstance && !planned[KeyOf(r)] {
			rep.Unexpected = append(rep.Unexpected, fmt.Sprintf("%s %s", r.InstanceID, r.Platform))
		}
	}
	sort.Strings(rep.Unexpected)
	for _, r := range results {
		if (r.Kind == core.KindBase || r.Kind == core.KindEnv) && r.Status == core.StatusBuilt {
			rep.BuiltInShards = append(rep.BuiltInShards, fmt.Sprintf("%s %s %s", r.Kind, r.Key, r.Platform))
		}
	}
	sort.Strings(rep.BuiltInShards)
	return rep
}

// mergeOutcome is what became of a planned instance, from the latest results of
// its targets: regressed (a target verified before is not usable now),
// failed, indexed (something was built) or unchanged.
func mergeOutcome(in PlanInstance, latest map[Key]core.Image) Outcome {
	o := Outcome{InstanceID: in.InstanceID}
	built, bad, regressed := 0, 0, false
	for _, t := range in.Targets {
		if t.Action == ActionExisting {
			o.Images = append(o.Images, Image{Source: "existing", Image: core.Image{
				Kind: core.KindInstance, InstanceID: in.InstanceID, Platform: t.Platform,
				Digest: digest.Digest(t.Digest), Ref: t.Repository + "@" + t.Digest, SpecKey: t.SpecKey,
				Verified: core.Bool(true), Status: core.StatusPublished,
			}})
			continue
		}
		img := builtImage(in.InstanceID, t, latest)
		switch {
		case img.OK() && img.IsFlaky() && img.Ref != "":
			// Published labelled: its gold resolved in some runs.
			built++
			o.Flaky = true
		case !Usable(img.Image) || img.Ref == "":
			bad++
			regressed = regressed || t.PreviouslyVerified
		default:
			built++
		}
		o.Images = append(o.Images, img)
	}
	switch {
	case bad > 0 && regressed:
		o.Status = StatusRegressed
	case bad > 0:
		o.Status = StatusFailed
	case built > 0:
		o.Status = StatusIndexed
	default:
		o.Status = StatusUnchanged
	}
	return o
}

// builtImage is the latest result of target t of instance id, failed when
// there is none, when its gold patch did not verify (and was not flaky) or
// when it was not pushed.
func builtImage(id string, t Target, latest map[Key]core.Image) Image {
	img := Image{Source: "built", Shard: t.Shard}
	r, ok := latest[Key{id, t.Platform}]
	if !ok {
		img.Image = core.Image{Kind: core.KindInstance, InstanceID: id, Platform: t.Platform,
			Status: core.StatusFailed, Error: fmt.Sprintf("no result from shard %s", t.Shard)}
		return img
	}
	img.Image = r
	if r.OK() && !r.IsVerified() && !r.IsFlaky() {
		img.Status, img.Error = core.StatusFailed, "gold patch did not verify"
	}
	if r.OK() && r.Ref == "" {
		img.Status, img.Error = core.StatusFailed, "verified but not pushed"
	}
	return img
}

// add counts outcome o.
func (c *MergeCounts) add(o Outcome) {
	switch o.Status {
	case StatusRegressed:
		c.Regressed++
	case StatusFailed:
		c.Failed++
	case StatusIndexed:
		c.Indexed++
		if o.Flaky {
			c.Flaky++
		}
	default:
		c.Unchanged++
	}
	c.Instances++
}

// PublishRecords returns the records that make `swebuild publish` write the
// index of every instance to index: one per platform image, built now or
// reused, each pinned by digest and verified, with its SBOM artifact and
// BuildKit's attestation manifest (which publish carries to the published
// image and the index). Images without a spec key are
// errors: publish would refuse them.
func (r MergeReport) PublishRecords() ([]core.Image, error) {
	out := []core.Image{}
	var errs []string
	for _, o := range r.Outcomes {
		if !o.Index() {
			continue
		}
		for _, img := range o.Images {
			if img.SpecKey == "" {
				errs = append(errs, fmt.Sprintf("%s %s: no spec_key", o.InstanceID, img.Platform))
				continue
			}
			out = append(out, core.Image{
				Kind: core.KindInstance, InstanceID: o.InstanceID, Platform: img.Platform, Digest: img.Digest,
				Ref: img.Ref, SpecKey: img.SpecKey, Pins: img.Pins, BaseCommit: img.BaseCommit, Dataset: img.Dataset,
				SBOM: img.SBOM, SBOMSize: img.SBOMSize, Attestation: img.Attestation, AttestationSize: img.AttestationSize,
				Verification: img.Verification, VerificationSize: img.VerificationSize,
				Verified: core.Bool(!img.IsFlaky()), Flaky: img.Flaky, Status: core.StatusBuilt,
			})
		}
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("building publish records:\n  %s", strings.Join(errs, "\n  "))
	}
	return out, nil
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
