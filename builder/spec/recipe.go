package spec

import "fmt"

// Recipe is everything rendering reads for one instance and arch: a private
// copy of the spec and templates plus the per-instance inputs. Pin rules edit
// a Recipe before rendering; the Tables are never changed.
type Recipe struct {
	InstanceID string
	Repo       string
	Version    string
	Arch       string // upstream arch name: x86_64 or arm64

	Spec Spec
	// EnvYML is the bundled per-instance environment.yml when EnvYMLCached.
	EnvYML       string
	EnvYMLCached bool

	// Dockerfile templates (Python str.format syntax) and their defaults.
	// DockerDefaults is shared with the Tables: replace the map, never
	// write into it.
	BaseTemplate     string
	EnvTemplate      string
	InstanceTemplate string
	DockerDefaults   map[string]string

	// Profile is set for data-defined (non-upstream) specs.
	Profile *Profile

	// Pins lists the ids of the pin rules that changed this recipe, in order.
	Pins []string
}

// NewRecipe resolves the spec of repo/version for one instance and arch.
func (t *Tables) NewRecipe(instanceID, repo, version, arch string) (*Recipe, error) {
	if arch != ArchX86 && arch != ArchARM64 {
		return nil, fmt.Errorf("invalid architecture %q (want %s or %s)", arch, ArchX86, ArchARM64)
	}
	s, err := t.Lookup(repo, version)
	if err != nil {
		return nil, err
	}
	r := &Recipe{
		InstanceID:       instanceID,
		Repo:             repo,
		Version:          version,
		Arch:             arch,
		Spec:             s.Clone(),
		BaseTemplate:     t.BaseTemplate,
		EnvTemplate:      t.EnvTemplate,
		InstanceTemplate: t.InstanceTemplate,
		DockerDefaults:   t.DefaultDockerSpecs,
	}
	if p := t.Profiles[repo]; p != nil {
		r.Profile = p
		r.BaseTemplate = p.BaseDockerfile
		r.EnvTemplate = p.EnvDockerfile
		r.InstanceTemplate = p.InstanceDockerfile
		return r, nil
	}
	r.EnvYML, r.EnvYMLCached = t.CachedEnvYML(instanceID)
	return r, nil
}
