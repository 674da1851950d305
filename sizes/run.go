package sizes

import (
	"context"
	"errors"
	"fmt"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/dataset"
	"github.com/swebuild/swebuild/registry"
)

// Config is one `swebuild sizes` run.
type Config struct {
	// Images (set A) and Against (set B, optional) in ParseSet syntax.
	Images, Against string
	// Dataset lists the instance ids for sets given by naming scheme.
	Dataset string
	// Platforms to measure ("linux/amd64", "linux/arm64"). For sets read
	// from a file, the file's images are kept only when PlatformsGiven.
	Platforms      []string
	PlatformsGiven bool
	Options
	// MaxGrowthPercent, when set, needs Against; see Report.GrowthExceeded.
	MaxGrowthPercent *float64
	// Policy says which platforms an instance has images for, for sets
	// named by scheme over --dataset; nil means builder/spec's decision
	// (x86-only instances have no arm64 image).
	Policy PlatformPolicy
	// Source answers registry requests; nil means NewRemote over a
	// registry client with no credentials but the Docker config's.
	Source Source
}

// Run measures the sets of cfg and builds the report. Per-image problems
// are in the report (see Report.Problems); the error is for bad
// arguments, unreadable files and cancellation.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Images == "" {
		return nil, errors.New("--images is required")
	}
	if cfg.MaxGrowthPercent != nil && cfg.Against == "" {
		return nil, errors.New("--max-growth needs --against")
	}
	if len(cfg.Platforms) == 0 {
		cfg.Platforms = []string{"linux/amd64"}
	}
	for _, p := range cfg.Platforms {
		if _, err := ArchName(p); err != nil {
			return nil, fmt.Errorf("--platform: %w", err)
		}
	}
	specA, err := ParseSet(cfg.Images)
	if err != nil {
		return nil, fmt.Errorf("--images: %w", err)
	}
	var specB *SetSpec
	if cfg.Against != "" {
		s, err := ParseSet(cfg.Against)
		if err != nil {
			return nil, fmt.Errorf("--against: %w", err)
		}
		specB = &s
	}
	var instances []Instance
	if cfg.Dataset != "" {
		if instances, err = LoadInstances(ctx, cfg.Dataset); err != nil {
			return nil, err
		}
		if cfg.Policy == nil {
			tables, err := spec.Load()
			if err != nil {
				return nil, err
			}
			cfg.Policy = platformPolicy(tables, instances)
		}
	}
	// Targets of file sets first: a scheme set without --dataset takes
	// its (instance, platform) pairs from the other set's file.
	var fileTargets []Target
	load := func(s SetSpec) ([]Target, error) {
		if s.Scheme != SchemeFile {
			return nil, nil
		}
		ts, err := LoadImageFile(s.File)
		if err != nil {
			return nil, err
		}
		ts = filterTargets(ts, instances, cfg.Platforms, cfg.PlatformsGiven)
		if fileTargets == nil {
			fileTargets = ts
		}
		return ts, nil
	}
	tA, err := load(specA)
	if err != nil {
		return nil, err
	}
	var tB []Target
	if specB != nil {
		if tB, err = load(*specB); err != nil {
			return nil, err
		}
	}
	skipped := map[*SetSpec]int{}
	expand := func(s *SetSpec, which string) ([]Target, error) {
		switch {
		case instances != nil:
			ts, n := s.Targets(instances, cfg.Platforms, cfg.Policy)
			skipped[s] = n
			return ts, nil
		case fileTargets != nil:
			return s.targetsLike(fileTargets), nil
		}
		return nil, fmt.Errorf("%s %q names images by a naming scheme: give --dataset (instance ids) or a metadata file for the other set", which, s.Arg)
	}
	if specA.Scheme != SchemeFile {
		if tA, err = expand(&specA, "--images"); err != nil {
			return nil, err
		}
	}
	if specB != nil && specB.Scheme != SchemeFile {
		if tB, err = expand(specB, "--against"); err != nil {
			return nil, err
		}
	}
	src := cfg.Source
	if src == nil {
		// Anonymous, plus the Docker config and its credential helpers.
		c, err := registry.New(registry.Options{})
		if err != nil {
			return nil, err
		}
		src = NewRemote(c)
	}
	a, err := Measure(ctx, src, specA, tA, cfg.Options)
	if err != nil {
		return nil, err
	}
	a.PlatformSkipped = skipped[&specA]
	var b *Set
	if specB != nil {
		if b, err = Measure(ctx, src, *specB, tB, cfg.Options); err != nil {
			return nil, err
		}
		b.PlatformSkipped = skipped[specB]
	}
	return NewReport(a, b, cfg.Uncompressed, cfg.MaxGrowthPercent), nil
}

// targetsLike names, with this set's template, the same (instance,
// platform) pairs as ts.
func (s SetSpec) targetsLike(ts []Target) []Target {
	out := make([]Target, 0, len(ts))
	for _, t := range ts {
		n := Target{Instance: t.Instance, Repo: t.Repo, Platform: t.Platform}
		ref, err := s.Ref(t.Instance, t.Platform)
		if err != nil {
			n.Err = err.Error()
		} else {
			n.Ref = ref
		}
		out = append(out, n)
	}
	sortTargets(out)
	return out
}

// filterTargets keeps the file's images of the dataset's instances (when a
// dataset is given) and of the requested platforms (when given).
func filterTargets(ts []Target, instances []Instance, platforms []string, platformsGiven bool) []Target {
	ids := map[string]bool{}
	for _, in := range instances {
		ids[in.ID] = true
	}
	want := map[string]bool{}
	for _, p := range platforms {
		want[p] = true
	}
	var out []Target
	for _, t := range ts {
		if instances != nil && !ids[t.Instance] {
			continue
		}
		if platformsGiven && !want[t.Platform] {
			continue
		}
		out = append(out, t)
	}
	return out
}

// platformPolicy is builder/spec's platform decision over the loaded
// instances, keyed by id.
func platformPolicy(tables *spec.Tables, instances []Instance) PlatformPolicy {
	recs := make([]dataset.Instance, len(instances))
	for i, in := range instances {
		recs[i] = dataset.Instance{InstanceID: in.ID, Repo: in.Repo, Version: in.Version}
	}
	byID := tables.PlatformsByID(recs)
	return func(id string) []string {
		ps := byID(id)
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = p.String()
		}
		return out
	}
}
