package pins

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
)

// DatasetCounts is how many instances of one dataset each rule touches.
type DatasetCounts struct {
	Dataset    string    `json:"dataset"`
	Instances  int       `json:"instances"`
	Unresolved int       `json:"unresolved,omitempty"`
	Touched    []Touched `json:"touched"`
}

// List is what `swebuild pins list` shows: the pin rules (the built-in
// ones, then those of pins files), the x86-only rules, the arm64 rules of
// flat Dockerfiles and, per dataset, the instances each rule touches.
type List struct {
	Pins    []Rule          `json:"pins"`
	X86Only []spec.X86Rule  `json:"x86_only_rules"`
	Flat    []FlatRule      `json:"flat_arm64_rules"`
	Counts  []DatasetCounts `json:"counts,omitempty"`
	// builtin is how many of Pins are built in (All).
	builtin int
}

// NewList is the list of the built-in rules, then files' rules, with the
// counts.
func NewList(files []Rule, counts []DatasetCounts) List {
	rules := All()
	builtin := len(rules)
	return List{Pins: append(rules, files...), X86Only: spec.X86Rules(), Flat: FlatRules(), Counts: counts, builtin: builtin}
}

// WriteJSON writes the list as indented JSON.
func (l List) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(l)
}

// WriteText writes the list for a terminal: each rule with how to turn it
// off and the instances it touches.
func (l List) WriteText(w io.Writer) {
	for i, r := range l.Pins {
		if i > 0 {
			fmt.Fprintln(w)
		}
		off := "--pins default,-" + r.ID
		if i >= l.builtin {
			off = "a pins file's rule: leave the file out of --pins (on with --pins default,FILE)"
		}
		fmt.Fprintf(w, "id:       %s\nmatch:    %s\nchange:   %s\nreason:   %s\nevidence: %s\nturn off: %s\n", r.ID, r.Match, r.Change, r.Reason, r.Evidence, off)
		l.writeTouches(w, r.ID)
	}
	fmt.Fprintf(w, "\nx86-only rules (instances matching one get no linux/arm64 image; USE_X86 and a --specs file's x86_only list come first):\n")
	for _, r := range l.X86Only {
		fmt.Fprintf(w, "\nid:       %s\nmatch:    %s\nchange:   no linux/arm64 image (plan, build, verify, ci and sizes skip it)\nreason:   %s\nevidence: %s\nlift:     --pins default,-%s (plans and builds their linux/arm64 images, to try them)\n", r.ID, r.Match, r.Reason, r.Evidence, r.ID)
		l.writeTouches(w, r.ID)
	}
	fmt.Fprintf(w, "\narm64 rules for flat Dockerfiles (v5 make_v5_dockerfiles.py output and task-repo Dockerfiles; pins.RewriteFlatArm64):\n")
	for _, r := range l.Flat {
		kind := ""
		if r.X86Only {
			kind = " (x86-only rule)"
		}
		fmt.Fprintf(w, "\nid:       %s%s\nmatch:    %s\nchange:   %s\nreason:   %s\nevidence: %s\n", r.ID, kind, r.Match, r.Change, r.Reason, r.Evidence)
	}
}

// writeTouches writes, per dataset, how many instances rule id touches.
func (l List) writeTouches(w io.Writer, id string) {
	for _, c := range l.Counts {
		for _, t := range c.Touched {
			if t.Rule != id {
				continue
			}
			fmt.Fprintf(w, "touches:  %s: %d of %d instances", c.Dataset, t.Instances, c.Instances)
			if len(t.ByPlatform) > 0 {
				fmt.Fprintf(w, " (%s %d, %s %d)", core.AMD64.Arch(), t.ByPlatform[core.AMD64.String()], core.ARM64.Arch(), t.ByPlatform[core.ARM64.String()])
			}
			fmt.Fprintln(w)
		}
	}
}
