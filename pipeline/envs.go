package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/builder/plan"
	"github.com/swebuild/swebuild/core"
)

// BuildEnvs is one job of the nightly's env stage (`swebuild ci envs`):
// it builds and pushes (o.Builder.Push) the env images keys of one
// platform, with the base images they build FROM, and writes their
// records to o.MetadataFile (the records the instance shards bind and the
// env ledger keeps). o.Platforms must hold that one platform; Verify and
// Publish are not used. A key the plan of the dataset does not have is an
// error before anything is built.
func BuildEnvs(ctx context.Context, o BuildOptions, keys []string) (*builder.Report, error) {
	out, log := writerOr(o.Out), writerOr(o.Log)
	if len(o.Platforms) != 1 {
		return nil, fmt.Errorf("env stage: one platform per job, got %d", len(o.Platforms))
	}
	if o.Verify != nil || o.Publish != nil {
		return nil, errors.New("env stage: env images are neither verified nor published")
	}
	if len(keys) == 0 {
		return nil, errors.New("env stage: no env keys")
	}
	loaded, problems, err := loadKeepGoing(ctx, o.Inputs, log)
	if err != nil {
		return nil, err
	}
	if err := checkTargets(ctx, o, nil); err != nil {
		return nil, err
	}
	p, err := plan.Build(ctx, loaded.Renderer, loaded.Instances, o.Platforms)
	if err != nil {
		return nil, err
	}
	nodes, err := Nodes(p, loaded.Instances, o.ContextDirs)
	if err != nil {
		return nil, err
	}
	// The env images' SBOMs: the repair's drift compares tonight's env
	// document with last night's, read from the env ledger's records.
	AddInventory(nodes, p, loaded.Instances, loaded.Renderer.Tables)
	sel, missing := envNodes(nodes, keys)
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("env stage: %d env key(s) not in the plan of the dataset on %s: %v", len(missing), o.Platforms[0], missing)
	}
	fmt.Fprintf(log, "swebuild ci envs: %d env and base nodes on %s; logs in %s\n", len(sel), o.Platforms[0], o.Builder.RunDir)
	report, err := builder.Build(ctx, sel, o.Builder)
	if err != nil {
		problems = append(problems, err)
	}
	if report == nil {
		return nil, errors.Join(problems...)
	}
	if werr := report.WriteSummary(out); werr != nil {
		problems = append(problems, werr)
	}
	recs := report.Records()
	for i := range recs {
		recs[i].Dataset = loaded.Source.String()
	}
	if o.MetadataFile != "" {
		if err := core.WriteFile(o.MetadataFile, recs); err != nil {
			problems = append(problems, err)
		}
	}
	return report, errors.Join(problems...)
}

// envNodes are the env nodes of keys with the base nodes they build FROM,
// parents first, and the keys no env node has.
func envNodes(nodes []*graph.Node, keys []string) (sel []*graph.Node, missing []string) {
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	byID := map[string]*graph.Node{}
	for _, n := range nodes {
		byID[n.ID()] = n
	}
	picked := map[string]bool{}
	var pick func(n *graph.Node)
	pick = func(n *graph.Node) {
		if picked[n.ID()] {
			return
		}
		picked[n.ID()] = true
		for _, pk := range n.Parents {
			if pn := byID[pk+"@"+n.Platform.String()]; pn != nil {
				pick(pn)
			}
		}
		sel = append(sel, n)
	}
	found := map[string]bool{}
	for _, n := range nodes {
		if n.Kind == graph.KindEnv && want[n.Key] {
			found[n.Key] = true
			pick(n)
		}
	}
	for _, k := range keys {
		if !found[k] {
			missing = append(missing, k)
		}
	}
	return sel, missing
}
