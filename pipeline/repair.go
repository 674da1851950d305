package pipeline

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/builder/plan"
	"github.com/swebuild/swebuild/ci"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/drift"
	"github.com/swebuild/swebuild/pins"
	"github.com/swebuild/swebuild/publication"
	"github.com/swebuild/swebuild/repair"
	"github.com/swebuild/swebuild/sbom"
	"github.com/swebuild/swebuild/verify"
)

// RepairOptions are one `swebuild ci repair`: the night's plan and what its
// env stage and shards left, and how a repair step builds.
type RepairOptions struct {
	// Build is the night's inputs (dataset, specs, pins, context
	// directories) and how each step builds (Builder: daemons, Push, the
	// run directory) and verifies (Verify, required). Platforms, Publish
	// and MetadataFile are not used.
	Build BuildOptions
	// Plan is the night's plan (`ci matrix --plan-out`).
	Plan ci.Plan
	// Gold are tonight's gold results (the shards' verification
	// summaries): the images that failed and their failing tests.
	Gold []verify.Result
	// EnvsTonight are the env stage's records of tonight; EnvsBefore the
	// env ledger as it was before tonight (last night's env images).
	EnvsTonight, EnvsBefore []core.Image
	// Reader reads the env images' environment documents.
	Reader *publication.Reader
	// Night names the night in the evidence (its run, its time).
	Night string
	// Out is the directory written: report.json, report.md, proposal.json
	// (when a rule is proposed), records.jsonl (the repaired instance
	// images, for `ci merge --results`), envs.jsonl (their env images, for
	// the env ledger), frozen/ (last night's documents per case) and
	// steps/ (each rebuild's pins, records and logs).
	Out string
	// Log receives progress.
	Log io.Writer
}

// RepairOutputs are the files Repair writes under Out.
const (
	RepairReport   = "report.json"
	RepairMarkdown = "report.md"
	RepairProposal = "proposal.json"
	RepairRecords  = "records.jsonl"
	RepairEnvs     = "envs.jsonl"
)

// Repair finds, per env rebuilt tonight whose gold patches failed on
// images that passed last night, the package that broke them
// (repair.Bisect over the drift of the env's documents, each step a real
// rebuild of the env once per platform and of its instances FROM it, gold
// verified), and proposes the rule holding it back. The repaired images
// (the last step, built with the rule) are written for the merge to
// publish; an env with no single-package explanation keeps last night's
// images (nothing of it is written). The report says what happened per
// env; an error is returned only when nothing could be decided.
func Repair(ctx context.Context, o RepairOptions) (*repair.Report, error) {
	start := time.Now()
	log := writerOr(o.Log)
	if o.Build.Verify == nil {
		return nil, errors.New("repair: gold verification options are required (a step is judged by its gold patches)")
	}
	if o.Reader == nil {
		return nil, errors.New("repair: no publication reader")
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, fmt.Errorf("repair output: %w", err)
	}
	pinsValue := o.Build.Inputs.Pins
	if pinsValue == "" {
		pinsValue = "default"
	}
	rep := &repair.Report{Schema: repair.Schema, Night: o.Night, Pins: pinsValue, Cases: []repair.CaseReport{}}
	cases, err := findCases(ctx, o, log)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "repair: %d env(s) broke gold patches that passed last night\n", len(cases))
	var (
		rules    []pins.FileRule
		repaired []core.Image
		envRecs  []core.Image
	)
	for _, c := range cases {
		cr := repair.CaseReport{Case: c.Case}
		switch {
		case c.err != "":
			cr.Error = c.err
		case c.result != nil:
			cr.Result = c.result
		default:
			cr = o.repairCase(ctx, c, log)
			if cr.Rule != "" {
				fr, err := repair.Proposal(o.Night, c.Case, cr.Result, verifiedLabels(cr.Repaired))
				if err != nil {
					cr.Error, cr.Rule, cr.Repaired = err.Error(), "", nil
				} else {
					rules = append(rules, fr)
					repaired = append(repaired, cr.Repaired...)
					envRecs = append(envRecs, c.envRecs...)
				}
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		rep.Cases = append(rep.Cases, cr)
	}
	if len(rules) > 0 {
		rep.Proposal = filepath.Join(o.Out, RepairProposal)
		raw, err := pins.File{Schema: pins.FileSchema, Rules: rules}.Encode()
		if err == nil {
			err = os.WriteFile(rep.Proposal, raw, 0o644)
		}
		if err != nil {
			return nil, fmt.Errorf("writing the proposal: %w", err)
		}
	}
	rep.Seconds = time.Since(start).Seconds()
	if err := core.WriteFile(filepath.Join(o.Out, RepairRecords), repaired); err != nil {
		return nil, err
	}
	if err := core.WriteFile(filepath.Join(o.Out, RepairEnvs), envRecs); err != nil {
		return nil, err
	}
	raw, err := rep.Encode()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.Out, RepairReport), raw, 0o644); err != nil {
		return nil, fmt.Errorf("writing the repair report: %w", err)
	}
	f, err := os.Create(filepath.Join(o.Out, RepairMarkdown))
	if err != nil {
		return nil, fmt.Errorf("writing the repair report: %w", err)
	}
	defer f.Close()
	if err := repair.WriteMarkdown(f, rep); err != nil {
		return nil, fmt.Errorf("writing the repair report: %w", err)
	}
	return rep, f.Close()
}

func verifiedLabels(recs []core.Image) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.InstanceID+" "+r.Platform.String()+" "+r.Digest.String())
	}
	return out
}

// repairCase bisects one case and, on a culprit, completes the repair on
// the instances and platforms the steps did not build.
func (o RepairOptions) repairCase(ctx context.Context, c *repairCase, log io.Writer) repair.CaseReport {
	cr := repair.CaseReport{Case: c.Case}
	fmt.Fprintf(log, "repair: %s: %d changed package(s) (%s); bisecting on %s\n", c.Name(), len(c.Changes), changeList(c.Changes), platformList(c.stepPlatforms))
	or := &stepOracle{o: o, c: c, log: log, records: map[string][]core.Image{}}
	res, err := repair.Bisect(ctx, c.Changes, c.Tonight, or)
	cr.Result = res
	if err != nil {
		cr.Error = err.Error()
		return cr
	}
	fmt.Fprintf(log, "repair: %s: %s: %s (%d env rebuilds, %.0f s)\n", c.Name(), res.Verdict, res.Reason, res.Rebuilds, res.Seconds)
	if res.Verdict != repair.VerdictCulprit || res.Repair == nil {
		return cr
	}
	recs := or.records[stepID(res.Repair.Step)]
	if !slices.Equal(c.stepInstances, c.Instances) || !slices.Equal(c.stepPlatforms, c.platforms) {
		// The steps built only the images that failed; the rule changes
		// the env of the others too, so they are built with it (what the
		// steps built again comes from BuildKit's and verify's caches).
		out, all, err := or.build(ctx, res.Repair.Step, c.Instances, c.platforms, "repair-all")
		if err != nil || !out.Pass {
			why := fmt.Sprintf("gold fails on %d image(s)", len(out.Failures))
			if err != nil {
				why = err.Error()
			}
			cr.Error = fmt.Sprintf("the repair passes on the images that failed tonight but not on every image of the env (%s on %s): %s",
				strings.Join(c.Instances, ", "), platformList(c.platforms), why)
			return cr
		}
		recs = all
	}
	for _, r := range recs {
		switch r.Kind {
		case core.KindInstance:
			cr.Repaired = append(cr.Repaired, r)
		case core.KindEnv, core.KindBase:
			c.envRecs = append(c.envRecs, r)
		}
	}
	cr.Rule = repair.RuleID(c.Repo, c.Version, res.Culprits)
	return cr
}

// repairCase is one env (repo and version) to repair, with what the steps
// need.
type repairCase struct {
	repair.Case
	// platforms are every platform the night builds the case's instances
	// (Case.Instances) on; stepPlatforms and stepInstances those that
	// failed tonight (each step builds these).
	platforms, stepPlatforms []core.Platform
	stepInstances            []string
	// frozen is the directory of last night's env documents (--freeze).
	frozen string
	// result is set when the case is decided without a rebuild, err when
	// it cannot be bisected.
	result  *repair.Result
	err     string
	envRecs []core.Image
}

// findCases reads tonight's failures that passed last night, groups them
// by env (repo and version), and diffs each env's documents against last
// night's.
func findCases(ctx context.Context, o RepairOptions, log io.Writer) ([]*repairCase, error) {
	loaded, err := Load(ctx, o.Build.Inputs)
	if loaded == nil {
		return nil, err
	}
	if err != nil {
		fmt.Fprintf(log, "repair: %v\n", err)
	}
	cases := o.groupCases(loaded.Instances, log)
	for _, c := range cases {
		o.coverCase(c)
		if c.err != "" || c.result != nil {
			continue
		}
		if err := o.diffCase(ctx, c); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			c.err = err.Error()
		}
	}
	return cases, nil
}

// groupCases groups tonight's gold failures of instances last night
// verified and tonight rebuilt by env (repo and version), in the order of
// their repo and version.
func (o RepairOptions) groupCases(instances []core.Instance, log io.Writer) []*repairCase {
	insts := map[string]core.Instance{}
	for _, in := range instances {
		insts[in.InstanceID] = in
	}
	targets := map[ci.Key]ci.Target{}
	for _, in := range o.Plan.Instances {
		for _, t := range in.Targets {
			targets[ci.Key{InstanceID: in.InstanceID, Platform: t.Platform}] = t
		}
	}
	envPlan := map[ci.EnvKey]ci.EnvTarget{}
	for _, e := range o.Plan.Envs {
		envPlan[ci.EnvKey{Key: e.Key, Platform: e.Platform}] = e
	}
	byCase := map[string]*repairCase{}
	for _, g := range o.Gold {
		t, ok := targets[ci.Key{InstanceID: g.InstanceID, Platform: g.Platform}]
		if !ok || !regressed(g, t) {
			continue
		}
		in, ok := insts[g.InstanceID]
		if !ok {
			fmt.Fprintf(log, "repair: %s is not in the dataset: skipped\n", g.InstanceID)
			continue
		}
		name := in.Repo + "\x00" + in.Version
		c := byCase[name]
		if c == nil {
			c = &repairCase{Case: repair.Case{Repo: in.Repo, Version: in.Version}}
			byCase[name] = c
		}
		c.addFailure(g, t, envPlan)
	}
	var cases []*repairCase
	for _, name := range slices.Sorted(maps.Keys(byCase)) {
		cases = append(cases, byCase[name])
	}
	return cases
}

// regressed reports whether gold result g is a failure of its tests (or a
// timeout) of an instance target t rebuilt tonight that passed before.
func regressed(g verify.Result, t ci.Target) bool {
	return g.Mode == verify.ModeGold && !g.OK() && (g.Failure == verify.FailureTests || g.Failure == verify.FailureTimeout) &&
		t.Action == ci.ActionBuild && t.PreviouslyVerified
}

// addFailure adds gold failure g of instance target t to the case, with the
// env t is built FROM; a case whose env has no env stage (an id list) or
// was not rebuilt tonight is decided without a rebuild.
func (c *repairCase) addFailure(g verify.Result, t ci.Target, envPlan map[ci.EnvKey]ci.EnvTarget) {
	c.Tonight.Failures = append(c.Tonight.Failures, repair.Failure{InstanceID: g.InstanceID, Platform: g.Platform,
		Tests: failingTests(g), Error: g.Why()})
	if !slices.Contains(c.stepPlatforms, g.Platform) {
		c.stepPlatforms = append(c.stepPlatforms, g.Platform)
	}
	if !slices.Contains(c.stepInstances, g.InstanceID) {
		c.stepInstances = append(c.stepInstances, g.InstanceID)
	}
	env := ci.EnvKey{Key: t.Env, Platform: g.Platform}
	switch e, ok := envPlan[env]; {
	case t.Env == "":
		c.err = "the night has no env stage for it (an id list): nothing to compare with last night's"
	case !ok || e.Action != ci.ActionBuild:
		c.result = &repair.Result{Verdict: repair.VerdictOutside, Changed: []repair.Change{}, Steps: []repair.Tried{},
			Reason: "its env was not rebuilt tonight (reused from an earlier night): the cause is outside the package lists"}
	}
	if !slices.ContainsFunc(c.Envs, func(e repair.EnvImage) bool { return e.Tonight == t.Env && e.Platform == g.Platform }) {
		c.Envs = append(c.Envs, repair.EnvImage{Platform: g.Platform, Tonight: t.Env})
	}
}

// coverCase sorts the case's failures, names its frozen directory, and
// gives it every instance the night builds FROM its envs (each step
// rebuilds them) and the platforms they are built on.
func (o RepairOptions) coverCase(c *repairCase) {
	slices.SortFunc(c.Tonight.Failures, func(a, b repair.Failure) int {
		return cmp.Or(cmp.Compare(a.InstanceID, b.InstanceID), a.Platform.Compare(b.Platform))
	})
	slices.SortFunc(c.stepPlatforms, core.Platform.Compare)
	slices.Sort(c.stepInstances)
	c.frozen = filepath.Join(o.Out, "frozen", caseSlug(c.Case))
	for _, in := range o.Plan.Instances {
		for _, t := range in.Targets {
			if t.Action != ci.ActionBuild || !slices.ContainsFunc(c.Envs, func(e repair.EnvImage) bool { return e.Tonight == t.Env }) {
				continue
			}
			if !slices.Contains(c.Instances, in.InstanceID) {
				c.Instances = append(c.Instances, in.InstanceID)
			}
			if !slices.Contains(c.platforms, t.Platform) {
				c.platforms = append(c.platforms, t.Platform)
			}
		}
	}
	slices.Sort(c.Instances)
	slices.SortFunc(c.platforms, core.Platform.Compare)
}

// diffCase fills c's env images, changes and drift lines from tonight's and
// last night's env documents, and saves last night's for the frozen step.
func (o RepairOptions) diffCase(ctx context.Context, c *repairCase) error {
	tonight := ci.LatestEnvs(o.EnvsTonight)
	before := ci.LatestEnvs(okRecords(o.EnvsBefore))
	type change struct{ eco, name, from, to string }
	found := map[change]*repair.Change{}
	lines := map[change][]string{}
	var order []change
	var lastDocs []drift.Target
	for i := range c.Envs {
		e := &c.Envs[i]
		rec, ok := tonight[ci.EnvKey{Key: e.Tonight, Platform: e.Platform}]
		if !ok || !rec.OK() {
			return fmt.Errorf("env %s (%s): no record of tonight's build", e.Tonight, e.Platform)
		}
		b, err := o.fetchOne(ctx, rec, "")
		if err != nil {
			return err
		}
		e.TonightAt = rec.Ref
		last, ok := before[ci.EnvKey{Key: e.Tonight, Platform: e.Platform}]
		var a *drift.Image
		if ok {
			if a, err = o.fetchOne(ctx, last, ""); err != nil {
				return err
			}
		} else if b.Doc != nil {
			// Another key (tonight's env script differs): last night's
			// env of the same repo, version and platform.
			if a, last, err = o.lastByRepo(ctx, before, b.Doc); err != nil {
				return err
			}
		}
		if a == nil || a.Doc == nil || b.Doc == nil {
			return fmt.Errorf("env %s (%s): no environment document of last night's env image and tonight's to compare", e.Tonight, e.Platform)
		}
		e.LastNight, e.LastAt = strings.TrimSuffix(last.Key, ":latest"), last.Ref
		t, err := targetOf(last)
		if err != nil {
			return err
		}
		lastDocs = append(lastDocs, t)
		urls := urlPackages(a.Doc, b.Doc)
		for _, d := range drift.Diff(a.Doc.Packages, b.Doc.Packages) {
			k := change{d.Ecosystem, d.Name, d.From, d.To}
			ch := found[k]
			if ch == nil {
				ch = &repair.Change{Ecosystem: d.Ecosystem, Name: d.Name, From: d.From, To: d.To, URL: urls[d.Key]}
				found[k] = ch
				order = append(order, k)
			}
			ch.Platforms = append(ch.Platforms, e.Platform)
			lines[k] = append(lines[k], "env "+strings.TrimSuffix(e.Tonight, ":latest")+" "+e.Platform.String())
		}
	}
	for _, k := range order {
		ch := found[k]
		slices.SortFunc(ch.Platforms, core.Platform.Compare)
		ch.Platforms = slices.Compact(ch.Platforms)
		c.Changes = append(c.Changes, *ch)
		c.Drift = append(c.Drift, ch.String()+" ("+strings.Join(lines[k], ", ")+")")
	}
	slices.Sort(c.Drift)
	f := &drift.Fetcher{Reader: o.Reader, Save: c.frozen}
	if err := os.MkdirAll(c.frozen, 0o755); err != nil {
		return fmt.Errorf("saving last night's documents: %w", err)
	}
	if _, err := f.Fetch(ctx, lastDocs); err != nil {
		return fmt.Errorf("saving last night's documents: %w", err)
	}
	return nil
}

// urlPackages are the packages installed from a URL or a directory in
// either document (by sbom.Package.Key).
func urlPackages(a, b *sbom.Document) map[string]bool {
	out := map[string]bool{}
	for _, d := range []*sbom.Document{a, b} {
		for _, p := range d.Packages {
			if p.URL != "" && p.Ecosystem == sbom.PyPI {
				out[p.Key()] = true
			}
		}
	}
	return out
}

func okRecords(recs []core.Image) []core.Image {
	var out []core.Image
	for _, r := range recs {
		if r.OK() && strings.Contains(r.Ref, "@") {
			out = append(out, r)
		}
	}
	return out
}

// targetOf is the drift target of one env record.
func targetOf(rec core.Image) (drift.Target, error) {
	ts, err := drift.TargetsFromRecords("the env records", []core.Image{rec})
	if err != nil {
		return drift.Target{}, err
	}
	if len(ts) != 1 {
		return drift.Target{}, fmt.Errorf("env %s (%s): not a successful record", rec.Key, rec.Platform)
	}
	return ts[0], nil
}

func (o RepairOptions) fetchOne(ctx context.Context, rec core.Image, save string) (*drift.Image, error) {
	t, err := targetOf(rec)
	if err != nil {
		return nil, err
	}
	f := &drift.Fetcher{Reader: o.Reader, Save: save}
	imgs, err := f.Fetch(ctx, []drift.Target{t})
	if err != nil {
		return nil, fmt.Errorf("reading the environment document of %s (%s): %w", rec.Key, rec.Platform, err)
	}
	return &imgs[0], nil
}

// lastByRepo reads last night's env documents of doc's platform and picks
// the one of the same repo and version, the latest record first.
func (o RepairOptions) lastByRepo(ctx context.Context, before map[ci.EnvKey]core.Image, doc *sbom.Document) (*drift.Image, core.Image, error) {
	var recs []core.Image
	for k, r := range before {
		if k.Platform == doc.Platform {
			recs = append(recs, r)
		}
	}
	slices.SortFunc(recs, func(a, b core.Image) int { return cmp.Compare(b.Time, a.Time) })
	for _, r := range recs {
		img, err := o.fetchOne(ctx, r, "")
		if err != nil {
			return nil, core.Image{}, err
		}
		if img.Doc != nil && img.Doc.Repo == doc.Repo && img.Doc.Version == doc.Version {
			return img, r, nil
		}
	}
	return nil, core.Image{}, nil
}

// failingTests are the labelled tests a gold result failed, from the
// report.json of its run.
func failingTests(r verify.Result) []string {
	dirs := []string{r.Dir}
	for _, a := range r.Runs {
		dirs = append(dirs, a.Dir)
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(d, "report.json"))
		if err != nil {
			continue
		}
		var rep map[string]struct {
			TestsStatus map[string]struct {
				Failure []string `json:"failure"`
			} `json:"tests_status"`
		}
		if json.Unmarshal(raw, &rep) != nil {
			continue
		}
		var out []string
		for _, v := range rep {
			for _, b := range []string{"FAIL_TO_PASS", "PASS_TO_PASS"} {
				out = append(out, v.TestsStatus[b].Failure...)
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return nil
}

// stepOracle is the real oracle: each step builds the case's envs once per
// platform and pushes them (with their bases, as an env job does), then the
// case's instances FROM them with gold verified, as a night's shards do, so
// the records carry the spec keys a later night computes for them.
type stepOracle struct {
	o       RepairOptions
	c       *repairCase
	log     io.Writer
	n       int
	records map[string][]core.Image
}

func stepID(s repair.Step) string {
	raw, _ := json.Marshal(s)
	return string(raw)
}

func (so *stepOracle) Try(ctx context.Context, s repair.Step) (repair.Outcome, error) {
	so.n++
	out, recs, err := so.build(ctx, s, so.c.stepInstances, so.c.stepPlatforms, fmt.Sprintf("%02d", so.n))
	so.records[stepID(s)] = recs
	return out, err
}

// build builds step s of the case for the instances ids on platforms, under
// steps/<case>/<name>.
func (so *stepOracle) build(ctx context.Context, s repair.Step, ids []string, platforms []core.Platform, name string) (repair.Outcome, []core.Image, error) {
	start := time.Now()
	dir, err := filepath.Abs(filepath.Join(so.o.Out, "steps", caseSlug(so.c.Case), name))
	if err != nil {
		return repair.Outcome{}, nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return repair.Outcome{}, nil, fmt.Errorf("step directory: %w", err)
	}
	in := so.o.Build.Inputs
	in.Instances = ids
	if in.Pins == "" {
		in.Pins = "default"
	}
	if s.Frozen {
		in.Freeze = so.c.frozen
	} else {
		spec := repair.HoldSpec(so.c.Repo, so.c.Version, s.Held)
		spec.Reason = "a bisection step of night " + so.o.Night
		spec.Evidence = s.Label()
		raw, err := pins.File{Schema: pins.FileSchema, Rules: []pins.FileRule{{HoldSpec: spec}}}.Encode()
		if err != nil {
			return repair.Outcome{}, nil, err
		}
		path := filepath.Join(dir, "pins.json")
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			return repair.Outcome{}, nil, fmt.Errorf("step pins: %w", err)
		}
		in.Pins += "," + path
	}
	fmt.Fprintf(so.log, "repair: %s: step %s: %s, %s on %s (pins %s)\n", so.c.Name(), name, s.Label(), strings.Join(ids, ", "), platformList(platforms), in.Pins)
	keys, planned, err := stepEnvKeys(ctx, in, platforms)
	if err != nil {
		return repair.Outcome{}, nil, err
	}
	var recs []core.Image
	bound := map[string]string{}
	envFail := map[core.Platform]string{}
	for _, p := range platforms {
		bo := so.o.Build
		bo.Inputs, bo.Platforms, bo.MetadataFile, bo.Verify, bo.Publish = in, []core.Platform{p}, filepath.Join(dir, "envs-"+p.Slug()+".jsonl"), nil, nil
		bo.Builder.RunDir = filepath.Join(dir, "envs-"+p.Slug())
		bo.Builder.Images = nil
		bo.Out, bo.Log = so.log, so.log
		rep, err := BuildEnvs(ctx, bo, keys[p])
		if ctx.Err() != nil {
			return repair.Outcome{}, nil, ctx.Err()
		}
		if rep == nil {
			return repair.Outcome{}, nil, fmt.Errorf("env stage on %s: %w", p, err)
		}
		for _, r := range rep.Records() {
			recs = append(recs, r)
			if r.Kind == core.KindEnv {
				if r.OK() && r.Ref != "" {
					bound[r.Key] = r.Ref
				} else {
					envFail[p] = "env " + r.Key + " did not build: " + r.Error
				}
			}
		}
	}
	var ok []core.Platform
	for _, p := range platforms {
		if envFail[p] == "" {
			ok = append(ok, p)
		}
	}
	var gold []verify.Result
	if len(ok) > 0 {
		bo := so.o.Build
		bo.Inputs, bo.Platforms, bo.MetadataFile, bo.Publish = in, ok, filepath.Join(dir, "instances.jsonl"), nil
		bo.Builder.RunDir = filepath.Join(dir, "instances")
		bo.Builder.Images = bound
		bo.Out, bo.Log = so.log, so.log
		res, err := Build(ctx, bo)
		if ctx.Err() != nil {
			return repair.Outcome{}, nil, ctx.Err()
		}
		if res == nil {
			return repair.Outcome{}, nil, fmt.Errorf("building the instances: %w", err)
		}
		if err != nil {
			fmt.Fprintf(so.log, "repair: %s: step %s: %v\n", so.c.Name(), name, err)
		}
		for _, r := range res.Records {
			if r.Kind == core.KindInstance {
				recs = append(recs, r)
			}
		}
		if res.Gold != nil {
			gold = res.Gold.Summary().Results
		}
	}
	out := stepOutcome(ids, platforms, planned, recs, gold, envFail)
	out.Seconds = time.Since(start).Seconds()
	fmt.Fprintf(so.log, "repair: %s: step %s: %s (%.0f s)\n", so.c.Name(), name, map[bool]string{true: "gold passes", false: fmt.Sprintf("gold fails on %d image(s)", len(out.Failures))}[out.Pass], out.Seconds)
	return out, recs, nil
}

// stepEnvKeys are the env keys the case's instances build FROM under in,
// per platform, and the instance images the same plan has (planned).
func stepEnvKeys(ctx context.Context, in Inputs, platforms []core.Platform) (map[core.Platform][]string, map[ci.Key]bool, error) {
	loaded, err := Load(ctx, in)
	if loaded == nil {
		return nil, nil, err
	}
	p, err := plan.Build(ctx, loaded.Renderer, loaded.Instances, platforms)
	if err != nil {
		return nil, nil, err
	}
	out, planned := map[core.Platform][]string{}, map[ci.Key]bool{}
	for _, pp := range p.Platforms {
		for _, n := range pp.Nodes {
			switch n.Kind {
			case graph.KindEnv:
				out[pp.Platform] = append(out[pp.Platform], n.Key)
			case graph.KindInstance:
				for _, id := range n.Instances {
					planned[ci.Key{InstanceID: id, Platform: pp.Platform}] = true
				}
			}
		}
	}
	for _, pl := range platforms {
		if len(out[pl]) == 0 {
			return nil, nil, fmt.Errorf("the plan of %v has no env image on %s", in.Instances, pl)
		}
	}
	return out, planned, nil
}

// stepOutcome: the step passes when every instance image of the case on
// every platform built was verified. planned are the instance images the
// step's plan has (an x86-only instance has none on arm64, so a failed
// arm64 env is not its failure).
func stepOutcome(ids []string, platforms []core.Platform, planned map[ci.Key]bool, recs []core.Image, gold []verify.Result, envFail map[core.Platform]string) repair.Outcome {
	latest := ci.Latest(recs)
	results := map[ci.Key]verify.Result{}
	for _, g := range gold {
		if g.Mode == verify.ModeGold {
			results[ci.Key{InstanceID: g.InstanceID, Platform: g.Platform}] = g
		}
	}
	out := repair.Outcome{Pass: true}
	for _, p := range platforms {
		for _, id := range ids {
			k := ci.Key{InstanceID: id, Platform: p}
			r, built := latest[k]
			g, ran := results[k]
			if !built && (envFail[p] == "" || !planned[k]) {
				continue // not an image of this platform (x86-only)
			}
			if built && ci.Usable(r) && (!ran || g.OK()) {
				continue
			}
			f := repair.Failure{InstanceID: id, Platform: p}
			switch {
			case envFail[p] != "":
				f.Error = envFail[p]
			case ran:
				f.Tests, f.Error = failingTests(g), g.Why()
			default:
				f.Error = r.Error
			}
			out.Pass = false
			out.Failures = append(out.Failures, f)
		}
	}
	return out
}

func caseSlug(c repair.Case) string {
	return strings.TrimPrefix(repair.RuleID(c.Repo, c.Version, nil), "repair-")
}

func platformList(ps []core.Platform) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	return strings.Join(s, ", ")
}

func changeList(cs []repair.Change) string {
	var s []string
	for _, c := range cs {
		s = append(s, c.String())
	}
	return strings.Join(s, ", ")
}

// ReadGold reads the gold results of tonight's shards: every verification
// summary (verify/summary.json, as `build --verify` writes it in its run
// directory) under paths (files or directories), in name order.
func ReadGold(paths []string) ([]verify.Result, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("reading gold results: %w", err)
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		err = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && d.Name() == "summary.json" && filepath.Base(filepath.Dir(path)) == "verify" {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("reading gold results: %w", err)
		}
	}
	slices.Sort(files)
	var out []verify.Result
	for _, f := range files {
		s, err := verify.ReadSummary(f)
		if err != nil {
			return nil, err
		}
		for _, r := range s.Results {
			r.Dir = rebase(f, r.Dir)
			for i := range r.Runs {
				r.Runs[i].Dir = rebase(f, r.Runs[i].Dir)
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// rebase finds a run directory a summary names where the summary is now:
// a shard's run directory moves when the nightly's merge downloads it.
func rebase(summary, dir string) string {
	if dir == "" {
		return dir
	}
	if _, err := os.Stat(dir); err == nil {
		return dir
	}
	slash := filepath.ToSlash(dir)
	if i := strings.LastIndex(slash, "/verify/"); i >= 0 {
		moved := filepath.Join(filepath.Dir(summary), filepath.FromSlash(slash[i+len("/verify/"):]))
		if _, err := os.Stat(moved); err == nil {
			return moved
		}
	}
	return dir
}
