package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/dataset"
	"github.com/swebuild/swebuild/dataset/hub"
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

// Loaded is what Load read: the renderer (tables, profiles, pins, the
// downloader for requirements files), the selected instances and where
// they came from.
type Loaded struct {
	Renderer  *render.Renderer
	Instances []core.Instance
	// Tasks are the selected tasks of a task repo (Inputs.TaskRepo), in
	// the order of Instances (one per instance); nil for a dataset.
	Tasks []taskrepo.Task
	// Source is the dataset file, or NAME@COMMIT:SPLIT for a hub dataset
	// (core.Image.Dataset).
	Source dataset.Source
	// Fetch is the renderer's downloader of requirements.txt and
	// environment.yml (Fetch.Unreachable: what could not be fetched for want
	// of a network).
	Fetch *fetch.Client
}

// ErrNoDataset is returned by Load when neither Inputs.Dataset nor
// Inputs.TaskRepo is set.
var ErrNoDataset = errors.New("no dataset or task repo given")

// Load reads the spec tables, the extra profiles, the pins and the dataset,
// and selects the instances. A dataset with invalid records gives the valid
// ones and an error naming how many were invalid (each is listed to
// in.Log); any other problem gives a nil *Loaded.
//
// With Inputs.TaskRepo, the task repo is opened and checked instead: its
// problems are listed to in.Log, the tasks with none go on (Tasks), and the
// error says how many tasks were left out.
func Load(ctx context.Context, in Inputs) (*Loaded, error) {
	if in.Dataset == "" && in.TaskRepo == "" {
		return nil, ErrNoDataset
	}
	if in.Dataset != "" && in.TaskRepo != "" {
		return nil, errors.New("a dataset and a task repo given: use one")
	}
	log := in.Log
	if log == nil {
		log = io.Discard
	}
	tables, err := spec.LoadVersion(in.SpecsVersion)
	if err != nil {
		return nil, err
	}
	if in.Specs != "" {
		if err := tables.LoadExtra(in.Specs); err != nil {
			return nil, err
		}
	}
	set, err := pins.Parse(in.Pins)
	if err != nil {
		return nil, fmt.Errorf("pin set: %w", err)
	}
	if err := tables.LiftX86Rules(set.LiftedX86()...); err != nil {
		return nil, fmt.Errorf("pin set: %w", err)
	}
	if in.Freeze != "" {
		docs, err := pins.ReadFrozen(in.Freeze)
		if err != nil {
			return nil, err
		}
		rule, err := pins.Frozen(docs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", in.Freeze, err)
		}
		for _, w := range pins.FrozenWarnings(docs) {
			fmt.Fprintln(log, "warning: "+w)
		}
		set = set.With(rule)
	}
	if in.CacheDir == "" {
		return nil, errors.New("no cache directory given (downloads are cached there)")
	}
	client, err := fetch.New(fetch.Options{CacheDir: filepath.Join(in.CacheDir, "http"), Offline: in.Offline, Log: in.Log})
	if err != nil {
		return nil, fmt.Errorf("setting up downloads: %w", err)
	}
	r := &render.Renderer{Tables: tables, Pins: set, Fetcher: fetcher{client}}
	if in.TaskRepo != "" {
		return loadTaskRepo(in, r, log)
	}
	hc, err := hub.New(hub.Options{Endpoint: in.Hub.Endpoint, Token: in.Hub.Token, CacheDir: filepath.Join(in.CacheDir, "hub"), Offline: in.Offline, Log: log})
	if err != nil {
		return nil, fmt.Errorf("dataset hub: %w", err)
	}
	opts := dataset.OpenOptions{LoadOptions: dataset.LoadOptions{Known: tables}, Hub: hc}
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
	l := &Loaded{Renderer: r, Instances: insts, Source: src, Fetch: client}
	if verr != nil {
		return l, fmt.Errorf("%s: %d invalid record(s)", src, len(verr.Problems))
	}
	return l, nil
}

// loadTaskRepo is Load of in.TaskRepo.
func loadTaskRepo(in Inputs, r *render.Renderer, log io.Writer) (*Loaded, error) {
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
	l := &Loaded{Renderer: r, Instances: taskrepo.Instances(tasks), Tasks: tasks, Source: dataset.Source{Name: repo.Dir}}
	var errs []error
	if checkErr != nil {
		errs = append(errs, fmt.Errorf("task repo %s: %d task(s) left out for problems", repo.Dir, len(repo.Invalid)))
	}
	return l, errors.Join(append(errs, err)...)
}

// TaskPlan decides the platforms of a task repo's tasks (nil Tasks: an
// empty plan): linux/amd64 always, linux/arm64 when an arm64 rule covers
// the task's Dockerfile. Languages come from the spec tables by repo.
func (l *Loaded) TaskPlan(platforms []core.Platform) taskrepo.Plan {
	return taskrepo.PlanTasks(l.Tasks, taskrepo.PlanOptions{
		Platforms:    platforms,
		Language:     l.Renderer.Tables.Language,
		RewriteArm64: rewriteFlatArm64,
	})
}

// PlatformsOf is the platform decision for the loaded instances: a task
// repo's plan (TaskPlan) for its tasks, the spec tables' (the one plan
// uses) for a dataset's records.
func (l *Loaded) PlatformsOf() func(*core.Instance) []core.Platform {
	if l.Tasks == nil {
		return l.Renderer.Tables.Platforms
	}
	byID := map[string][]core.Platform{}
	for _, t := range l.TaskPlan(core.AllPlatforms()).Tasks {
		byID[t.Task.Instance.InstanceID] = t.Platforms
	}
	return func(in *core.Instance) []core.Platform { return byID[in.InstanceID] }
}

// rewriteFlatArm64 is pins.RewriteFlatArm64 as taskrepo takes it.
func rewriteFlatArm64(dockerfile []byte) (taskrepo.Arm64, error) {
	r, err := pins.RewriteFlatArm64(dockerfile)
	return taskrepo.Arm64{Dockerfile: r.Dockerfile, Applied: r.Applied, X86Only: r.X86Only}, err
}

// Targets are the verify targets of the loaded instances on platforms
// (their images named by images; nil for the builder's gold check), with
// the eval script script chooses (verify.ScriptDataset or ScriptGenerated,
// as verify.Targets takes it). A task repo's task carries its own eval.sh
// (its record's eval_script) and names its log parser, and gets the
// platforms of TaskPlan.
func (l *Loaded) Targets(ctx context.Context, platforms []core.Platform, images verify.ImageFunc, script string) ([]verify.Target, []error) {
	if l.Tasks == nil {
		return verify.Targets(ctx, l.Renderer, l.Instances, verify.TargetOptions{Platforms: platforms, Images: images, Script: script})
	}
	var out []verify.Target
	var errs []error
	for _, pt := range l.TaskPlan(platforms).Tasks {
		for _, p := range pt.Platforms {
			inst := pt.Task.Instance
			t, err := verify.NewTarget(ctx, l.Renderer, inst, p, script)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s (%s): %w", inst.InstanceID, p, err))
				continue
			}
			if images != nil {
				ref, err := images(inst.InstanceID, p)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s (%s): %w", inst.InstanceID, p, err))
					continue
				}
				t.Image = ref
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

// fetcher gives render the fetch client: like upstream, any final non-200
// answer means "try the next candidate path".
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
	return fetch.DecodeText(b), true, nil
}

// Select keeps the loaded instances with those ids, in loaded order (all
// when ids is empty; an id not loaded is an error: dataset.Select), and a
// task repo's tasks with them, so that Targets and TaskPlan see the same
// selection as Instances.
func (l *Loaded) Select(ids []string) error {
	insts, err := dataset.Select(l.Instances, ids)
	if err != nil {
		return err
	}
	l.Instances = insts
	if l.Tasks == nil {
		return nil
	}
	byID := make(map[string]taskrepo.Task, len(l.Tasks))
	for _, t := range l.Tasks {
		byID[t.Instance.InstanceID] = t
	}
	tasks := make([]taskrepo.Task, 0, len(insts))
	for _, in := range insts {
		t, ok := byID[in.InstanceID]
		if !ok {
			return fmt.Errorf("instance %s has no task in the task repo", in.InstanceID)
		}
		tasks = append(tasks, t)
	}
	l.Tasks = tasks
	return nil
}
