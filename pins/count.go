package pins

import (
	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
)

// Touched is how many instances of a dataset one rule touches: a pin rule
// changes their recipe (on either platform, and per platform); an x86-only
// rule takes their linux/arm64 image away.
type Touched struct {
	Rule       string         `json:"rule"`
	Instances  int            `json:"instances"`
	ByPlatform map[string]int `json:"by_platform,omitempty"` // pin rules only
}

// Count returns, for every rule of All then every spec.X86Rules rule, how
// many of insts it touches, each pin rule applied alone to a fresh recipe
// per platform. Instances whose spec cannot be resolved are counted in
// unresolved and touch nothing.
func Count(t *spec.Tables, insts []core.Instance) (counts []Touched, unresolved int) {
	all := All()
	for _, r := range all {
		by := map[string]int{}
		for _, p := range core.AllPlatforms() {
			by[p.String()] = 0
		}
		counts = append(counts, Touched{Rule: r.ID, ByPlatform: by})
	}
	x86 := spec.X86Rules()
	for _, r := range x86 {
		counts = append(counts, Touched{Rule: r.ID})
	}
	for i := range insts {
		inst := &insts[i]
		touched := make([]bool, len(all))
		bad := false
		for _, p := range core.AllPlatforms() {
			for j, r := range all {
				rec, err := t.NewRecipe(inst.InstanceID, inst.Repo, inst.Version, p)
				if err != nil {
					bad = true
					break
				}
				if r.apply(rec) {
					touched[j] = true
					counts[j].ByPlatform[p.String()]++
				}
			}
		}
		if bad {
			unresolved++
		}
		for j := range all {
			if touched[j] {
				counts[j].Instances++
			}
		}
		if rule := t.X86OnlyRule(inst); rule != "" {
			for j, r := range x86 {
				if r.ID == rule {
					counts[len(all)+j].Instances++
				}
			}
		}
	}
	return counts, unresolved
}
