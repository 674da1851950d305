// Package plan builds the image graph: per platform, base[arch] ->
// env[env-key, arch] -> instance[id, arch]. Instances whose platforms
// (spec.Tables.Platforms) exclude a platform get no node there; instances with
// identical env scripts share one env node.
package plan

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/core"
)

// Totals counts nodes of one platform.
type Totals struct {
	Base     int `json:"base"`
	Env      int `json:"env"`
	Instance int `json:"instance"`
}

// PlatformPlan is the graph of one platform, nodes in build order (bases,
// then envs, then instances, each sorted by key).
type PlatformPlan struct {
	Platform core.Platform `json:"platform"`
	// Nodes are the rendered nodes with the instances using each
	// (graph.Node.Instances); JSON shows kind, key, parent, platform and
	// instances.
	Nodes  []*graph.Node `json:"nodes"`
	Totals Totals        `json:"totals"`
	// Skipped are the ids that get no node on this platform (x86-only).
	Skipped []string `json:"skipped,omitempty"`
}

// InstanceError is an instance that could not be planned.
type InstanceError struct {
	InstanceID string        `json:"instance_id"`
	Platform   core.Platform `json:"platform"`
	Source     string        `json:"source,omitempty"`
	Error      string        `json:"error"`
}

// Language counts the planned instances of one language.
type Language struct {
	Language string `json:"language"`
	// Instances is how many instances of this language were given; ARM64
	// how many of them get linux/arm64 (whether or not that platform was
	// requested); X86Only how many do not, per rule (spec.Decide).
	Instances int            `json:"instances"`
	ARM64     int            `json:"arm64"`
	X86Only   map[string]int `json:"x86_only,omitempty"`
}

// Plan is the whole graph.
type Plan struct {
	Platforms []PlatformPlan `json:"platforms"`
	// X86Only are the planned ids that get no linux/arm64 node.
	X86Only []string `json:"x86_only"`
	// X86OnlyRule says, per x86-only id, what made it x86-only (USE_X86,
	// override, or a rule id listed by `swebuild pins list`).
	X86OnlyRule map[string]string `json:"x86_only_rule,omitempty"`
	// Languages are per-language counts, sorted by language.
	Languages []Language      `json:"languages"`
	Errors    []InstanceError `json:"errors,omitempty"`
}

// Build renders every instance for every requested platform it is built for
// and returns the graph. Instances that fail are listed in Plan.Errors; the
// rest are planned.
func Build(ctx context.Context, r *render.Renderer, insts []core.Instance, platforms []core.Platform) (*Plan, error) {
	p := &Plan{X86Only: []string{}, X86OnlyRule: map[string]string{}}
	langs := map[string]*Language{}
	for i := range insts {
		inst := &insts[i]
		lang := r.Tables.Language(inst.Repo)
		if lang == "" {
			lang = "unknown"
		}
		l := langs[lang]
		if l == nil {
			l = &Language{Language: lang}
			langs[lang] = l
		}
		l.Instances++
		if rule := r.Tables.X86OnlyRule(inst); rule != "" {
			p.X86Only = append(p.X86Only, inst.InstanceID)
			p.X86OnlyRule[inst.InstanceID] = rule
			if l.X86Only == nil {
				l.X86Only = map[string]int{}
			}
			l.X86Only[rule]++
		} else {
			l.ARM64++
		}
	}
	sort.Strings(p.X86Only)
	for _, name := range sortedKeys(langs) {
		p.Languages = append(p.Languages, *langs[name])
	}
	for _, platform := range platforms {
		if platform.IsZero() {
			return nil, errors.New("no platform (want linux/amd64 or linux/arm64)")
		}
		pp := PlatformPlan{Platform: platform}
		byKey := map[string]*graph.Node{}
		add := func(n graph.Node, id string) {
			if old, ok := byKey[n.Key]; ok {
				if old.Parent() != n.Parent() {
					// Same key, different parent: cannot happen for keys that
					// include the arch; report rather than hide it.
					p.Errors = append(p.Errors, InstanceError{InstanceID: id, Platform: platform,
						Error: fmt.Sprintf("node %s has parents %s and %s", n.Key, old.Parent(), n.Parent())})
				}
				old.Instances = append(old.Instances, id)
				return
			}
			n.Instances = []string{id}
			byKey[n.Key] = &n
			pp.Nodes = append(pp.Nodes, &n)
		}
		for i := range insts {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			inst := &insts[i]
			if !slices.Contains(r.Tables.Platforms(inst), platform) {
				pp.Skipped = append(pp.Skipped, inst.InstanceID)
				continue
			}
			res, err := r.Render(ctx, inst, platform)
			if err != nil {
				p.Errors = append(p.Errors, InstanceError{InstanceID: inst.InstanceID, Platform: platform, Source: inst.Source, Error: err.Error()})
				continue
			}
			for _, n := range res.Nodes() {
				add(n, inst.InstanceID)
			}
		}
		order := map[graph.Kind]int{graph.KindBase: 0, graph.KindEnv: 1, graph.KindInstance: 2}
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
			case graph.KindBase:
				pp.Totals.Base++
			case graph.KindEnv:
				pp.Totals.Env++
			case graph.KindInstance:
				pp.Totals.Instance++
			}
		}
		sort.Strings(pp.Skipped)
		p.Platforms = append(p.Platforms, pp)
	}
	return p, nil
}

// sortedKeys are m's keys in order.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// WriteLanguages prints one row per language: instances, how many get
// linux/arm64, how many are x86-only and by which rule.
func (p *Plan) WriteLanguages(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LANGUAGE\tINSTANCES\tARM64\tX86-ONLY\tX86-ONLY BY RULE")
	total := Language{Language: "total", X86Only: map[string]int{}}
	row := func(l Language) {
		n := 0
		var rules []string
		for _, rule := range sortedKeys(l.X86Only) {
			n += l.X86Only[rule]
			rules = append(rules, fmt.Sprintf("%s=%d", rule, l.X86Only[rule]))
		}
		by := strings.Join(rules, " ")
		if by == "" {
			by = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", l.Language, l.Instances, l.ARM64, n, by)
	}
	for _, l := range p.Languages {
		row(l)
		total.Instances += l.Instances
		total.ARM64 += l.ARM64
		for rule, n := range l.X86Only {
			total.X86Only[rule] += n
		}
	}
	if len(p.Languages) > 1 {
		row(total)
	}
	return tw.Flush()
}

// WriteTable prints the plan for people: one row per node, then totals per
// platform, the per-language counts, the x86-only ids by rule and any
// errors.
func (p *Plan) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PLATFORM\tKIND\tKEY\tPARENT\tINSTANCES")
	for _, pp := range p.Platforms {
		for _, n := range pp.Nodes {
			parent := n.Parent()
			if parent == "" {
				parent = "-"
			}
			users := fmt.Sprint(len(n.Instances))
			if n.Kind == graph.KindInstance {
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
	fmt.Fprintln(w)
	if err := p.WriteLanguages(w); err != nil {
		return err
	}
	byRule := map[string][]string{}
	for _, id := range p.X86Only {
		byRule[p.X86OnlyRule[id]] = append(byRule[p.X86OnlyRule[id]], id)
	}
	for _, rule := range sortedKeys(byRule) {
		fmt.Fprintf(w, "x86-only by %s (no linux/arm64 node): %s\n", rule, strings.Join(byRule[rule], " "))
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
