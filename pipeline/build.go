package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/builder/plan"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/publish"
	"github.com/swebuild/swebuild/taskrepo"
)

// BuildOptions are one `swebuild build`: what to build (Inputs, Platforms),
// how (Builder), what to check before anything is exported (Verify) and
// where to publish what was built (Publish).
type BuildOptions struct {
	Inputs
	// Platforms to build; an instance's own platforms (x86-only rules)
	// always win.
	Platforms []core.Platform
	// Builder configures the BuildKit side (daemons, workers, push, caches,
	// progress, run directory, bound images). Builder.Verify is set here
	// from Verify.
	Builder builder.Options
	// ContextDirs hold the context files a profile names (the fixture's
	// rootfs-<arch>.tar), searched in order.
	ContextDirs []string
	// MetadataFile, when set, receives one record per node (core.WriteFile).
	MetadataFile string
	// Until, when set (graph.KindBase or graph.KindEnv), builds only
	// the dataset plan's images up to that kind: the base images, or the
	// base and env images (e.g. the bases a task repo's Dockerfiles start
	// FROM, pushed before it builds). Not with Verify, Publish or a task
	// repo, which are about instance images.
	Until string
	// Verify, when set, runs each instance's gold patch on its solved
	// image before it is exported (GoldCheck), and attaches what it found
	// to the exported image as a verification statement by Verifier (the
	// tool and its version, e.g. "swebuild v1.2.3").
	Verify   *GoldCheckOptions
	Verifier string
	// Publish, when set, publishes the instance images built and pushed
	// or written to the OCI layout (and with Verify, verified) under
	// Publish.Repo. Publish.LedgerPath defaults to publish-ledger.jsonl
	// beside the metadata file, else in the run directory.
	Publish *publish.RunOptions
	// Out receives the summary tables (build, verification, publish).
	Out io.Writer
	// Log receives what the user should see while it runs: the node count,
	// plan problems, progress of verification and publishing.
	Log io.Writer
}

// BuildResult is what Build did. Every field may be nil when Build returned
// before that stage.
type BuildResult struct {
	// Plan is what the input planned: each record's platforms, the nodes.
	Plan      *Plan
	Report    *builder.Report
	Records   []core.Image
	Gold      *GoldCheck
	Published *publish.Summary
}

// Build plans the dataset, builds the graph with BuildKit (verifying gold
// patches inside the build when asked), writes the metadata file and
// publishes. Instances fail independently: the error joins every problem
// (invalid records, planning errors, failed nodes, failed verifications,
// publish failures) and the result says what was done.
func Build(ctx context.Context, o BuildOptions) (*BuildResult, error) {
	out, log := writerOr(o.Out), writerOr(o.Log)
	if err := o.checkUntil(); err != nil {
		return nil, err
	}
	loaded, problems, err := loadKeepGoing(ctx, o.Inputs, log)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(loaded.Instances))
	for i, in := range loaded.Instances {
		ids[i] = in.InstanceID
	}
	if err := checkTargets(ctx, o, ids); err != nil {
		return nil, err
	}
	res := &BuildResult{}
	p, err := loaded.Plan(ctx, o.Platforms)
	if err != nil {
		return nil, err
	}
	res.Plan = p
	for _, e := range p.Errors {
		fmt.Fprintf(log, "plan: %s (%s): %s\n", e.InstanceID, e.Platform, e.Error)
	}
	if len(p.Errors) > 0 {
		problems = append(problems, fmt.Errorf("%d instance(s) could not be planned", len(p.Errors)))
	}
	nodes, bopts, err := o.builderInputs(ctx, loaded, p, res)
	if err != nil {
		return nil, err
	}
	if res.Gold != nil {
		problems = append(problems, res.Gold.Problems()...)
	}
	fmt.Fprintf(log, "swebuild build: %d nodes planned; logs in %s\n", len(nodes), bopts.RunDir)
	report, err := builder.Build(ctx, nodes, bopts)
	if report != nil {
		res.Report = report
		if werr := report.WriteSummary(out); werr != nil {
			problems = append(problems, werr)
		}
		res.records(loaded, bopts, out)
	}
	if res.Gold != nil {
		problems = append(problems, res.Gold.Finish(out)...)
	}
	if err != nil {
		problems = append(problems, err)
	}
	if o.MetadataFile != "" && report != nil {
		if err := core.WriteFile(o.MetadataFile, res.Records); err != nil {
			problems = append(problems, err)
		}
	}
	if o.Publish != nil && report != nil && ctx.Err() == nil {
		if err := o.publish(ctx, res, bopts.RunDir, out); err != nil {
			problems = append(problems, err)
		}
	}
	return res, errors.Join(problems...)
}

// builderInputs are the nodes of plan p to build (those up to o.Until, when
// set) and the builder's options; with o.Verify, res.Gold checks the gold
// patches inside the build.
func (o BuildOptions) builderInputs(ctx context.Context, loaded *Loaded, p *Plan, res *BuildResult) ([]*graph.Node, builder.Options, error) {
	nodes, err := p.Nodes(o.ContextDirs)
	if err != nil {
		return nil, builder.Options{}, err
	}
	notPlanned := p.NotPlanned()
	if o.Until != "" {
		nodes, notPlanned = NodesUntil(nodes, graph.Kind(o.Until)), nil // no instance image is asked for
	}
	bopts := o.Builder
	bopts.NotPlanned = notPlanned
	if o.Verify != nil {
		gc, err := NewGoldCheck(ctx, loaded, o.Platforms, filepath.Join(bopts.RunDir, "verify"), *o.Verify)
		if err != nil {
			return nil, builder.Options{}, err
		}
		res.Gold = gc
		bopts.Verify = gc.Hook()
		bopts.VerifyMounts = gc.Mounts()
		bopts.Attest = gc.Attest(o.Verifier)
	}
	return nodes, bopts, nil
}

// records sets res.Records from the build's report: labelled with the gold
// checks' results, their exports written, and the dataset they come from.
func (res *BuildResult) records(loaded *Loaded, bopts builder.Options, out io.Writer) {
	res.Records = res.Report.Records()
	if res.Gold != nil {
		res.Gold.Label(res.Records)
	}
	writeExports(out, bopts, res.Records)
	for i := range res.Records {
		res.Records[i].Dataset = loaded.Source.String()
	}
}

// publish publishes what was built and pushed, even when other instances
// failed; with Verify, only verified images go.
func (o BuildOptions) publish(ctx context.Context, res *BuildResult, runDir string, out io.Writer) error {
	popts := *o.Publish
	popts.Checked = true // checkTargets
	popts.RequireVerified = popts.RequireVerified || o.Verify != nil
	if popts.LedgerPath == "" {
		popts.LedgerPath = defaultLedger(o.MetadataFile, runDir)
	}
	fmt.Fprintf(out, "\npublishing %d record(s) under %s\n", len(res.Records), popts.Repo)
	sum, perr := publish.Run(ctx, res.Records, popts)
	res.Published = sum
	if sum != nil {
		fmt.Fprintf(out, "\n%sledger:    %s\n", sum.String(), popts.LedgerPath)
		perr = errors.Join(perr, sum.Err())
	}
	if perr != nil {
		return fmt.Errorf("publishing: %w", perr)
	}
	return nil
}

// checkUntil refuses an Until that is not a kind below instance, or one
// given with what needs instance images.
func (o BuildOptions) checkUntil() error {
	switch {
	case o.Until == "":
		return nil
	case graph.Kind(o.Until) != graph.KindBase && graph.Kind(o.Until) != graph.KindEnv:
		return fmt.Errorf("build until %q: want %s or %s", o.Until, graph.KindBase, graph.KindEnv)
	case o.TaskRepo != "":
		return fmt.Errorf("build until %s: a task repo has only task images, no base or env images of its own", o.Until)
	case o.Verify != nil:
		return fmt.Errorf("build until %s: builds no instance images, so there is no gold patch to verify", o.Until)
	case o.Publish != nil:
		return fmt.Errorf("build until %s: builds no instance images, so there is nothing to publish", o.Until)
	}
	return nil
}

// NodesUntil keeps the nodes up to kind until: graph.KindBase the base
// images, graph.KindEnv the base and env images; "" keeps them all.
func NodesUntil(nodes []*graph.Node, until graph.Kind) []*graph.Node {
	keep := map[graph.Kind]bool{graph.KindBase: true}
	switch until {
	case "":
		return nodes
	case graph.KindEnv:
		keep[graph.KindEnv] = true
	}
	var out []*graph.Node
	for _, n := range nodes {
		if keep[n.Kind] {
			out = append(out, n)
		}
	}
	return out
}

// writeExports says where the built images went: how many were pushed,
// written to an OCI layout, or nowhere but BuildKit's cache (and how to
// export them). Nothing is said pushed that was not.
func writeExports(out io.Writer, o builder.Options, recs []core.Image) {
	if o.Push == "" && o.Output == nil {
		fmt.Fprintln(out, "nothing exported: the images are only in BuildKit's cache (the metadata file's digests name no pushed image and no layout, so publish and verify cannot use them); export with --push REPO, or --output type=oci,dest=DIR for an OCI layout without a registry")
		return
	}
	pushed, written := 0, 0
	for _, r := range recs {
		if r.OK() && r.Ref != "" {
			pushed++
		}
		if r.OK() && r.OCILayout != "" {
			written++
		}
	}
	if o.Push != "" {
		if pushed == 0 {
			fmt.Fprintf(out, "nothing pushed to %s: no image was built\n", o.Push)
		} else {
			fmt.Fprintf(out, "exported: %d image(s) pushed by digest to %s\n", pushed, o.Push)
		}
	}
	if o.Output != nil {
		fmt.Fprintf(out, "exported: %d image(s) into the OCI layout %s (index.json names each image by its key)\n", written, o.Output.Dest)
	}
}

// defaultLedger is publish-ledger.jsonl beside the metadata file, else in
// the run directory.
func defaultLedger(metadataFile, runDir string) string {
	if metadataFile != "" {
		return filepath.Join(filepath.Dir(metadataFile), "publish-ledger.jsonl")
	}
	return filepath.Join(runDir, "publish-ledger.jsonl")
}

func writerOr(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// Nodes makes the plan's nodes ready to build: profile context files (e.g.
// rootfs-<arch>.tar, graph.Node.External) found in contextDirs, nodes used
// only by x86-only instances marked X86Only (so the builder refuses an
// arm64 image of them whatever the platforms asked), and an instance node
// per instance with its id and base commit: when two instances share one
// image key (ids differing only in case), the builder sees both and builds
// neither. The plan's nodes are not changed.
func Nodes(p *plan.Plan, insts []core.Instance, contextDirs []string) ([]*graph.Node, error) {
	x86 := map[string]bool{}
	for _, id := range p.X86Only {
		x86[id] = true
	}
	commits := map[string]string{}
	for _, inst := range insts {
		commits[inst.InstanceID] = inst.BaseCommit
	}
	var nodes []*graph.Node
	for _, pp := range p.Platforms {
		for _, pn := range pp.Nodes {
			n := *pn
			n.X86Only = len(pn.Instances) > 0
			for _, id := range pn.Instances {
				if !x86[id] {
					n.X86Only = false
				}
			}
			n.ContextFiles = nil
			for _, name := range pn.External {
				path, err := findContextFile(name, contextDirs)
				if err != nil {
					return nil, fmt.Errorf("node %s (%s): %w", pn.Key, pn.Platform, err)
				}
				if n.ContextFiles == nil {
					n.ContextFiles = map[string]string{}
				}
				n.ContextFiles[name] = path
			}
			if pn.Kind != graph.KindInstance {
				nodes = append(nodes, &n)
				continue
			}
			for _, id := range pn.Instances {
				c := n
				c.InstanceID, c.BaseCommit = id, commits[id]
				nodes = append(nodes, &c)
			}
		}
	}
	return nodes, nil
}

// TaskNodes turns a task repo's plan into builder nodes: one instance node
// per task and platform, its flat Dockerfile (rewritten for linux/arm64)
// with its task directory as the whole build context, and the default task
// listing for its SBOM (TaskInventory). The key is the instance image key
// upstream's harness uses, sweb.eval.<arch>.<id>:latest.
func TaskNodes(tp taskrepo.Plan) []*graph.Node {
	var nodes []*graph.Node
	for _, pt := range tp.Tasks {
		in := pt.Task.Instance
		for _, plat := range pt.Platforms {
			nodes = append(nodes, &graph.Node{
				Key:        "sweb.eval." + plat.Arch() + "." + strings.ToLower(in.InstanceID) + ":latest",
				Kind:       graph.KindInstance,
				Platform:   plat,
				InstanceID: in.InstanceID,
				BaseCommit: in.BaseCommit,
				X86Only:    pt.X86Only != "",
				Dockerfile: pt.Dockerfiles[plat],
				ContextDir: pt.Task.Dir,
				Inventory: &graph.Inventory{Commands: TaskInventory(), Repo: in.Repo, Version: in.Version,
					InstanceIDs: []string{in.InstanceID}},
			})
		}
	}
	return nodes
}

func findContextFile(name string, dirs []string) (string, error) {
	for _, d := range dirs {
		p, err := filepath.Abs(filepath.Join(d, filepath.FromSlash(name)))
		if err != nil {
			return "", fmt.Errorf("context file %s: %w", name, err)
		}
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("context file %s not found in %s (scripts/fixture.sh rootfs makes the fixture's rootfs tarballs)", name, strings.Join(dirs, ", "))
}
