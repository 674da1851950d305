// Package plan builds the image graph: per platform, base[arch] ->
// env[env-key, arch] -> instance[id, arch]. Instances whose platforms
// (spec.Tables.Platforms) exclude a platform get no node there; instances with
// identical env scripts share one env node.
package plan

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/dataset"
)

// Node is one image of the graph.
type Node struct {
	Kind     render.NodeKind `json:"kind"`
	Key      string          `json:"key"`
	Parent   string          `json:"parent,omitempty"`
	Platform string          `json:"platform"`
	// Instances are the instance ids using this node (sorted; one for an
	// instance node).
	Instances []string `json:"instances"`

	// Build is what the builder solves for this node (Dockerfile and
	// context files). Not part of the JSON output.
	Build render.Node `json:"-"`
}

// Totals counts nodes of one platform.
type Totals struct {
	Base     int `json:"base"`
	Env      int `json:"env"`
	Instance int `json:"instance"`
}

// PlatformPlan is the graph of one platform, nodes in build order (bases,
// then envs, then instances, each sorted by key).
type PlatformPlan struct {
	Platform string  `json:"platform"`
	Nodes    []*Node `json:"nodes"`
	Totals   Totals  `json:"totals"`
	// Skipped are the ids that get no node on this platform (x86-only).
	Skipped []string `json:"skipped,omitempty"`
}

// InstanceError is an instance that could not be planned.
type InstanceError struct {
	InstanceID string `json:"instance_id"`
	Platform   string `json:"platform"`
	Source     string `json:"source,omitempty"`
	Error      string `json:"error"`
}

// Plan is the whole graph.
type Plan struct {
	Platforms []PlatformPlan `json:"platforms"`
	// X86Only are the planned ids that get no linux/arm64 node.
	X86Only []string        `json:"x86_only"`
	Errors  []InstanceError `json:"errors,omitempty"`
}

// Build renders every instance for every requested platform it is built for
// and returns the graph. Instances that fail are listed in Plan.Errors; the
// rest are planned.
func Build(ctx context.Context, r *render.Renderer, insts []dataset.Instance, platforms []string) (*Plan, error) {
	p := &Plan{X86Only: []string{}}
	for _, inst := range insts {
		if r.Tables.X86Only(inst.InstanceID) {
			p.X86Only = append(p.X86Only, inst.InstanceID)
		}
	}
	sort.Strings(p.X86Only)
	for _, platform := range platforms {
		arch, ok := spec.ArchOf(platform)
		if !ok {
			return nil, fmt.Errorf("unknown platform %q (want linux/amd64 or linux/arm64)", platform)
		}
		oci := spec.PlatformOf(arch)
		pp := PlatformPlan{Platform: oci}
		byKey := map[string]*Node{}
		add := func(n render.Node, id string) {
			if old, ok := byKey[n.Key]; ok {
				if old.Parent != n.Parent {
					// Same key, different parent: cannot happen for keys that
					// include the arch; report rather than hide it.
					p.Errors = append(p.Errors, InstanceError{InstanceID: id, Platform: oci,
						Error: fmt.Sprintf("node %s has parents %s and %s", n.Key, old.Parent, n.Parent)})
				}
				old.Instances = append(old.Instances, id)
				return
			}
			node := &Node{Kind: n.Kind, Key: n.Key, Parent: n.Parent, Platform: oci, Instances: []string{id}, Build: n}
			byKey[n.Key] = node
			pp.Nodes = append(pp.Nodes, node)
		}
		for i := range insts {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			inst := &insts[i]
			if !contains(r.Tables.Platforms(inst.InstanceID), oci) {
				pp.Skipped = append(pp.Skipped, inst.InstanceID)
				continue
			}
			res, err := r.Render(ctx, inst, arch)
			if err != nil {
				p.Errors = append(p.Errors, InstanceError{InstanceID: inst.InstanceID, Platform: oci, Source: inst.Source, Error: err.Error()})
				continue
			}
			for _, n := range res.Nodes() {
				add(n, inst.InstanceID)
			}
		}
		order := map[render.NodeKind]int{render.KindBase: 0, render.KindEnv: 1, render.KindInstance: 2}
		sort.SliceStable(pp.Nodes, func(a, b int) bool {
			na, nb := pp.Nodes[a], pp.Nodes[b]
			if order[na.Kind] != order[nb.Kind] {
				return order[na.Kind] < order[nb.Kind]
			}
			return na.Key < nb.Key
		})
		for _, n := range pp.Nodes {
			sort.Strings(n.Instances)
			switch n.Kind {
			case render.KindBase:
				pp.Totals.Base++
			case render.KindEnv:
				pp.Totals.Env++
			case render.KindInstance:
				pp.Totals.Instance++
			}
		}
		sort.Strings(pp.Skipped)
		p.Platforms = append(p.Platforms, pp)
	}
	return p, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// WriteTable prints the plan for people: one row per node, then totals per
// platform, the x86-only ids and any errors.
func (p *Plan) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PLATFORM\tKIND\tKEY\tPARENT\tINSTANCES")
	for _, pp := range p.Platforms {
		for _, n := range pp.Nodes {
			parent := n.Parent
			if parent == "" {
				parent = "-"
			}
			users := fmt.Sprint(len(n.Instances))
			if n.Kind == render.KindInstance {
				users = n.Instances[0]
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", pp.Platform, n.Kind, n.Key, parent, users)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, pp := range p.Platforms {
		fmt.Fprintf(w, "%s: %d base, %d env, %d instance nodes (%d total)", pp.Platform,
			pp.Totals.Base, pp.Totals.Env, pp.Totals.Instance, pp.Totals.Base+pp.Totals.Env+pp.Totals.Instance)
		if len(pp.Skipped) > 0 {
			fmt.Fprintf(w, "; %d x86-only instances have no %s node", len(pp.Skipped), pp.Platform)
		}
		fmt.Fprintln(w)
	}
	if len(p.X86Only) > 0 {
		fmt.Fprintf(w, "x86-only (USE_X86, no linux/arm64 node): %s\n", strings.Join(p.X86Only, " "))
	}
	for _, e := range p.Errors {
		src := ""
		if e.Source != "" {
			src = e.Source + ": "
		}
		fmt.Fprintf(w, "error: %s%s (%s): %s\n", src, e.InstanceID, e.Platform, e.Error)
	}
	return nil
}
