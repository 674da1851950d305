package spec

import (
	"fmt"

	"github.com/swebuild/swebuild/core"
)

// Recipe is everything rendering reads for one instance and platform: a
// private copy of the spec and templates plus the per-instance inputs. Pin
// rules edit a Recipe before rendering; the Tables are never changed.
type Recipe struct {
	InstanceID string
	Repo       string
	Version    string
	Platform   core.Platform
	// Language is the repo's language (py, c, go, java, js, php, rb, rs), or
	// its profile's.
	Language string

	Spec Spec
	// EnvYML is the bundled per-instance environment.yml when EnvYMLCached.
	EnvYML       string
	EnvYMLCached bool

	// Dockerfile templates (Python str.format syntax) and their defaults.
	// DockerDefaults is shared with the Tables: replace the map, never
	// write into it. EnvFromBase says the env template is the base
	// template again (a language with no env template, or a variant).
	BaseTemplate     string
	EnvTemplate      string
	InstanceTemplate string
	EnvFromBase      bool
	DockerDefaults   map[string]string

	// Profile is set for data-defined (non-upstream) specs.
	Profile *Profile

	// Pins lists the ids of the pin rules that changed this recipe, in order.
	Pins []string

	// CondaExplicit, when not empty, is a conda explicit spec ("@EXPLICIT"
	// and one URL#md5 line per package; set by the frozen pin rule): the
	// Python env script creates the env from it (conda create --file)
	// instead of upstream's conda steps. Upstream never sets it.
	CondaExplicit string
}

// NewRecipe resolves the spec of repo/version for one instance and
// platform, with upstream's templates for its language and docker_specs
// variant (get_dockerfile_base / _env / _instance).
func (t *Tables) NewRecipe(instanceID, repo, version string, p core.Platform) (*Recipe, error) {
	if p.IsZero() {
		return nil, fmt.Errorf("no platform given (want %s or %s)", core.AMD64, core.ARM64)
	}
	s, err := t.Lookup(repo, version)
	if err != nil {
		return nil, err
	}
	r := &Recipe{
		InstanceID:     instanceID,
		Repo:           repo,
		Version:        version,
		Platform:       p,
		Spec:           s.Clone(),
		DockerDefaults: t.DefaultDockerSpecs,
	}
	if prof := t.Profiles[repo]; prof != nil {
		r.Profile = prof
		r.Language = prof.Language
		r.BaseTemplate = prof.BaseDockerfile
		r.EnvTemplate = prof.EnvDockerfile
		r.InstanceTemplate = prof.InstanceDockerfile
		return r, nil
	}
	lang := t.RepoToExt[repo]
	r.Language = lang
	r.BaseTemplate = t.BaseTemplates[lang]
	r.InstanceTemplate = t.InstanceTemplates[lang]
	if env, ok := t.EnvTemplates[lang]; ok {
		r.EnvTemplate = env
	} else {
		r.EnvTemplate, r.EnvFromBase = r.BaseTemplate, true
	}
	if v := s.DockerSpecs.Variant(); v != "" {
		// get_dockerfile_base/_env: a "_variant" of "js_2" uses
		// _DOCKERFILE_BASE_JS_2 for both; any other value is ignored.
		if tmpl, ok := t.VariantTemplates[v]; ok {
			r.BaseTemplate, r.EnvTemplate, r.EnvFromBase = tmpl, tmpl, true
		}
	}
	if r.BaseTemplate == "" || r.InstanceTemplate == "" {
		return nil, fmt.Errorf("repo %q: no Dockerfile templates for language %q", repo, lang)
	}
	if lang == LangPython {
		r.EnvYML, r.EnvYMLCached = t.CachedEnvYML(instanceID)
	}
	return r, nil
}
