package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"sort"

	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/ci"
	"github.com/swebuild/swebuild/core"
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
	// EnvStage plans the env stage (ci/envs.go): the env images the
	// instances to build need are built once per platform by EnvShards
	// jobs (default 1 per platform; a base's envs never split) before the
	// shards, which start from their digests. An env EnvLedger (the env
	// jobs' records of earlier nights) shows built from the same inputs,
	// still under SkipRepo, is reused. Needs a dataset (not IDsFile).
	EnvStage  bool
	EnvLedger string
	EnvShards int
	// PlanOut, when set, receives the plan `ci merge` reads; IDsDir holds
	// per-shard id files when the matrix is too large for a job output.
	PlanOut, IDsDir string
	// Log receives the per-platform counts and dataset problems.
	Log io.Writer
}

// Matrix shards the instances into a GitHub Actions matrix and returns it
// with its encoding for the job output. With EnvStage, m.Envs is the env
// stage that builds, before the shards, the env images the instances to
// build need and the ledger cannot give (see ci/envs.go).
func Matrix(ctx context.Context, o MatrixOptions) (ci.Matrix, string, error) {
	log := writerOr(o.Log)
	loaded, tables, ids, insts, err := o.instances(ctx, log)
	if err != nil {
		return ci.Matrix{}, "", err
	}
	// The platform decision needs each record (Loaded.Decide); an id list
	// gives only ids (see spec.Tables.PlatformsByID).
	platformsFor := tables.PlatformsByID(insts)
	if loaded != nil {
		platformsFor = loaded.PlatformsByID()
	}
	want := o.wanted(ids, platformsFor)
	previous, err := o.previous(ctx, log)
	if err != nil {
		return ci.Matrix{}, "", err
	}
	skipping := o.SkipRepo != "" && !o.Force
	chk, err := o.checker(skipping)
	if err != nil {
		return ci.Matrix{}, "", err
	}
	g, err := o.trustedGraph(ctx, loaded, skipping, log)
	if err != nil {
		return ci.Matrix{}, "", err
	}
	envStage := o.EnvStage && g != nil
	if o.EnvStage && loaded == nil {
		fmt.Fprintln(log, "ci matrix: no dataset records (--ids): no env stage, each shard builds the envs its instances need")
	}
	var envReused map[ci.EnvKey]core.Image
	if envStage && skipping && o.EnvLedger != "" {
		if envReused, err = o.reusedEnvs(ctx, g, want, chk, log); err != nil {
			return ci.Matrix{}, "", err
		}
	}
	var existing map[ci.Key]core.Image
	if skipping {
		if existing, err = o.existing(ctx, g, previous, want, envReused, chk); err != nil {
			return ci.Matrix{}, "", err
		}
	}
	mo := o.Matrix
	mo.PlatformsFor = platformsFor
	mo.Skip = func(id string, p core.Platform) bool {
		_, ok := existing[ci.Key{InstanceID: id, Platform: p}]
		return ok
	}
	m, err := ci.BuildMatrix(ids, mo)
	if err != nil {
		return ci.Matrix{}, "", err
	}
	var envs *envStagePlan
	if envStage {
		if envs, err = o.envStage(g, &m, mo, envReused, log); err != nil {
			return ci.Matrix{}, "", err
		}
	}
	if o.PlanOut != "" {
		plan := ci.NewPlan(m, existing, previous, o.SkipRepo, mo.Platforms)
		if envs != nil {
			plan.SetEnvs(envs.targets, envs.envOf)
		}
		if err := ci.WritePlan(o.PlanOut, plan); err != nil {
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

// wanted are the images the matrix is about: every id on each of its
// platforms that the matrix builds (all when Matrix.Platforms is empty).
func (o MatrixOptions) wanted(ids []string, platformsFor func(string) []core.Platform) []ci.Key {
	var want []ci.Key
	for _, id := range ids {
		for _, p := range platformsFor(id) {
			if len(o.Matrix.Platforms) == 0 || slices.Contains(o.Matrix.Platforms, p) {
				want = append(want, ci.Key{InstanceID: id, Platform: p})
			}
		}
	}
	return want
}

// previous is the ledger's latest record per image (nil without a ledger).
func (o MatrixOptions) previous(ctx context.Context, log io.Writer) (map[ci.Key]core.Image, error) {
	if o.Ledger == "" {
		return nil, nil
	}
	recs, err := ci.ReadLedger(ctx, o.Ledger, log)
	if err != nil {
		return nil, err
	}
	return ci.Latest(recs), nil
}

// checker answers the digest lookups of skipping: Checker, else the
// registry client (required then).
func (o MatrixOptions) checker(skipping bool) (ci.DigestChecker, error) {
	if !skipping || o.Checker != nil {
		return o.Checker, nil
	}
	if o.Registry == nil {
		return nil, fmt.Errorf("skipping what %s holds: no registry client", o.SkipRepo)
	}
	return ci.ClientChecker{Client: o.Registry}, nil
}

// reusedEnvs are the env images an earlier night built from the same
// inputs (the env ledger) and SkipRepo still holds: they are reused, and
// the instance keys compared with the ledger are those of builds starting
// from them. A missing env ledger reuses nothing.
func (o MatrixOptions) reusedEnvs(ctx context.Context, g *matrixGraph, want []ci.Key, chk ci.DigestChecker, log io.Writer) (map[ci.EnvKey]core.Image, error) {
	recs, err := ci.ReadRecords([]string{o.EnvLedger}, log)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("env ledger: %w", err)
	}
	return ci.FindExistingEnvs(ctx, ci.LatestEnvs(recs), g.envNeeds(want), o.SkipRepo, chk, o.Parallel)
}

// existing are the wanted images the ledger records and SkipRepo still
// holds at the spec key the build would record now (g's, built from the
// reused envs; none compared when g is nil).
func (o MatrixOptions) existing(ctx context.Context, g *matrixGraph, previous map[ci.Key]core.Image, want []ci.Key, envReused map[ci.EnvKey]core.Image, chk ci.DigestChecker) (map[ci.Key]core.Image, error) {
	var specKeys map[ci.Key]string
	if g != nil {
		var err error
		if specKeys, err = g.instanceKeys(envReused); err != nil {
			return nil, err
		}
	}
	return ci.FindExisting(ctx, previous, want, specKeys, o.SkipRepo, chk, max(o.Parallel, 1))
}

// envStagePlan is the env stage of a matrix: every env image its shards
// start from (built by an env job or reused), and each instance image's
// env key.
type envStagePlan struct {
	targets []ci.EnvTarget
	envOf   map[ci.Key]string
}

// envStage plans the env images the shards of m need: those envReused has
// are reused, the others are built by m.Envs (EnvShards jobs per platform).
func (o MatrixOptions) envStage(g *matrixGraph, m *ci.Matrix, mo ci.MatrixOptions, envReused map[ci.EnvKey]core.Image, log io.Writer) (*envStagePlan, error) {
	e := &envStagePlan{envOf: map[ci.Key]string{}}
	var build []ci.Key
	for _, j := range m.Include {
		for _, id := range j.InstanceIDs() {
			k := ci.Key{InstanceID: id, Platform: j.Platform}
			build = append(build, k)
			if env := g.envOf(k); env != nil {
				e.envOf[k] = env.Key
			}
		}
	}
	var toBuild []ci.EnvNeed
	for _, n := range g.envNeeds(build) {
		if r, ok := envReused[ci.EnvKey{Key: n.Key, Platform: n.Platform}]; ok {
			e.targets = append(e.targets, ci.EnvTarget{Key: n.Key, Platform: n.Platform, Base: n.Base, Action: ci.ActionExisting, Ref: r.Ref, SpecKey: r.SpecKey})
			continue
		}
		toBuild = append(toBuild, n)
	}
	var err error
	if m.Envs, err = ci.BuildEnvMatrix(toBuild, mo.Platforms, max(o.EnvShards, 1), mo.Runners); err != nil {
		return nil, err
	}
	for _, j := range m.Envs.Include {
		for _, k := range j.EnvKeys() {
			n := g.byID[k+"@"+j.Platform.String()]
			e.targets = append(e.targets, ci.EnvTarget{Key: k, Platform: j.Platform, Base: firstParent(n), Action: ci.ActionBuild, Shard: j.Name, SpecKey: g.unbound[n.ID()]})
		}
	}
	sort.Slice(e.targets, func(a, b int) bool {
		if e.targets[a].Platform != e.targets[b].Platform {
			return e.targets[a].Platform.Compare(e.targets[b].Platform) < 0
		}
		return e.targets[a].Key < e.targets[b].Key
	})
	fmt.Fprintf(log, "env stage: %d env images to build in %d jobs, %d reused from the env ledger\n", len(toBuild), len(m.Envs.Include), len(e.targets)-len(toBuild))
	return e, nil
}

// matrixGraph is the build graph the matrix reasons about: the nodes a
// build of the whole dataset would solve (plan, render, Nodes), by node
// ID and by instance image, with their unbound spec keys.
type matrixGraph struct {
	nodes   []*graph.Node
	byID    map[string]*graph.Node
	inst    map[ci.Key]*graph.Node
	unbound map[string]string
}

// graph plans and renders the dataset for the requested platforms: the
// nodes a build would solve, with the spec keys it would record. nil, and
// no error, for an id list (no records to render: the ledger's spec keys
// are not compared, said on the log); an error when the dataset's graph
// cannot be made here (a profile's context file missing, planning failed):
// the caller must not then trust the ledger (Matrix fails closed).
// Instances that cannot be rendered are left out of the graph, said on
// the log: they have no spec key, so they are built again.
func (o MatrixOptions) graph(ctx context.Context, loaded *Loaded, log io.Writer) (*matrixGraph, error) {
	if loaded == nil {
		fmt.Fprintln(log, "ci matrix: no dataset records (--ids): the ledger's spec keys are not compared with the specs now")
		return nil, nil
	}
	var plats []core.Platform
	for _, p := range core.AllPlatforms() {
		if slices.Contains(o.Matrix.Platforms, p) || len(o.Matrix.Platforms) == 0 {
			plats = append(plats, p)
		}
	}
	p, err := loaded.Plan(ctx, plats)
	if err != nil {
		return nil, fmt.Errorf("the spec keys of the build cannot be computed: planning: %w", err)
	}
	nodes, err := p.Nodes(o.ContextDirs)
	if err != nil {
		return nil, fmt.Errorf("the spec keys of the build cannot be computed: %w", err)
	}
	for _, e := range p.Errors {
		fmt.Fprintf(log, "ci matrix: %s (%s) cannot be rendered now, so it is built again: %s\n", e.InstanceID, e.Platform, e.Error)
	}
	g := &matrixGraph{nodes: nodes, byID: map[string]*graph.Node{}, inst: map[ci.Key]*graph.Node{}, unbound: builder.SpecKeys(nodes)}
	for _, n := range nodes {
		g.byID[n.ID()] = n
		if n.Kind == graph.KindInstance {
			g.inst[ci.Key{InstanceID: n.InstanceID, Platform: n.Platform}] = n
		}
	}
	return g, nil
}

// trustedGraph is graph, failing closed when the matrix skips what the
// ledger records: without the spec keys the build would record now, no
// ledger image can be shown to match, and counting them all "already in
// the registry" would republish stale images as tonight's. Without
// skipping, a graph that cannot be made only means no env stage.
func (o MatrixOptions) trustedGraph(ctx context.Context, loaded *Loaded, skipping bool, log io.Writer) (*matrixGraph, error) {
	g, err := o.graph(ctx, loaded, log)
	switch {
	case err != nil && skipping:
		return nil, fmt.Errorf("ci matrix: nothing counted as already in %s: %w; give the --context-dir holding it, or --force to rebuild everything", o.SkipRepo, err)
	case err != nil:
		fmt.Fprintf(log, "ci matrix: no env stage, each shard builds the envs its instances need: %v\n", err)
	}
	return g, nil
}

// envOf is the env node the instance image k builds FROM, nil when it has
// none (a profile or layout without env images).
func (g *matrixGraph) envOf(k ci.Key) *graph.Node {
	n := g.inst[k]
	if n == nil || len(n.Parents) != 1 {
		return nil
	}
	p := g.byID[n.Parents[0]+"@"+n.Platform.String()]
	if p == nil || p.Kind != graph.KindEnv {
		return nil
	}
	return p
}

// envNeeds are the env images the instance images keys build FROM, once
// each, sorted by platform and key.
func (g *matrixGraph) envNeeds(keys []ci.Key) []ci.EnvNeed {
	seen := map[string]bool{}
	var out []ci.EnvNeed
	for _, k := range keys {
		env := g.envOf(k)
		if env == nil || seen[env.ID()] {
			continue
		}
		seen[env.ID()] = true
		out = append(out, ci.EnvNeed{Key: env.Key, Platform: env.Platform, Base: firstParent(env), SpecKey: g.unbound[env.ID()]})
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Platform != out[b].Platform {
			return out[a].Platform.Compare(out[b].Platform) < 0
		}
		return out[a].Key < out[b].Key
	})
	return out
}

// instanceKeys are the spec keys the instance images would be recorded
// with now, by instance and platform: built FROM the reused env images
// where bound has one (`build --build-context`), else from their inputs.
func (g *matrixGraph) instanceKeys(bound map[ci.EnvKey]core.Image) (map[ci.Key]string, error) {
	keys := map[ci.Key]string{}
	for _, p := range core.AllPlatforms() {
		var nodes []*graph.Node
		for _, n := range g.nodes {
			if n.Platform == p {
				nodes = append(nodes, n)
			}
		}
		images := map[string]string{}
		for k, r := range bound {
			if k.Platform == p {
				images[k.Key] = r.Ref
			}
		}
		byNode, err := builder.SpecKeysBound(nodes, images)
		if err != nil {
			return nil, fmt.Errorf("env ledger: %w", err)
		}
		for _, n := range nodes {
			if n.Kind == graph.KindInstance {
				keys[ci.Key{InstanceID: n.InstanceID, Platform: p}] = byNode[n.ID()]
			}
		}
	}
	return keys, nil
}

func firstParent(n *graph.Node) string {
	if n == nil || len(n.Parents) == 0 {
		return ""
	}
	return n.Parents[0]
}

// instances are the loaded dataset (nil for an id list), the spec tables
// and the ids (with their records when a dataset was given).
func (o MatrixOptions) instances(ctx context.Context, log io.Writer) (*Loaded, *spec.Tables, []string, []core.Instance, error) {
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
