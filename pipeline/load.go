package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/builder/render/taskwrite"
	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/dataset"
	"github.com/swebuild/swebuild/dataset/hub"
	"github.com/swebuild/swebuild/envfile"
	"github.com/swebuild/swebuild/fetch"
	"github.com/swebuild/swebuild/pins"
	"github.com/swebuild/swebuild/taskrepo"
	"github.com/swebuild/swebuild/verify"
)

// Inputs say what to generate from: the dataset, which of its instances,
// the extra spec profiles and the pin set.
type Inputs struct {
	// Dataset is a file (JSONL, JSON array, parquet) or a hub dataset
	// NAME[@REVISION][:SPLIT] (see dataset.Open).
	Dataset string
	// TaskRepo is an upstream v5 task repo directory (sweb.yaml +
	// tasks/<id>/), read instead of Dataset (see taskrepo.Open): its tasks
	// of the published splits, or Instances by id from any split.
	TaskRepo string
	// Instances selects instance ids (empty: all).
	Instances []string
	// NotRendered says the records are only looked up, graded or named,
	// never rendered (grade, sizes): a dataset's repos and versions are
	// then not checked against the spec tables.
	NotRendered bool
	// Specs is an extra specs file with data-defined profiles (the
	// offline fixture's testdata/fixture/specs.json); empty: none.
	Specs string
	// Pins selects the pin rules (pins.Parse): "none", "default",
	// "default,-ID", "ID,ID"; -ID of an x86-only rule lifts it.
	Pins string
	// Freeze is a directory of captured environment documents (`swebuild
	// drift --save DIR`); when set, the frozen rule (pins.Frozen) renders
	// each env that has one to install what it had. Empty: no freeze.
	Freeze string
	// SpecsVersion names the upstream tables: spec.VersionV410 ("4.1.0",
	// also "") or spec.VersionFinal ("final", upstream 2514c86).
	SpecsVersion string
	// CacheDir holds downloads: hub datasets under hub/, requirements and
	// environment files under http/ (required).
	CacheDir string
	// Offline never downloads: what is not cached fails, naming it.
	Offline bool
	// Hub is where hub datasets come from.
	Hub HubOptions
	// Log receives download progress and the list of invalid records.
	Log io.Writer
}

// HubOptions configure the dataset hub client.
type HubOptions struct {
	// Endpoint is the hub's base URL (empty: the public hub).
	Endpoint string
	// Token is sent to the hub (never to the CDN it redirects to).
	Token string
}

// Loaded is one input, read: the renderer (tables, profiles, pins, the
// downloader for requirements files), the selected records and where they
// came from. A dataset and a task repo both fill it; what differs between
// them is decided once, by Load, behind its methods (Decide, Plan, Targets,
// WriteFiles, ExportTasks, Select), so no caller asks which kind it has.
type Loaded struct {
	Renderer  *render.Renderer
	Instances []core.Instance
	// Source is the dataset file, NAME@COMMIT:SPLIT for a hub dataset, or
	// the task repo's directory (core.Image.Dataset).
	Source dataset.Source
	// Fetch is the renderer's downloader of requirements.txt and
	// environment.yml (Fetch.Unreachable: what could not be fetched for want
	// of a network).
	Fetch *fetch.Client
	// kind is the input's kind, chosen by Load.
	kind inputKind
}

// inputKind is what differs between the two inputs a command takes, a
// dataset (records rendered from the spec tables) and an upstream v5 task
// repo (a flat Dockerfile, eval.sh and task directory per record).
type inputKind interface {
	// decide is one record's platforms (amd64 first) and, when it gets no
	// linux/arm64, why.
	decide(l *Loaded, inst *core.Instance) spec.Decision
	// plan plans the selected records for platforms.
	plan(ctx context.Context, l *Loaded, platforms []core.Platform) (*Plan, error)
	// writeFiles writes each record's Dockerfiles and scripts (render --out).
	writeFiles(ctx context.Context, l *Loaded, o FilesOptions) (written, wanted int, failed []*render.InstanceError)
	// exportTasks writes the records as a task repo (render --task-repo-out).
	exportTasks(ctx context.Context, l *Loaded, o taskwrite.Options) (int, []*render.InstanceError)
	// keep narrows the kind's own state to the records selected.
	keep(insts []core.Instance) error
}

// Given reports whether an input is named (a dataset or a task repo).
func (in Inputs) Given() bool { return in.Dataset != "" || in.TaskRepo != "" }

// ErrNoDataset is returned by Load when neither Inputs.Dataset nor
// Inputs.TaskRepo is set.
var ErrNoDataset = errors.New("no dataset or task repo given")

// Load reads the spec tables, the extra profiles, the pins and the input,
// and selects the instances. A dataset with invalid records gives the valid
// ones and an error naming how many were invalid (each is listed to
// in.Log); any other problem gives a nil *Loaded.
//
// With Inputs.TaskRepo, the task repo is opened and checked instead: its
// problems are listed to in.Log, the tasks with none go on, and the error
// says how many tasks were left out.
func Load(ctx context.Context, in Inputs) (*Loaded, error) {
	if !in.Given() {
		return nil, ErrNoDataset
	}
	if in.Dataset != "" && in.TaskRepo != "" {
		return nil, errors.New("a dataset and a task repo given: use one")
	}
	log := in.Log
	if log == nil {
		log = io.Discard
	}
	r, client, err := newRenderer(ctx, in, log)
	if err != nil {
		return nil, err
	}
	var l *Loaded
	if in.TaskRepo != "" {
		l, err = loadTaskRepo(in, r, client, log)
	} else {
		l, err = loadDataset(ctx, in, r, client, log)
	}
	if l == nil || in.NotRendered {
		return l, err
	}
	if rerr := resolveFiles(ctx, client, r, l.Instances); rerr != nil {
		return nil, rerr
	}
	return l, err
}

// newRenderer reads the spec tables, the extra profiles, the pins and the
// frozen environments, and makes the downloader of the requirements files
// Load resolves for it (resolveFiles).
func newRenderer(ctx context.Context, in Inputs, log io.Writer) (*render.Renderer, *fetch.Client, error) {
	tables, err := spec.LoadVersion(in.SpecsVersion)
	if err != nil {
		return nil, nil, err
	}
	if in.Specs != "" {
		if err := tables.LoadExtra(in.Specs); err != nil {
			return nil, nil, err
		}
	}
	set, err := pins.Parse(in.Pins)
	if err != nil {
		return nil, nil, fmt.Errorf("pin set: %w", err)
	}
	if err := tables.LiftX86Rules(set.LiftedX86()...); err != nil {
		return nil, nil, fmt.Errorf("pin set: %w", err)
	}
	if in.Freeze != "" {
		docs, err := pins.ReadFrozen(ctx, in.Freeze)
		if err != nil {
			return nil, nil, err
		}
		rule, err := pins.Frozen(docs)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", in.Freeze, err)
		}
		for _, w := range pins.FrozenWarnings(docs) {
			fmt.Fprintln(log, "warning: "+w)
		}
		set = set.With(rule)
	}
	if in.CacheDir == "" {
		return nil, nil, errors.New("no cache directory given (downloads are cached there)")
	}
	client, err := fetch.New(fetch.Options{CacheDir: filepath.Join(in.CacheDir, "http"), Offline: in.Offline, Log: in.Log})
	if err != nil {
		return nil, nil, fmt.Errorf("setting up downloads: %w", err)
	}
	return &render.Renderer{Tables: tables, Pins: set}, client, nil
}

// loadDataset is Load of in.Dataset.
func loadDataset(ctx context.Context, in Inputs, r *render.Renderer, client *fetch.Client, log io.Writer) (*Loaded, error) {
	hc, err := hub.New(hub.Options{Endpoint: in.Hub.Endpoint, Token: in.Hub.Token, CacheDir: filepath.Join(in.CacheDir, "hub"), Offline: in.Offline, Log: log})
	if err != nil {
		return nil, fmt.Errorf("dataset hub: %w", err)
	}
	opts := dataset.OpenOptions{Hub: hc}
	if !in.NotRendered {
		opts.Known = r.Tables
	}
	insts, src, loadErr := dataset.Open(ctx, in.Dataset, opts)
	var verr *dataset.ValidationError
	if loadErr != nil && !errors.As(loadErr, &verr) {
		return nil, loadErr
	}
	if verr != nil {
		fmt.Fprintln(log, verr.Error())
	}
	insts, err = dataset.Select(insts, in.Instances)
	if err != nil {
		return nil, err
	}
	l := &Loaded{Renderer: r, Instances: insts, Source: src, Fetch: client, kind: datasetKind{}}
	if verr != nil {
		return l, fmt.Errorf("%s: %d invalid record(s)", src, verr.Records())
	}
	return l, nil
}

// loadTaskRepo is Load of in.TaskRepo.
func loadTaskRepo(in Inputs, r *render.Renderer, client *fetch.Client, log io.Writer) (*Loaded, error) {
	repo, checkErr := taskrepo.Open(in.TaskRepo)
	if repo == nil {
		return nil, checkErr
	}
	for _, w := range repo.Warnings {
		fmt.Fprintln(log, w.Error())
	}
	if checkErr != nil {
		fmt.Fprintln(log, checkErr.Error())
	}
	tasks, err := repo.Select(in.Instances)
	if err != nil && len(tasks) == 0 {
		return nil, errors.Join(checkErr, err)
	}
	kind := &taskKind{dir: repo.Dir}
	kind.set(tasks, r)
	l := &Loaded{Renderer: r, Instances: taskrepo.Instances(tasks), Source: dataset.Source{Name: repo.Dir}, Fetch: client, kind: kind}
	var errs []error
	if checkErr != nil {
		errs = append(errs, fmt.Errorf("task repo %s: %d task(s) left out for problems", repo.Dir, len(repo.Invalid)))
	}
	return l, errors.Join(append(errs, err)...)
}

// Decide is the platform decision of inst, one of the loaded records: its
// platforms (amd64 first) and, when it gets no linux/arm64, why. A
// dataset's records are decided by the spec tables (USE_X86, a --specs
// x86_only list, the x86-only rules); a task repo's by its task.yaml
// (x86_only) and the arm64 rules for flat Dockerfiles.
func (l *Loaded) Decide(inst *core.Instance) spec.Decision {
	return l.kind.decide(l, inst)
}

// PlatformsByID is Decide's platforms by instance id, for callers keyed by
// id (ci); an id not loaded gets none.
func (l *Loaded) PlatformsByID() func(id string) []core.Platform {
	byID := make(map[string]*core.Instance, len(l.Instances))
	for i := range l.Instances {
		byID[l.Instances[i].InstanceID] = &l.Instances[i]
	}
	return func(id string) []core.Platform {
		if in := byID[id]; in != nil {
			return l.Decide(in).Platforms
		}
		return nil
	}
}

// PlatformsOf is Decide's platforms, as check and drift take them.
func (l *Loaded) PlatformsOf() func(*core.Instance) []core.Platform {
	return func(in *core.Instance) []core.Platform { return l.Decide(in).Platforms }
}

// Plan plans the loaded records for platforms: each record's platforms of
// those asked and why it gets no linux/arm64, the build nodes, and the
// input's own report (the base/env/instance graph of a dataset, the tasks
// of a task repo).
func (l *Loaded) Plan(ctx context.Context, platforms []core.Platform) (*Plan, error) {
	return l.kind.plan(ctx, l, platforms)
}

// FilesOptions say where and how `render --out` writes.
type FilesOptions struct {
	Platforms []core.Platform
	Out       string
	// Jobs renders this many records at once (0: 4 per CPU).
	Jobs int
	// Layout is a dataset's layout (layered or flat); a task repo's record
	// has its one flat Dockerfile.
	Layout render.Layout
}

// WriteFiles writes the Dockerfiles and scripts of every record and
// platform under o.Out/<instance_id>/<arch>/ and says how many (record,
// platform) pairs it wrote of those it meant to.
func (l *Loaded) WriteFiles(ctx context.Context, o FilesOptions) (written, wanted int, failed []*render.InstanceError) {
	return l.kind.writeFiles(ctx, l, o)
}

// ExportTasks writes the loaded records as an upstream v5 task repo
// (taskwrite.Write), each task.yaml with the record's other columns and
// its platform decision.
func (l *Loaded) ExportTasks(ctx context.Context, o taskwrite.Options) (int, []*render.InstanceError) {
	return l.kind.exportTasks(ctx, l, o)
}

// Targets are the verify targets of the loaded instances on platforms (all
// when empty), each of the platforms Decide gives it (their images named by images; nil for
// the builder's gold check), with the eval script script chooses
// (verify.ScriptDataset or ScriptGenerated, as verify.NewTarget takes it): a
// record's own eval_script and log_parser (a task's eval.sh) when it has
// them, else the eval.sh rendered from the tables.
func (l *Loaded) Targets(ctx context.Context, platforms []core.Platform, images verify.ImageFunc, script string) ([]verify.Target, []error) {
	var out []verify.Target
	var errs []error
	for i := range l.Instances {
		inst := l.Instances[i]
		for _, p := range l.Decide(&inst).Platforms {
			if len(platforms) > 0 && !slices.Contains(platforms, p) {
				continue
			}
			t, err := verify.NewTarget(ctx, l.Renderer, inst, p, script)
			if err == nil && images != nil {
				t.Image, err = images(inst.InstanceID, p)
				if errors.Is(err, verify.ErrImageAbsent) {
					// Its own result (verify.FailureImageAbsent), not an error.
					t.Absent, err = err.Error(), nil
				}
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s (%s): %w", inst.InstanceID, p, err))
				continue
			}
			out = append(out, t)
		}
	}
	return out, errs
}

// loadKeepGoing is Load for a stage that goes on with the valid records:
// invalid ones are the first problem, anything else is the error.
func loadKeepGoing(ctx context.Context, in Inputs, log io.Writer) (*Loaded, []error, error) {
	in.Log = log
	loaded, err := Load(ctx, in)
	if loaded == nil {
		return nil, nil, err
	}
	if err != nil {
		return loaded, []error{err}, nil
	}
	return loaded, nil, nil
}

// resolveFiles downloads, before anything is rendered, the repository
// files the env scripts of insts embed (render.Renderer.Needs: requirements.txt
// and environment.yml at environment_setup_commit, on either platform),
// each once and a few at a time, and hands them to r. A file that cannot be
// had is kept with its error, which rendering then reports for each
// instance that needs it; the others go on. Only a cancelled ctx is an
// error here.
func resolveFiles(ctx context.Context, client *fetch.Client, r *render.Renderer, insts []core.Instance) error {
	needs := r.Needs(insts, core.AllPlatforms())
	got := make([]render.Resolved, len(needs))
	src := fetcher{client}
	repl := envfile.Replacements(r.Tables.ReplaceReqPackages)
	var g errgroup.Group
	g.SetLimit(4)
	for i, n := range needs {
		g.Go(func() error {
			res := &got[i]
			if n.Name == render.FileRequirements {
				res.Text, res.Err = envfile.GetRequirements(ctx, src, n.Repo, n.Commit, n.Paths, repl)
			} else {
				res.Text, res.Err = envfile.GetEnvironmentYML(ctx, src, n.Repo, n.Commit, n.Paths, render.EnvName, repl)
			}
			return nil
		})
	}
	g.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	r.RepoFiles = make(render.RepoFiles, len(needs))
	for i, n := range needs {
		r.RepoFiles[n.RepoFile] = got[i]
	}
	return nil
}

// fetcher is the fetch client as the envfile.Source of resolveFiles: like
// upstream, any final non-200 answer means "try the next candidate path".
type fetcher struct{ c *fetch.Client }

func (f fetcher) Fetch(ctx context.Context, url string) (string, bool, error) {
	b, err := f.c.Get(ctx, url)
	var he *fetch.HTTPError
	if errors.As(err, &he) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return envfile.DecodeText(b), true, nil
}

// Select keeps the loaded instances with those ids, in loaded order (all
// when ids is empty; an id not loaded is an error: dataset.Select), and
// narrows the input to them, so that Targets and Plan see the same
// selection as Instances.
func (l *Loaded) Select(ids []string) error {
	insts, err := dataset.Select(l.Instances, ids)
	if err != nil {
		return err
	}
	if err := l.kind.keep(insts); err != nil {
		return err
	}
	l.Instances = insts
	return nil
}
