package pipeline

import (
	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/builder/plan"
	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/sbom"
)

// AddInventory gives every env and instance node the listing commands of
// its repo's profile (spec.Tables.Inventory) and the identity its SBOM
// names: the instance, or every instance an env serves (from the plan p), with their repo and version when they
// share one. Nodes of repos with no listing commands get none.
func AddInventory(nodes []*graph.Node, p *plan.Plan, insts []core.Instance, t *spec.Tables) {
	servedBy := map[string][]string{} // builder node ID -> instance ids
	for _, pp := range p.Platforms {
		for _, pn := range pp.Nodes {
			servedBy[pn.Key+"@"+pn.Platform.String()] = pn.Instances
		}
	}
	byID := make(map[string]*core.Instance, len(insts))
	for i := range insts {
		byID[insts[i].InstanceID] = &insts[i]
	}
	for _, n := range nodes {
		if n.Kind != graph.KindEnv && n.Kind != graph.KindInstance {
			continue
		}
		ids := []string{n.InstanceID}
		if n.Kind == graph.KindEnv {
			ids = servedBy[n.ID()]
		}
		inv := &graph.Inventory{InstanceIDs: ids}
		for i, id := range ids {
			in := byID[id]
			if in == nil {
				continue
			}
			if i == 0 {
				inv.Repo, inv.Version = in.Repo, in.Version
				for _, c := range t.Inventory(in.Repo) {
					inv.Commands = append(inv.Commands, graph.ListingCommand{Format: c.Format, Run: c.Run})
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

// The task repo's default listing
//
// A task repo's flat Dockerfile says nothing of what the image holds, so
// its listing commands find out at run time, inside the image, and list
// nothing (exit 0) where there is nothing of their kind, so that a JS or
// Go task image does not fail its capture:
//
//   - the system's Debian packages, always (dpkg-query);
//   - conda's explicit listing when /opt/miniconda3 exists (upstream's
//     flat Python images): of the testbed env when there is one, else of
//     the base env;
//   - pip freeze --all of the python the image's shell finds on its PATH
//     after its own ~/.bashrc (how flat Dockerfiles activate their env:
//     upstream's conda testbed, the fixture's /opt/testbed venv), when
//     that python has pip.
const (
	taskDpkgRun  = `dpkg-query -W -f '${Package}\t${Version}\t${Architecture}\n'`
	taskCondaRun = `[ -x /opt/miniconda3/bin/conda ] || exit 0; source /opt/miniconda3/bin/activate >/dev/null 2>&1 || exit 1; conda activate testbed >/dev/null 2>&1 || true; conda list --explicit --md5`
	taskPipRun   = `[ -f "${HOME:-/root}/.bashrc" ] && source "${HOME:-/root}/.bashrc" >/dev/null 2>&1; py=$(command -v python3 || command -v python) || exit 0; "$py" -m pip --version >/dev/null 2>&1 || exit 0; "$py" -m pip freeze --all`
)

// TaskInventory is the default listing of a task image (task repos, flat
// Dockerfiles): dpkg-query, then conda and pip where the image has them.
func TaskInventory() []graph.ListingCommand {
	return []graph.ListingCommand{
		{Format: sbom.FormatDpkgQuery, Run: taskDpkgRun},
		{Format: sbom.FormatCondaExplicit, Run: taskCondaRun},
		{Format: sbom.FormatPipFreeze, Run: taskPipRun},
	}
}
