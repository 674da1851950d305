package pipeline

import (
	"encoding/json"
	"io"
	"slices"

	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/builder/plan"
	"github.com/swebuild/swebuild/core"
)

// Plan is what an input plans for its records on the platforms asked: per
// record, its platforms and why it gets no linux/arm64; the records that
// could not be planned; the build nodes; and the input's own report (the
// base/env/instance graph of a dataset, the tasks of a task repo) for
// `swebuild plan`.
type Plan struct {
	// Platforms are the platforms asked for.
	Platforms []core.Platform
	// Records are the loaded records in order, each with its platforms of
	// those asked.
	Records []PlannedRecord
	// Errors are the (record, platform) pairs that could not be planned.
	Errors []plan.InstanceError
	report planReport
}

// PlannedRecord is one record's platform decision in a plan.
type PlannedRecord struct {
	InstanceID string
	// Language is the record's language ("unknown" when the tables do not
	// know its repo).
	Language string
	// Platforms are the platforms it gets, of those asked, amd64 first.
	Platforms []core.Platform
	// X86Only is why it gets no linux/arm64 (asked for or not); "" when it
	// gets it.
	X86Only string
}

// planReport is an input's own form of its plan.
type planReport interface {
	WriteTable(io.Writer) error
	// nodes are the builder's nodes of the plan, context files looked up
	// in contextDirs.
	nodes(contextDirs []string) ([]*graph.Node, error)
}

// WriteTable prints the plan as a table: the graph's node counts per
// platform and language (a dataset) or the tasks per language and platform
// (a task repo), then why the rest are x86-only.
func (p *Plan) WriteTable(w io.Writer) error { return p.report.WriteTable(w) }

// MarshalJSON is `swebuild plan --format json`: the graph (a dataset) or
// every task with its platforms (a task repo).
func (p *Plan) MarshalJSON() ([]byte, error) { return json.Marshal(p.report) }

// Nodes are the builder's nodes of the plan, profile context files (the
// fixture's rootfs-<arch>.tar) looked up in contextDirs.
func (p *Plan) Nodes(contextDirs []string) ([]*graph.Node, error) {
	return p.report.nodes(contextDirs)
}

// NotPlanned are the instance images of the platforms asked the plan has no
// node for: the x86-only records on linux/arm64, with the reason, and the
// records that could not be planned.
func (p *Plan) NotPlanned() []builder.NotPlanned {
	var out []builder.NotPlanned
	if slices.Contains(p.Platforms, core.ARM64) {
		for _, r := range p.Records {
			if r.X86Only != "" {
				out = append(out, builder.NotPlanned{InstanceID: r.InstanceID, Platform: core.ARM64, Reason: "x86-only (" + r.X86Only + ")"})
			}
		}
	}
	for _, e := range p.Errors {
		out = append(out, builder.NotPlanned{InstanceID: e.InstanceID, Platform: e.Platform, Reason: "could not be planned"})
	}
	return out
}

// asked is the platforms of d that are among asked, in d's order.
func asked(d []core.Platform, asked []core.Platform) []core.Platform {
	var out []core.Platform
	for _, p := range d {
		if slices.Contains(asked, p) {
			out = append(out, p)
		}
	}
	return out
}
