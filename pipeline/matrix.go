package pipeline

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/builder/plan"
	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/ci"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/dataset"
	"github.com/swebuild/swebuild/registry"
)

// MatrixOptions are one `swebuild ci matrix`: which instances (a dataset
// through Inputs, or IDsFile), how to shard them (Matrix), what to skip
// (SkipRepo with the Ledger) and where to write the plan.
type MatrixOptions struct {
	// Inputs name the dataset (its records decide each instance's
	// platforms) and Inputs.Specs an extra profile. Invalid records fail
	// the matrix: a nightly must not silently drop instances.
	Inputs
	// IDsFile, instead of a dataset, lists instance ids one per line; the
	// platforms are then decided from the id alone.
	IDsFile string
	// Matrix shapes the matrix (platforms, shards, jobs, runners);
	// PlatformsFor and Skip are set here.
	Matrix ci.MatrixOptions
	// Ledger is the publish ledger read for SkipRepo and for the plan; a
	// missing file means nothing exists yet.
	Ledger string
	// SkipRepo, unless Force, skips images the ledger records as verified
	// and that this repository prefix still holds by digest, asked through
	// Registry with Parallel lookups at once.
	SkipRepo string
	Force    bool
	Registry *registry.Client
	Parallel int
	// Checker, when set, answers the digest lookups instead of Registry
	// (tests, dry runs).
	Checker ci.DigestChecker
	// ContextDirs are where profile context files are found, as for
	// BuildOptions: the spec keys compared with the ledger's hash them.
	ContextDirs []string
	// PlanOut, when set, receives the plan `ci merge` reads; IDsDir holds
	// per-shard id files when the matrix is too large for a job output.
	PlanOut, IDsDir string
	// Log receives the per-platform counts and dataset problems.
	Log io.Writer
}

// Matrix shards the instances into a GitHub Actions matrix and returns it
// with its encoding for the job output.
func Matrix(ctx context.Context, o MatrixOptions) (ci.Matrix, string, error) {
	log := writerOr(o.Log)
	loaded, tables, ids, insts, err := o.instances(ctx, log)
	if err != nil {
		return ci.Matrix{}, "", err
	}
	// The platform decision (builder/spec) needs each record's repo and
	// version; an id list gives only ids (see spec.Tables.PlatformsByID).
	byID := tables.PlatformsByID(insts)
	platformsFor := func(id string) []string {
		var out []string
		for _, p := range byID(id) {
			out = append(out, p.String())
		}
		return out
	}
	var previous, existing map[ci.Key]core.Image
	if o.Ledger != "" {
		recs, err := ci.ReadLedger(o.Ledger, log)
		if err != nil {
			return ci.Matrix{}, "", err
		}
		previous = ci.Latest(recs)
	}
	if o.SkipRepo != "" && !o.Force {
		var chk ci.DigestChecker = o.Checker
		if chk == nil {
			if o.Registry == nil {
				return ci.Matrix{}, "", fmt.Errorf("skipping what %s holds: no registry client", o.SkipRepo)
			}
			chk = ci.ClientChecker{Client: o.Registry}
		}
		var want []ci.Key
		for _, id := range ids {
			for _, p := range platformsFor(id) {
				want = append(want, ci.Key{InstanceID: id, Platform: p})
			}
		}
		specKeys := o.specKeys(ctx, loaded, log)
		if existing, err = ci.FindExisting(ctx, previous, want, specKeys, o.SkipRepo, chk, max(o.Parallel, 1)); err != nil {
			return ci.Matrix{}, "", err
		}
	}
	mo := o.Matrix
	mo.PlatformsFor = platformsFor
	mo.Skip = func(id, p string) bool {
		_, ok := existing[ci.Key{InstanceID: id, Platform: p}]
		return ok
	}
	m, err := ci.BuildMatrix(ids, mo)
	if err != nil {
		return ci.Matrix{}, "", err
	}
	if o.PlanOut != "" {
		if err := ci.WritePlan(o.PlanOut, ci.NewPlan(m, existing, previous, o.SkipRepo, mo.Platforms)); err != nil {
			return ci.Matrix{}, "", err
		}
	}
	out, err := m.EncodeForOutput(0, o.IDsDir)
	if err != nil {
		return ci.Matrix{}, "", err
	}
	for _, c := range m.Counts {
		fmt.Fprintf(log, "%s: %d wanted, %d already in the registry, %d to build in %d shards\n", c.Platform, c.Wanted, c.Skipped, c.ToBuild, c.Shards)
	}
	return m, string(out), nil
}

// specKeys are the spec keys the wanted images would be built with now
// (plan, render, nodes: what Build records), by instance and platform; nil
// when they cannot be computed (an id list has no records), which
// FindExisting takes as "not compared", said on the log.
func (o MatrixOptions) specKeys(ctx context.Context, loaded *Loaded, log io.Writer) map[ci.Key]string {
	if loaded == nil {
		fmt.Fprintln(log, "ci matrix: no dataset records (--ids): the ledger's spec keys are not compared with the specs now")
		return nil
	}
	var plats []core.Platform
	for _, p := range core.AllPlatforms() {
		if slices.Contains(o.Matrix.Platforms, p.String()) || len(o.Matrix.Platforms) == 0 {
			plats = append(plats, p)
		}
	}
	p, err := plan.Build(ctx, loaded.Renderer, loaded.Instances, plats)
	if err == nil {
		var nodes []*builder.Node
		if nodes, err = Nodes(p, loaded.Instances, o.ContextDirs); err == nil {
			keys := map[ci.Key]string{}
			byNode := builder.SpecKeys(nodes)
			for _, n := range nodes {
				if n.Kind == string(render.KindInstance) {
					keys[ci.Key{InstanceID: n.InstanceID, Platform: n.Platform.String()}] = byNode[n.ID()]
				}
			}
			for _, e := range p.Errors {
				fmt.Fprintf(log, "ci matrix: %s (%s) cannot be rendered now, so it is built again: %s\n", e.InstanceID, e.Platform, e.Error)
			}
			return keys
		}
	}
	fmt.Fprintf(log, "ci matrix: the spec keys of the build cannot be computed here (%v): the ledger's are not compared\n", err)
	return nil
}

// instances are the loaded dataset (nil for an id list), the spec tables
// and the ids (with their records when a dataset was given).
func (o MatrixOptions) instances(ctx context.Context, log io.Writer) (*Loaded, *spec.Tables, []string, []dataset.Instance, error) {
	if o.IDsFile != "" {
		tables, err := spec.Load()
		if err != nil {
			return nil, nil, nil, nil, err
		}
		if o.Specs != "" {
			if err := tables.LoadExtra(o.Specs); err != nil {
				return nil, nil, nil, nil, err
			}
		}
		ids, err := ci.ReadIDList(o.IDsFile)
		return nil, tables, ids, nil, err
	}
	in := o.Inputs
	in.Log = log
	if in.Pins == "" {
		in.Pins = "default"
	}
	loaded, err := Load(ctx, in)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	ids := make([]string, len(loaded.Instances))
	for i, inst := range loaded.Instances {
		ids[i] = inst.InstanceID
	}
	return loaded, loaded.Renderer.Tables, ids, loaded.Instances, nil
}
