// Package spec holds the upstream SWE-bench v4.1.0 spec tables of every
// language as embedded data (transcribed from the shared reference's
// specs.json and specs-multilingual.json by `go generate`), lookups into
// them, and the one function deciding which platforms an instance is built
// for (Decide / Platforms).
package spec

//go:generate go run ./internal/gen -shared ../../../shared/swebench-reference -out data

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/swebuild/swebuild/builder/spec/internal/schema"
)

//go:embed data/specs.json
var specsJSON []byte

//go:embed data/specs
var repoSpecsFS embed.FS

//go:embed data/envcache
var envCache embed.FS

//go:embed data/final/specs.json
var finalSpecsJSON []byte

//go:embed data/final/specs
var finalRepoSpecsFS embed.FS

// Table versions (--specs-version).
const (
	// VersionV410 is SWE-bench v4.1.0's tables and code (the default).
	VersionV410 = "4.1.0"
	// VersionFinal is the tables' final state at upstream 2514c86 (C libffi,
	// Rust Cargo.lock pins, Java sequential tests) and the Python eval.sh of
	// #539 (rm -f of the files a test patch adds).
	VersionFinal = "final"
)

// Languages (upstream's MAP_REPO_TO_EXT values).
const (
	LangPython = "py"
	LangJS     = "js"
)

// Spec is one entry of upstream's MAP_REPO_VERSION_TO_SPECS. A nil slice or
// nil Install means the key is absent upstream (which changes the output:
// upstream tests `"install" in specs`), an empty slice means present but empty.
//
// Python specs (make_*_script_list_py) use Python, Packages, Install,
// PipPackages, PreInstall, EvalCommands and TestCmd. The other languages
// (make_*_script_list_common) use PreInstall, InstallCmds, Build, AptPkgs,
// TestCmds and DockerSpecs; data/specs.json holds them normalized by
// internal/gen (install -> install_cmds, test_cmd -> test_cmds, apt-pkgs ->
// apt_pkgs).
type Spec struct {
	Python               string   `json:"python,omitempty"`
	Packages             string   `json:"packages,omitempty"`
	Install              *string  `json:"install,omitempty"`
	PipPackages          []string `json:"pip_packages,omitempty"`
	PreInstall           []string `json:"pre_install,omitempty"`
	EvalCommands         []string `json:"eval_commands,omitempty"`
	TestCmd              string   `json:"test_cmd,omitempty"`
	NoUseEnv             bool     `json:"no_use_env,omitempty"`
	ExecuteTestAsNonroot bool     `json:"execute_test_as_nonroot,omitempty"`
	NanoCPUs             int64    `json:"nano_cpus,omitempty"`

	InstallCmds []string `json:"install_cmds,omitempty"`
	Build       []string `json:"build,omitempty"`
	AptPkgs     []string `json:"apt_pkgs,omitempty"`
	TestCmds    []string `json:"test_cmds,omitempty"`
	// DockerSpecs feed the Dockerfile templates and, when not empty, the
	// base and env image keys.
	DockerSpecs DockerSpecs `json:"docker_specs,omitzero"`
}

// Clone returns a deep copy, so pins can edit it without touching the tables.
func (s Spec) Clone() Spec {
	c := s
	if s.Install != nil {
		v := *s.Install
		c.Install = &v
	}
	c.PipPackages = cloneStrings(s.PipPackages)
	c.PreInstall = cloneStrings(s.PreInstall)
	c.EvalCommands = cloneStrings(s.EvalCommands)
	c.InstallCmds = cloneStrings(s.InstallCmds)
	c.Build = cloneStrings(s.Build)
	c.AptPkgs = cloneStrings(s.AptPkgs)
	c.TestCmds = cloneStrings(s.TestCmds)
	// DockerSpecs is never changed in place (DockerSpecs.With copies).
	return c
}

func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append(make([]string, 0, len(s)), s...)
}

// Tables are the upstream constants rendering reads. Treat as read-only
// after Load; per-instance changes go through a Recipe.
type Tables struct {
	// The tables as data/specs.json holds them (ReqsPaths, UseX86,
	// RepoToExt, the templates, ...): `go doc ./builder/spec/internal/schema`.
	// internal/gen writes them with the same type.
	schema.Tables

	// Version is the table version loaded (VersionV410 or VersionFinal).
	Version string `json:"-"`

	// Profiles are extra, data-defined spec sets (see LoadExtra); a repo
	// found here is rendered with its profile instead of upstream templates.
	Profiles map[string]*Profile `json:"-"`

	platforms platformPolicy
	// envCache is the embedded data/envcache folder (zero value: none).
	envCache embed.FS

	// specsFS holds one JSON file per repo (data/specs); a repo is decoded
	// (and its x86-only rules evaluated) the first time it is looked up:
	// decoding the tables of all 66 repos at Load took 9-11 ms (best of 5,
	// BenchmarkSpecLoad; 1.7 ms with the Python repos alone), a dataset
	// uses a few of them.
	specsFS embed.FS
	// overlayFS, when set, holds the repos whose specs differ from
	// v4.1.0's (data/final/specs); a repo found there is read from it.
	overlayFS  embed.FS
	hasOverlay bool
	mu         sync.Mutex
	repos      map[string]*repoSpecs
}

// repoSpecs is one decoded repo of the tables.
type repoSpecs struct {
	versions map[string]Spec
	// rules[version] is the first x86-only rule the version's spec meets;
	// anyRule the first one any version meets (id-only decisions).
	rules   map[string]string
	anyRule string
	err     error
}

// repo returns the decoded specs of repo (nil, false when the tables do
// not have it). Safe for concurrent use.
func (t *Tables) repo(name string) (*repoSpecs, bool) {
	if _, ok := t.RepoToExt[name]; !ok {
		return nil, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.repos[name]; r != nil {
		return r, true
	}
	r := &repoSpecs{}
	file := strings.ReplaceAll(name, "/", "__") + ".json"
	raw, err := t.specsFS.ReadFile("data/specs/" + file)
	if t.hasOverlay {
		if b, oerr := t.overlayFS.ReadFile("data/final/specs/" + file); oerr == nil {
			raw, err = b, nil
		}
	}
	if err == nil {
		err = json.Unmarshal(raw, &r.versions)
	}
	if err != nil {
		r.err = fmt.Errorf("decoding the embedded spec table of %s: %w", name, err)
	} else {
		r.rules, r.anyRule = evalRules(t.RepoToExt[name], r.versions, t.platforms.lifted)
	}
	if t.repos == nil {
		t.repos = map[string]*repoSpecs{}
	}
	t.repos[name] = r
	return r, true
}

// Repos lists the repos of the upstream tables, sorted.
func (t *Tables) Repos() []string { return sortedKeys(t.RepoToExt) }

// Load decodes the embedded v4.1.0 tables. Each call returns a fresh value.
func Load() (*Tables, error) { return LoadVersion(VersionV410) }

// LoadVersion decodes the embedded tables of one version (VersionV410 or
// VersionFinal; "" is VersionV410). Each call returns a fresh value.
func LoadVersion(version string) (*Tables, error) {
	t := &Tables{specsFS: repoSpecsFS}
	raw := specsJSON
	switch version {
	case VersionV410, "":
		version = VersionV410
	case VersionFinal:
		raw = finalSpecsJSON
		t.overlayFS, t.hasOverlay = finalRepoSpecsFS, true
	default:
		return nil, fmt.Errorf("unknown spec table version %q (want %s or %s)", version, VersionV410, VersionFinal)
	}
	if err := json.Unmarshal(raw, t); err != nil {
		return nil, fmt.Errorf("decoding embedded %s spec tables: %w", version, err)
	}
	t.Version = version
	t.platforms = newPlatformPolicy(t)
	t.envCache = envCache
	return t, nil
}

// Lookup returns the spec for repo and version, or an error naming which is
// unknown.
func (t *Tables) Lookup(repo, version string) (Spec, error) {
	if p := t.Profiles[repo]; p != nil {
		if s, ok := p.specs[version]; ok {
			return s, nil
		}
		return Spec{}, fmt.Errorf("repo %q: version %q not in its profile's specs (have %v)", repo, version, sortedKeys(p.specs))
	}
	r, ok := t.repo(repo)
	if !ok {
		return Spec{}, fmt.Errorf("repo %q has no spec in the SWE-bench %s tables", repo, t.Version)
	}
	if r.err != nil {
		return Spec{}, r.err
	}
	s, ok := r.versions[version]
	if !ok {
		return Spec{}, fmt.Errorf("repo %q: version %q not in the %s spec table", repo, version, t.Version)
	}
	return s, nil
}

// Language is the repo's language (MAP_REPO_TO_EXT, or its profile's),
// "" for an unknown repo.
func (t *Tables) Language(repo string) string {
	if p := t.Profiles[repo]; p != nil {
		return p.Language
	}
	return t.RepoToExt[repo]
}

// Known reports whether repo/version can be rendered (for dataset validation).
func (t *Tables) Known(repo, version string) bool {
	_, err := t.Lookup(repo, version)
	return err == nil
}

// CachedEnvYML returns the environment.yml upstream v4.1.0 bundles for this
// instance id (swebench/resources/swebench-og/<repo>/<number>/environment.yml),
// which upstream uses for any record with that id, whatever its spec says.
func (t *Tables) CachedEnvYML(instanceID string) (string, bool) {
	name := "data/envcache/" + instanceID + ".yml"
	if !fs.ValidPath(name) {
		return "", false
	}
	b, err := t.envCache.ReadFile(name)
	if err != nil || len(b) == 0 {
		return "", err == nil
	}
	return string(b), true
}

// Branch is upstream's REPO_BASE_COMMIT_BRANCH lookup ("" when none).
func (t *Tables) Branch(repo, baseCommit string) string {
	return t.Branches[repo][baseCommit]
}

// sortedKeys are m's keys in order.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// Versions lists the versions known for repo (upstream table or a loaded
// profile), sorted; ok=false for an unknown repo. It satisfies
// dataset.Known.
func (t *Tables) Versions(repo string) ([]string, bool) {
	if p := t.Profiles[repo]; p != nil {
		return sortedKeys(p.specs), true
	}
	r, ok := t.repo(repo)
	if !ok {
		return nil, false
	}
	return sortedKeys(r.versions), true
}
