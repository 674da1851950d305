package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/builder/plan"
	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/builder/render/taskwrite"
	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/pins"
	"github.com/swebuild/swebuild/taskrepo"
)

// datasetKind is a dataset's records: rendered from the spec tables, their
// platforms decided by the tables.
type datasetKind struct{}

func (datasetKind) decide(l *Loaded, inst *core.Instance) spec.Decision {
	return l.Renderer.Tables.Decide(inst)
}

func (datasetKind) plan(ctx context.Context, l *Loaded, platforms []core.Platform) (*Plan, error) {
	g, err := plan.Build(ctx, l.Renderer, l.Instances, platforms)
	if err != nil {
		return nil, err
	}
	t := l.Renderer.Tables
	p := &Plan{Platforms: platforms, Errors: g.Errors, report: graphPlan{graph: g, insts: l.Instances, tables: t}}
	for i := range l.Instances {
		in := &l.Instances[i]
		d := t.Decide(in)
		lang := t.Language(in.Repo)
		if lang == "" {
			lang = "unknown"
		}
		p.Records = append(p.Records, PlannedRecord{InstanceID: in.InstanceID, Language: lang, Platforms: asked(d.Platforms, platforms), X86Only: d.Rule})
	}
	return p, nil
}

func (datasetKind) writeFiles(ctx context.Context, l *Loaded, o FilesOptions) (int, int, []*render.InstanceError) {
	n, failed := l.Renderer.WriteAllLayout(ctx, l.Instances, o.Platforms, o.Out, o.Jobs, o.Layout)
	return n, len(l.Instances) * len(o.Platforms), failed
}

func (datasetKind) exportTasks(ctx context.Context, l *Loaded, o taskwrite.Options) (int, []*render.InstanceError) {
	return taskwrite.Write(ctx, l.Renderer, l.Instances, o)
}

func (datasetKind) keep([]core.Instance) error { return nil }

// graphPlan is a dataset's plan: the base/env/instance graph.
type graphPlan struct {
	graph  *plan.Plan
	insts  []core.Instance
	tables *spec.Tables
}

func (g graphPlan) WriteTable(w io.Writer) error { return g.graph.WriteTable(w) }
func (g graphPlan) MarshalJSON() ([]byte, error) { return json.Marshal(g.graph) }

func (g graphPlan) nodes(contextDirs []string) ([]*graph.Node, error) {
	nodes, err := Nodes(g.graph, g.insts, contextDirs)
	if err != nil {
		return nil, err
	}
	AddInventory(nodes, g.graph, g.insts, g.tables)
	return nodes, nil
}

// taskKind is a task repo's tasks: each its own flat Dockerfile, eval.sh and
// task directory; linux/arm64 where task.yaml does not say x86_only and the
// arm64 rules for flat Dockerfiles cover the Dockerfile.
type taskKind struct {
	dir   string
	tasks []taskrepo.Task
	// decisions are each task's platforms of all, by id.
	decisions map[string]spec.Decision
	language  func(repo string) string
}

// set takes the selected tasks and decides their platforms.
func (k *taskKind) set(tasks []taskrepo.Task, r *render.Renderer) {
	k.tasks, k.language = tasks, r.Tables.Language
	k.decisions = make(map[string]spec.Decision, len(tasks))
	for _, pt := range k.planTasks(core.AllPlatforms()).Tasks {
		k.decisions[pt.Task.Instance.InstanceID] = spec.Decision{Platforms: pt.Platforms, Rule: pt.X86Only}
	}
}

func (k *taskKind) planTasks(platforms []core.Platform) taskrepo.Plan {
	return taskrepo.PlanTasks(k.tasks, taskrepo.PlanOptions{Platforms: platforms, Language: k.language, RewriteArm64: rewriteFlatArm64})
}

func (k *taskKind) decide(_ *Loaded, inst *core.Instance) spec.Decision {
	return k.decisions[inst.InstanceID]
}

func (k *taskKind) plan(_ context.Context, _ *Loaded, platforms []core.Platform) (*Plan, error) {
	tp := k.planTasks(platforms)
	p := &Plan{Platforms: platforms, report: taskPlan{tp}}
	for _, t := range tp.Tasks {
		p.Records = append(p.Records, PlannedRecord{InstanceID: t.Task.Instance.InstanceID, Language: t.Language, Platforms: t.Platforms, X86Only: t.X86Only})
	}
	return p, nil
}

func (k *taskKind) writeFiles(_ context.Context, _ *Loaded, o FilesOptions) (int, int, []*render.InstanceError) {
	tp := k.planTasks(o.Platforms)
	wanted := 0
	for _, t := range tp.Tasks {
		wanted += len(t.Platforms)
	}
	n, err := tp.Write(o.Out)
	if err != nil {
		return n, wanted, []*render.InstanceError{{InstanceID: "*", Err: err}}
	}
	return n, wanted, nil
}

func (k *taskKind) exportTasks(context.Context, *Loaded, taskwrite.Options) (int, []*render.InstanceError) {
	return 0, []*render.InstanceError{{InstanceID: "*", Err: fmt.Errorf("the input is a task repo already (%s): copy its directory; a task repo is written from a dataset", k.dir)}}
}

func (k *taskKind) keep(insts []core.Instance) error {
	byID := make(map[string]taskrepo.Task, len(k.tasks))
	for _, t := range k.tasks {
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
	k.tasks = tasks
	return nil
}

// taskPlan is a task repo's plan: its tasks per language and platform.
type taskPlan struct{ tp taskrepo.Plan }

func (t taskPlan) WriteTable(w io.Writer) error { return t.tp.WriteTable(w) }
func (t taskPlan) MarshalJSON() ([]byte, error) { return t.tp.MarshalJSON() }

func (t taskPlan) nodes([]string) ([]*graph.Node, error) { return TaskNodes(t.tp), nil }

// rewriteFlatArm64 is pins.RewriteFlatArm64 as taskrepo takes it.
func rewriteFlatArm64(dockerfile []byte) (taskrepo.Arm64, error) {
	r, err := pins.RewriteFlatArm64(dockerfile)
	return taskrepo.Arm64{Dockerfile: r.Dockerfile, Applied: r.Applied, X86Only: r.X86Only}, err
}
