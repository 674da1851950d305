package pipeline

import (
	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/builder/plan"
	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/dataset"
)

// AddInventory gives every env and instance node the listing commands of
// its repo's profile (spec.Tables.Inventory) and the identity its SBOM
// names: the instance, or every instance an env serves (from the plan p), with their repo and version when they
// share one. Nodes of repos with no listing commands get none.
func AddInventory(nodes []*builder.Node, p *plan.Plan, insts []dataset.Instance, t *spec.Tables) {
	servedBy := map[string][]string{} // builder node ID -> instance ids
	for _, pp := range p.Platforms {
		for _, pn := range pp.Nodes {
			servedBy[pn.Key+"@"+pn.Platform.String()] = pn.Instances
		}
	}
	byID := make(map[string]*dataset.Instance, len(insts))
	for i := range insts {
		byID[insts[i].InstanceID] = &insts[i]
	}
	for _, n := range nodes {
		if n.Kind != builder.KindEnv && n.Kind != builder.KindInstance {
			continue
		}
		ids := []string{n.InstanceID}
		if n.Kind == builder.KindEnv {
			ids = servedBy[n.ID()]
		}
		inv := &builder.Inventory{InstanceIDs: ids}
		for i, id := range ids {
			in := byID[id]
			if in == nil {
				continue
			}
			if i == 0 {
				inv.Repo, inv.Version = in.Repo, in.Version
				for _, c := range t.Inventory(in.Repo) {
					inv.Commands = append(inv.Commands, builder.ListingCommand{Format: c.Format, Run: c.Run})
				}
			} else if in.Repo != inv.Repo || in.Version != inv.Version {
				inv.Repo, inv.Version = "", ""
			}
		}
		if len(inv.Commands) > 0 {
			n.Inventory = inv
		}
	}
}
