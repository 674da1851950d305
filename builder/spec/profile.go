package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests/naming"
	"github.com/swebuild/swebuild/sbom"
)

// Profile replaces the upstream conda/ubuntu templates for a set of repos
// (the offline fixture). Dockerfile texts use Python str.format placeholders
// like the upstream templates: base gets {platform} {arch} {conda_arch} and
// the docker defaults; env gets {platform} {arch} {base_image_key}; instance
// gets {platform} {env_image_name}.
type Profile struct {
	Name string `json:"name"`
	// Language is the key segment (sweb.base.<language>.<arch>); default "py".
	Language           string `json:"language,omitempty"`
	BaseDockerfile     string `json:"base_dockerfile"`
	EnvDockerfile      string `json:"env_dockerfile"`
	InstanceDockerfile string `json:"instance_dockerfile"`
	// Activate replaces upstream's "source /opt/miniconda3/bin/activate" +
	// "conda activate testbed" pair in setup_env.sh, setup_repo.sh and eval.sh.
	Activate []string `json:"activate"`
	// EnvCreate are the env creation lines of setup_env.sh (after which
	// Activate and, if any, the spec's pip_packages install follow).
	EnvCreate []string `json:"env_create"`
	// CloneURL is the clone source; {repo} is "owner/name", {name} is "name".
	CloneURL string `json:"clone_url"`
	// Context lists the extra build-context files per node kind
	// ("base", "env", "instance"); {arch} is replaced by the OCI arch
	// (amd64/arm64). The builder supplies them (e.g. from its cache dir).
	Context map[string][]string `json:"context,omitempty"`
	// LogParser names the upstream log parser (e.g. "parse_log_pytest") that
	// grades this profile's repos, which are not in upstream's parser map.
	LogParser string `json:"log_parser,omitempty"`
	// Inventory are the listing commands whose output is the resolved
	// environment of the profile's env and instance images (the SBOM the
	// builder attaches; see Tables.Inventory). Absent: nothing is listed.
	// Not part of any rendered file or image key.
	Inventory []InventoryCommand `json:"inventory,omitempty"`
	specs     map[string]Spec
}

// InventoryCommand is one listing command: Run is a bash command line run
// in the image (its ENV and WORKDIR applied, no network), whose standard
// output Format (sbom.Formats: pip-freeze, conda-explicit, dpkg-query)
// parses.
type InventoryCommand struct {
	Format string `json:"format"`
	Run    string `json:"run"`
}

// ExtraSpecs is the --specs file format: one profile with its repos, and/or a
// list of them (one per language, say), plus the x86-only instance ids.
type ExtraSpecs struct {
	Profile Profile                    `json:"profile"`
	Specs   map[string]map[string]Spec `json:"specs"`
	// Profiles are further profiles, each with its own repos.
	Profiles []ProfileSpecs `json:"profiles,omitempty"`
	// X86Only lists instance ids that never get an arm64 image, like
	// upstream's USE_X86 list.
	X86Only []string `json:"x86_only,omitempty"`
}

// ProfileSpecs is one profile and the repos it renders.
type ProfileSpecs struct {
	Profile Profile                    `json:"profile"`
	Specs   map[string]map[string]Spec `json:"specs"`
}

// LoadExtra reads a --specs file and registers its repos with their profiles.
// Repos already in the upstream table, or named by two profiles, are refused
// (no silent shadowing).
func (t *Tables) LoadExtra(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading specs file: %w", err)
	}
	var x ExtraSpecs
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&x); err != nil {
		return fmt.Errorf("%s: decoding specs file: %w", path, err)
	}
	groups := x.Profiles
	where := make([]string, len(groups))
	for i := range groups {
		where[i] = fmt.Sprintf("profiles[%d].", i)
	}
	if x.Profile.Name != "" || len(x.Profiles) == 0 || x.Specs != nil {
		groups = append([]ProfileSpecs{{Profile: x.Profile, Specs: x.Specs}}, groups...)
		where = append([]string{""}, where...)
	}
	if t.Profiles == nil {
		t.Profiles = map[string]*Profile{}
	}
	for i, g := range groups {
		if err := t.addProfile(g, path, where[i]); err != nil {
			return err
		}
	}
	for i, id := range x.X86Only {
		if err := naming.ValidateID(id); err != nil {
			return fmt.Errorf("%s: x86_only[%d]: %w", path, i, err)
		}
		t.OverridePlatforms(id, []core.Platform{core.AMD64})
	}
	return nil
}

// addProfile checks one profile and registers its repos; where prefixes the
// field names in errors ("" or "profiles[N].").
func (t *Tables) addProfile(g ProfileSpecs, path, where string) error {
	p := g.Profile
	switch {
	case p.Name == "":
		return fmt.Errorf("%s: %sprofile.name: missing", path, where)
	case p.BaseDockerfile == "":
		return fmt.Errorf("%s: %sprofile.base_dockerfile: missing", path, where)
	case p.EnvDockerfile == "":
		return fmt.Errorf("%s: %sprofile.env_dockerfile: missing", path, where)
	case p.InstanceDockerfile == "":
		return fmt.Errorf("%s: %sprofile.instance_dockerfile: missing", path, where)
	case p.CloneURL == "":
		return fmt.Errorf("%s: %sprofile.clone_url: missing", path, where)
	case p.Activate == nil:
		// An explicit [] says there is no environment to activate (as for
		// upstream's non-Python specs); a missing field is a mistake.
		return fmt.Errorf("%s: %sprofile.activate: missing (write [] when there is nothing to activate)", path, where)
	}
	for i, c := range p.Inventory {
		if !slices.Contains(sbom.Formats(), c.Format) {
			return fmt.Errorf("%s: %sprofile.inventory[%d].format: %q is not one of %s", path, where, i, c.Format, strings.Join(sbom.Formats(), ", "))
		}
		if strings.TrimSpace(c.Run) == "" {
			return fmt.Errorf("%s: %sprofile.inventory[%d].run: missing", path, where, i)
		}
	}
	if p.Language == "" {
		p.Language = "py"
	}
	repos := slices.Sorted(maps.Keys(g.Specs))
	for _, repo := range repos {
		if _, ok := t.RepoToExt[repo]; ok {
			return fmt.Errorf("%s: %sspecs.%s: repo is already in the upstream table", path, where, repo)
		}
		if q, ok := t.Profiles[repo]; ok {
			return fmt.Errorf("%s: %sspecs.%s: repo is already in profile %q", path, where, repo, q.Name)
		}
		for v, s := range g.Specs[repo] {
			if s.TestCmd == "" {
				return fmt.Errorf("%s: %sspecs.%s.%s.test_cmd: missing", path, where, repo, v)
			}
		}
		t.Profiles[repo] = &Profile{}
		*t.Profiles[repo] = p
		t.Profiles[repo].specs = g.Specs[repo]
	}
	return nil
}

// LogParser returns the log parser a profile names for repo, if any.
func (t *Tables) LogParser(repo string) string {
	if p := t.Profiles[repo]; p != nil {
		return p.LogParser
	}
	return ""
}

// Upstream's listing commands. Python images: the testbed conda env's
// packages (conda list --explicit --md5: URL and md5 of each) and pip's
// view of it (pip freeze --all: also what pip installed, editable
// installs included); every other language: the system's Debian packages.
const (
	upstreamCondaActivate = "source /opt/miniconda3/bin/activate && conda activate testbed"
	dpkgQueryRun          = `dpkg-query -W -f '${Package}\t${Version}\t${Architecture}\n'`
)

// Inventory returns the listing commands for the images of repo: its
// profile's (none when the profile lists none), else upstream's defaults by
// language (Python: conda list --explicit --md5 and python -m pip freeze
// --all in the testbed env; others: dpkg-query); nil for an unknown repo.
func (t *Tables) Inventory(repo string) []InventoryCommand {
	if p := t.Profiles[repo]; p != nil {
		return slices.Clone(p.Inventory)
	}
	switch t.Language(repo) {
	case "":
		return nil
	case "py":
		return []InventoryCommand{
			{Format: sbom.FormatCondaExplicit, Run: upstreamCondaActivate + " && conda list --explicit --md5"},
			{Format: sbom.FormatPipFreeze, Run: upstreamCondaActivate + " && python -m pip freeze --all"},
		}
	}
	return []InventoryCommand{{Format: sbom.FormatDpkgQuery, Run: dpkgQueryRun}}
}
