package sizes

import (
	"context"
	"errors"
	"fmt"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/publication"
	"github.com/swebuild/swebuild/registry"
)

// Config is one `swebuild sizes` run.
type Config struct {
	// Images (set A) and Against (set B, optional) in ParseSet syntax.
	Images, Against string
	// Dataset lists the instance ids for sets given by naming scheme (a
	// dataset file, or a .txt id list); Instances, when Dataset is empty,
	// are those ids as the caller read them (a dataset or task repo loaded
	// by package pipeline, with Policy its platform decision).
	Dataset   string
	Instances []Instance
	// Platforms to measure ("linux/amd64", "linux/arm64"). For sets read
	// from a file, the file's images are kept only when PlatformsGiven.
	Platforms      []core.Platform
	PlatformsGiven bool
	Options
	// MaxGrowthPercent, when set, needs Against; see Report.GrowthExceeded.
	MaxGrowthPercent *float64
	// Policy says which platforms an instance has images for, for sets
	// named by scheme over Dataset; nil means builder/spec's decision
	// (x86-only instances have no arm64 image).
	Policy PlatformPolicy
	// Source answers registry requests; nil means NewRemote over a
	// publication reader whose client has no credentials but the Docker
	// config's.
	Source Source
}

// Run measures the sets of cfg and builds the report. Per-image problems
// are in the report (see Report.Problems); the error is for bad
// arguments, unreadable files and cancellation.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	sets, err := cfg.parse()
	if err != nil {
		return nil, err
	}
	instances := cfg.Instances
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
	if err := cfg.targets(ctx, sets, instances); err != nil {
		return nil, err
	}
	src := cfg.Source
	if src == nil {
		// Anonymous, plus the Docker config and its credential helpers.
		c, err := registry.New(registry.Options{})
		if err != nil {
			return nil, err
		}
		src = NewRemote(publication.New(c))
	}
	measured := make([]*Set, len(sets))
	for i, st := range sets {
		if measured[i], err = Measure(ctx, src, st.spec, st.targets, cfg.Options); err != nil {
			return nil, err
		}
		measured[i].PlatformSkipped = st.skipped
	}
	var b *Set
	if len(measured) > 1 {
		b = measured[1]
	}
	return NewReport(measured[0], b, cfg.Uncompressed, cfg.MaxGrowthPercent), nil
}

// set is one image set of a run: the parsed spec, what it is called in
// errors, and the images to measure.
type set struct {
	spec    SetSpec
	role    string // "measured set" or "set compared against"
	targets []Target
	skipped int // (instance, platform) pairs the platform policy left out
}

// parse checks cfg and parses its sets: the images, then the set compared
// against, when there is one. Platforms default to linux/amd64.
func (cfg *Config) parse() ([]*set, error) {
	if cfg.Images == "" {
		return nil, errors.New("no image set to measure")
	}
	if cfg.MaxGrowthPercent != nil && cfg.Against == "" {
		return nil, errors.New("a growth limit needs a set to compare against")
	}
	if len(cfg.Platforms) == 0 {
		cfg.Platforms = []core.Platform{core.AMD64}
	}
	var sets []*set
	for _, s := range []struct{ arg, role string }{{cfg.Images, "measured set"}, {cfg.Against, "set compared against"}} {
		if s.arg == "" {
			continue
		}
		sp, err := ParseSet(s.arg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.role, err)
		}
		sets = append(sets, &set{spec: sp, role: s.role})
	}
	return sets, nil
}

// targets lists the images of each set. A set read from a file holds its
// own (filtered to the dataset's instances and the platforms given); a set
// named by scheme takes its (instance, platform) pairs from the dataset,
// or, without one, from the first set read from a file.
func (cfg *Config) targets(ctx context.Context, sets []*set, instances []Instance) error {
	var fileTargets []Target
	for _, st := range sets {
		if st.spec.Scheme != SchemeFile {
			continue
		}
		ts, err := LoadImageFile(ctx, st.spec.File)
		if err != nil {
			return err
		}
		st.targets = filterTargets(ts, instances, cfg.Platforms, cfg.PlatformsGiven)
		if fileTargets == nil {
			fileTargets = st.targets
		}
	}
	for _, st := range sets {
		switch {
		case st.spec.Scheme == SchemeFile:
		case instances != nil:
			st.targets, st.skipped = st.spec.Targets(instances, cfg.Platforms, cfg.Policy)
		case fileTargets != nil:
			st.targets = st.spec.targetsLike(fileTargets)
		default:
			return fmt.Errorf("%s %q names images by a naming scheme: give a dataset (instance ids) or a metadata file for the other set", st.role, st.spec.Arg)
		}
	}
	return nil
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
func filterTargets(ts []Target, instances []Instance, platforms []core.Platform, platformsGiven bool) []Target {
	ids := map[string]bool{}
	for _, in := range instances {
		ids[in.ID] = true
	}
	want := map[core.Platform]bool{}
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
	recs := make([]core.Instance, len(instances))
	for i, in := range instances {
		recs[i] = core.Instance{InstanceID: in.ID, Repo: in.Repo, Version: in.Version}
	}
	return tables.PlatformsByID(recs)
}
