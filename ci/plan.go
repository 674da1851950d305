package ci

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"

	"github.com/swebuild/swebuild/core"
)

// Target actions in a Plan.
const (
	ActionBuild    = "build"
	ActionExisting = "existing"
)

// Plan is what the prepare job decided: for every wanted image, build it in
// a named shard or reuse the digest the registry already has. The merge job
// reads it back to know what each instance's index must hold.
type Plan struct {
	Repository string          `json:"repository,omitempty"`
	Platforms  []core.Platform `json:"platforms"`
	Counts     []PlatformCount `json:"counts"`
	Instances  []PlanInstance  `json:"instances"`
	// Envs are the env images the instances to build start from (the env
	// stage, envs.go): built tonight by an env job or reused.
	Envs []EnvTarget `json:"envs,omitempty"`
}

// PlanInstance lists the images of one instance.
type PlanInstance struct {
	InstanceID string   `json:"instance_id"`
	Targets    []Target `json:"targets"`
}

// Target is one image of an instance.
type Target struct {
	Platform core.Platform `json:"platform"`
	Action   string        `json:"action"`
	// Shard is the matrix job name that builds it (ActionBuild).
	Shard string `json:"shard,omitempty"`
	// Repository and Digest of the image reused (ActionExisting).
	Repository string `json:"repository,omitempty"`
	Digest     string `json:"digest,omitempty"`
	SpecKey    string `json:"spec_key,omitempty"`
	// Env is the key of the env image a build target starts from, when the
	// plan has an env stage (see Plan.Envs).
	Env string `json:"env,omitempty"`
	// PreviouslyVerified is true when the ledger's last word on this image
	// was "verified": failing now is then a regression.
	PreviouslyVerified bool `json:"previously_verified,omitempty"`
}

// NewPlan records the matrix's build targets and the existing images.
// previous is the ledger (latest entry per image), used to tell regressions
// from new failures.
func NewPlan(m Matrix, existing, previous map[Key]core.Image, repository string, platforms []core.Platform) Plan {
	byID := map[string][]Target{}
	for _, j := range m.Include {
		for _, id := range j.ids {
			t := Target{Platform: j.Platform, Action: ActionBuild, Shard: j.Name}
			if p, ok := previous[Key{id, j.Platform}]; ok && Usable(p) {
				t.PreviouslyVerified = true
			}
			byID[id] = append(byID[id], t)
		}
	}
	for _, k := range sortedKeys(existing) {
		r := existing[k]
		byID[k.InstanceID] = append(byID[k.InstanceID], Target{
			Platform: k.Platform, Action: ActionExisting,
			Repository: Repository(r), Digest: r.Digest.String(), SpecKey: r.SpecKey, PreviouslyVerified: true,
		})
	}
	ids := slices.Sorted(maps.Keys(byID))
	order := map[core.Platform]int{}
	for i, p := range platforms {
		order[p] = i
	}
	p := Plan{Repository: repository, Platforms: platforms, Counts: m.Counts, Instances: make([]PlanInstance, 0, len(ids))}
	for _, id := range ids {
		ts := byID[id]
		sort.Slice(ts, func(a, b int) bool { return order[ts[a].Platform] < order[ts[b].Platform] })
		p.Instances = append(p.Instances, PlanInstance{InstanceID: id, Targets: ts})
	}
	return p
}

// SetEnvs records the env stage in the plan: the env targets, and the env
// each build target starts from (envOf, by instance and platform).
func (p *Plan) SetEnvs(envs []EnvTarget, envOf map[Key]string) {
	p.Envs = envs
	for i := range p.Instances {
		in := &p.Instances[i]
		for j := range in.Targets {
			t := &in.Targets[j]
			if t.Action == ActionBuild {
				t.Env = envOf[Key{in.InstanceID, t.Platform}]
			}
		}
	}
}

// WritePlan writes p as indented JSON to path.
func WritePlan(path string, p Plan) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding plan: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing plan: %w", err)
	}
	return nil
}

// ReadPlan reads a plan written by WritePlan.
func ReadPlan(path string) (Plan, error) {
	var p Plan
	b, err := os.ReadFile(path)
	if err != nil {
		return p, fmt.Errorf("reading plan: %w", err)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("reading plan %s: %w", path, err)
	}
	for i, in := range p.Instances {
		if in.InstanceID == "" {
			return p, fmt.Errorf("reading plan %s: instances[%d].instance_id: missing", path, i)
		}
		for j, t := range in.Targets {
			if t.Action != ActionBuild && t.Action != ActionExisting {
				return p, fmt.Errorf("reading plan %s: instances[%d].targets[%d].action: %q is neither %q nor %q", path, i, j, t.Action, ActionBuild, ActionExisting)
			}
		}
	}
	for i, e := range p.Envs {
		switch {
		case e.Key == "" || e.Platform.IsZero():
			return p, fmt.Errorf("reading plan %s: envs[%d]: key and platform are required", path, i)
		case e.Action == ActionBuild && e.Shard == "":
			return p, fmt.Errorf("reading plan %s: envs[%d].shard: missing for an env to build", path, i)
		case e.Action == ActionExisting && e.Ref == "":
			return p, fmt.Errorf("reading plan %s: envs[%d].ref: missing for an env reused", path, i)
		case e.Action != ActionBuild && e.Action != ActionExisting:
			return p, fmt.Errorf("reading plan %s: envs[%d].action: %q is neither %q nor %q", path, i, e.Action, ActionBuild, ActionExisting)
		}
	}
	return p, nil
}
