package taskrepo

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/taskrepo/layout"
)

// Arm64 is what the arm64 rules make of a task's flat Dockerfile
// (pins.RewriteFlatArm64): the rewritten Dockerfile and the rules applied,
// or the reason the task stays x86-only.
type Arm64 struct {
	Dockerfile []byte
	Applied    []string
	// X86Only is the reason there is no arm64 image; "" when arm64 works.
	X86Only string
}

// Planned is one task's platforms and the Dockerfile each builds.
type Planned struct {
	Task *Task
	// Language is the task's language (the caller's lookup by repo).
	Language string
	// Platforms are the platforms the task gets, of those asked.
	Platforms []core.Platform
	// Dockerfiles are the Dockerfile per platform: the task's own for
	// linux/amd64, the rewritten one for linux/arm64.
	Dockerfiles map[core.Platform][]byte
	// Applied are the arm64 rules applied; X86Only the reason there is no
	// arm64 image ("" when there is one), asked for or not.
	Applied []string
	X86Only string
}

// Plan is the platforms of a set of tasks.
type Plan struct {
	Tasks []Planned
}

// Options for PlanTasks.
type PlanOptions struct {
	// Platforms asked for (linux/amd64, linux/arm64).
	Platforms []core.Platform
	// Language names a repo's language ("" when unknown: "unknown").
	Language func(repo string) string
	// RewriteArm64 is the arm64 rule set (pins.RewriteFlatArm64).
	RewriteArm64 func(dockerfile []byte) (Arm64, error)
}

// PlanTasks decides each task's platforms: linux/amd64 always (the task
// repo's Dockerfiles are written for it), linux/arm64 only when task.yaml
// does not say the task is x86-only (Task.X86Only, whose reason it takes)
// and an arm64 rule covers the Dockerfile. An error of the rule set for
// one task is that task's x86-only reason. The decision and its reason are
// made whether or not linux/arm64 is asked for.
func PlanTasks(tasks []Task, o PlanOptions) Plan {
	var p Plan
	for i := range tasks {
		t := &tasks[i]
		pl := Planned{Task: t, Language: "unknown", Dockerfiles: map[core.Platform][]byte{}}
		if o.Language != nil {
			if l := o.Language(t.Instance.Repo); l != "" {
				pl.Language = l
			}
		}
		arm := arm64Of(t, o.RewriteArm64)
		pl.Applied, pl.X86Only = arm.Applied, arm.X86Only
		for _, plat := range o.Platforms {
			switch {
			case plat == core.AMD64:
				pl.Platforms = append(pl.Platforms, plat)
				pl.Dockerfiles[plat] = t.Dockerfile
			case plat == core.ARM64 && arm.X86Only == "":
				pl.Platforms = append(pl.Platforms, plat)
				pl.Dockerfiles[plat] = arm.Dockerfile
			}
		}
		p.Tasks = append(p.Tasks, pl)
	}
	return p
}

// arm64Of is what the task's linux/arm64 image would build from, or why it
// has none: task.yaml's x86_only first, then the arm64 rules.
func arm64Of(t *Task, rewrite func([]byte) (Arm64, error)) Arm64 {
	switch {
	case t.X86Only != "":
		return Arm64{X86Only: t.X86Only}
	case rewrite == nil:
		return Arm64{X86Only: "no arm64 rule set"}
	}
	res, err := rewrite(t.Dockerfile)
	if err != nil {
		return Arm64{X86Only: fmt.Sprintf("arm64 rules: %v", err)}
	}
	return res
}

// WriteTable prints the counts per language and platform, then how many
// tasks each x86-only rule keeps off arm64 (a reason "<rule>: <detail>" is
// counted by rule, with the first task's reason as an example).
func (p Plan) WriteTable(w io.Writer) error {
	type row struct{ tasks, amd64, arm64 int }
	langs := map[string]*row{}
	reasons := map[string]int{}    // by rule: the reason up to its first ": "
	example := map[string]string{} // the first full reason of each rule
	total := row{}
	for _, t := range p.Tasks {
		r := langs[t.Language]
		if r == nil {
			r = &row{}
			langs[t.Language] = r
		}
		for _, rr := range []*row{r, &total} {
			rr.tasks++
			if slices.Contains(t.Platforms, core.AMD64) {
				rr.amd64++
			}
			if slices.Contains(t.Platforms, core.ARM64) {
				rr.arm64++
			}
		}
		if t.X86Only != "" {
			rule, _, _ := strings.Cut(t.X86Only, ": ")
			reasons[rule]++
			if _, ok := example[rule]; !ok {
				example[rule] = t.X86Only
			}
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LANGUAGE\tTASKS\tLINUX/AMD64\tLINUX/ARM64")
	names := slices.Sorted(maps.Keys(langs))
	for _, l := range names {
		r := langs[l]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", l, r.tasks, r.amd64, r.arm64)
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\n", total.tasks, total.amd64, total.arm64)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(reasons) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nx86-only (no linux/arm64):")
	rs := make([]string, 0, len(reasons))
	for r := range reasons {
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool {
		if reasons[rs[i]] != reasons[rs[j]] {
			return reasons[rs[i]] > reasons[rs[j]]
		}
		return rs[i] < rs[j]
	})
	for _, r := range rs {
		if _, err := fmt.Fprintf(w, "  %4d  %s\n        e.g. %s\n", reasons[r], r, example[r]); err != nil {
			return err
		}
	}
	return nil
}

// plannedJSON is one task of the plan as `swebuild plan --format json`
// prints it.
type plannedJSON struct {
	InstanceID string          `json:"instance_id"`
	Split      string          `json:"split"`
	Language   string          `json:"language"`
	Platforms  []core.Platform `json:"platforms"`
	Applied    []string        `json:"arm64_rules_applied,omitempty"`
	X86Only    string          `json:"x86_only,omitempty"`
	Dir        string          `json:"dir"`
}

// MarshalJSON writes the plan as {"tasks": [...]}: id, split, language,
// platforms, arm64 rules applied, x86-only reason and task directory.
func (p Plan) MarshalJSON() ([]byte, error) {
	out := struct {
		Tasks []plannedJSON `json:"tasks"`
	}{Tasks: []plannedJSON{}}
	for _, t := range p.Tasks {
		out.Tasks = append(out.Tasks, plannedJSON{InstanceID: t.Task.Instance.InstanceID, Split: t.Task.Split, Language: t.Language,
			Platforms: t.Platforms, Applied: t.Applied, X86Only: t.X86Only, Dir: t.Task.Dir})
	}
	return json.Marshal(out)
}

// Write writes, for every task and platform it gets, the Dockerfile that
// platform builds and the task's eval.sh to dir/<instance_id>/<arch>/, and
// returns how many (task, platform) pairs it wrote.
func (p Plan) Write(dir string) (int, error) {
	n := 0
	for _, t := range p.Tasks {
		for _, plat := range t.Platforms {
			d := filepath.Join(dir, t.Task.Instance.InstanceID, plat.Arch())
			if err := os.MkdirAll(d, 0o755); err != nil {
				return n, fmt.Errorf("writing %s: %w", t.Task.Instance.InstanceID, err)
			}
			if err := os.WriteFile(filepath.Join(d, layout.Dockerfile), t.Dockerfiles[plat], 0o644); err != nil {
				return n, fmt.Errorf("writing %s: %w", t.Task.Instance.InstanceID, err)
			}
			if err := os.WriteFile(filepath.Join(d, layout.EvalFile), []byte(t.Task.Instance.EvalScript), 0o644); err != nil {
				return n, fmt.Errorf("writing %s: %w", t.Task.Instance.InstanceID, err)
			}
			n++
		}
	}
	return n, nil
}
