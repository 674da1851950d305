package pins

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/sbom"
)

// IDFrozen is the id of the frozen-rebuild rule (Frozen).
const IDFrozen = "frozen"

// FrozenHeredoc ends the constraints the frozen rule writes into the pip
// line of setup_env.sh.
const FrozenHeredoc = "SWEBUILD_FROZEN"

// Frozen returns the frozen-rebuild rule over captured environment
// documents (the env images' documents of an earlier publication): an env
// whose document is among docs is rendered to install what that image
// had. Its pip line (the spec's pip_packages) names each requirement at
// its captured version (fixdep -> fixdep==1.0) and reads every captured
// PyPI package as a constraint (pip -c), so dependencies resolve to the
// captured versions too (packages installed from a URL or a directory
// are left out). An env is matched by platform and by an
// instance id the document lists, else by repo and version. Envs without
// a pip line, or without a document, are unchanged.
//
// Not frozen: conda packages (the document's explicit URLs are not yet
// rendered into conda create), environment.yml envs (Verified's bundled
// files), Debian packages.
func Frozen(docs []*sbom.Document) (Rule, error) {
	var envs []*sbom.Document
	for i, d := range docs {
		if d == nil {
			return Rule{}, fmt.Errorf("frozen documents: document %d is empty", i)
		}
		if d.Kind == "env" {
			envs = append(envs, d)
		}
	}
	if len(envs) == 0 {
		return Rule{}, fmt.Errorf("frozen documents: none of the %d is an env image's", len(docs))
	}
	return Rule{
		ID:     IDFrozen,
		Match:  "env images with a captured environment document (--freeze DIR), by platform and instance id (else repo and version)",
		Change: "setup_env.sh's pip line installs each pip_packages requirement at its captured version (==) with every captured PyPI package as a constraint",
		Reason: "a later rebuild of a published image installs what it had, not what the index serves that day",
		Evidence: "drift between the publication the documents came from and the frozen rebuild is empty " +
			"(TestDriftFixture in cmd/swebuild)",
		apply: func(rec *spec.Recipe) bool { return freeze(rec, envs) },
	}, nil
}

// findEnv picks the document of rec's env.
func findEnv(rec *spec.Recipe, envs []*sbom.Document) *sbom.Document {
	var byRepo *sbom.Document
	for _, d := range envs {
		if d.Platform != rec.Platform {
			continue
		}
		if slices.Contains(d.InstanceIDs, rec.InstanceID) {
			return d
		}
		if byRepo == nil && d.Repo == rec.Repo && d.Version == rec.Version {
			byRepo = d
		}
	}
	return byRepo
}

func normName(s string) string {
	s = strings.ToLower(s)
	return strings.NewReplacer("_", "-", ".", "-").Replace(s)
}

func freeze(rec *spec.Recipe, envs []*sbom.Document) bool {
	if rec.Spec.PipPackages == nil || rec.EnvYMLCached {
		return false
	}
	d := findEnv(rec, envs)
	if d == nil {
		return false
	}
	captured := map[string]string{} // normalized name -> name==version
	var constraints []string
	for _, p := range d.Packages {
		// A package installed from a URL or a directory (pip's "name @
		// url", "-e path") is not on an index: it is not constrained.
		if p.Ecosystem != sbom.PyPI || p.Version == "" || p.URL != "" {
			continue
		}
		line := p.Name + "==" + p.Version
		if _, dup := captured[normName(p.Name)]; dup {
			continue
		}
		captured[normName(p.Name)] = line
		constraints = append(constraints, line)
	}
	if len(constraints) == 0 {
		return false
	}
	slices.Sort(constraints)
	var out []string
	for _, req := range rec.Spec.PipPackages {
		name := req
		if i := strings.IndexAny(req, "<>=!~[; @"); i >= 0 {
			name = req[:i]
		}
		if line, ok := captured[normName(name)]; ok && !strings.HasPrefix(req, "-") {
			out = append(out, line)
			continue
		}
		out = append(out, req)
	}
	out = append(out, "-c /dev/stdin <<'"+FrozenHeredoc+"'\n"+strings.Join(constraints, "\n")+"\n"+FrozenHeredoc)
	rec.Spec.PipPackages = out
	return true
}

// ReadFrozen reads every *.json environment document in dir (as `swebuild
// drift --save DIR` writes them), sorted by file name; one that cannot be
// decoded is an error naming its file.
func ReadFrozen(dir string) ([]*sbom.Document, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading frozen documents: %w", err)
	}
	var out []*sbom.Document
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("reading frozen documents: %w", err)
		}
		d, err := sbom.Decode(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no environment documents (*.json)", dir)
	}
	return out, nil
}

// With returns a copy of s with rule r applied after s's rules.
func (s *Set) With(r Rule) *Set {
	c := &Set{}
	if s != nil {
		c.rules = slices.Clone(s.rules)
		c.lifted = slices.Clone(s.lifted)
	}
	c.rules = append(c.rules, r)
	return c
}
