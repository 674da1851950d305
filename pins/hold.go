package pins

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/sbom"
)

// HoldHeredoc ends the constraints a hold rule writes into the pip line of
// setup_env.sh.
const HoldHeredoc = "SWEBUILD_HOLD"

// Hold is one package held back at a version: the frozen rule for one
// package. Platforms empty: every platform.
type Hold struct {
	Ecosystem string          `json:"ecosystem"`
	Name      string          `json:"name"`
	Version   string          `json:"version"`
	Platforms []core.Platform `json:"platforms,omitempty"`
}

// String is "pypi/fixdep==1.0", with " (linux/amd64)" when the hold is for
// some platforms only.
func (h Hold) String() string {
	s := h.Ecosystem + "/" + h.Name + "==" + h.Version
	if len(h.Platforms) > 0 {
		var ps []string
		for _, p := range h.Platforms {
			ps = append(ps, p.String())
		}
		s += " (" + strings.Join(ps, ", ") + ")"
	}
	return s
}

// on reports whether h holds on platform p.
func (h Hold) on(p core.Platform) bool {
	return len(h.Platforms) == 0 || slices.Contains(h.Platforms, p)
}

// pep508Name is a distribution name (PEP 508: letters, digits, and . _ -
// inside); pipVersion a version pip accepts in name==version, restricted to
// PEP 440's characters. Both end up in a shell line of setup_env.sh: nothing
// else may get there.
var (
	pep508Name = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`) })
	pipVersion = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.!+_-]*[A-Za-z0-9])?$`) })
)

// Validate checks h: a PyPI package (the only ecosystem a hold can pin),
// its name and version in their grammars, no platform twice. The error
// names the field.
func (h Hold) Validate() error {
	switch {
	case h.Ecosystem != sbom.PyPI:
		return fmt.Errorf("ecosystem: %q: only %s packages can be held (pip constraints); conda and Debian packages are held by the frozen rule only", h.Ecosystem, sbom.PyPI)
	case !pep508Name().MatchString(h.Name):
		return fmt.Errorf("name: %q is not a Python distribution name (PEP 508)", h.Name)
	case !pipVersion().MatchString(h.Version):
		return fmt.Errorf("version: %q is not a version (PEP 440 characters only)", h.Version)
	}
	for i, p := range h.Platforms {
		if p.IsZero() {
			return fmt.Errorf("platforms[%d]: empty", i)
		}
		if slices.Index(h.Platforms, p) != i {
			return fmt.Errorf("platforms[%d]: %s listed twice", i, p)
		}
	}
	return nil
}

// HoldSpec is a hold rule before it is a Rule: the env it matches (repo
// and version, as upstream's spec tables name them) and the packages it
// holds. The repair of a nightly proposes one (package repair), and a
// pins file (ReadFile) holds them.
type HoldSpec struct {
	ID       string `json:"id"`
	Repo     string `json:"repo"`
	Version  string `json:"version"`
	Hold     []Hold `json:"hold"`
	Reason   string `json:"reason"`
	Evidence string `json:"evidence"`
}

// ruleID is the grammar of a rule id (the built-in ones follow it too).
var ruleID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$`) })

// Validate checks s; the error names the field.
func (s HoldSpec) Validate() error {
	switch {
	case !ruleID().MatchString(s.ID):
		return fmt.Errorf("id: %q: want lower-case letters, digits, '.' and '-'", s.ID)
	case s.ID == IDFrozen || isPinRule(All(), s.ID) || isX86Rule(s.ID):
		return fmt.Errorf("id: %q is a built-in rule's id", s.ID)
	case s.Repo == "":
		return fmt.Errorf("repo: missing")
	case s.Version == "":
		return fmt.Errorf("version: missing")
	case len(s.Hold) == 0:
		return fmt.Errorf("hold: no package held")
	}
	seen := map[string][]Hold{} // normalized name -> holds so far
	for i, h := range s.Hold {
		if err := h.Validate(); err != nil {
			return fmt.Errorf("hold[%d].%w", i, err)
		}
		n := normName(h.Name)
		for _, o := range seen[n] {
			for _, p := range []core.Platform{core.AMD64, core.ARM64} {
				if h.on(p) && o.on(p) {
					return fmt.Errorf("hold[%d]: %s held twice on %s", i, h.Name, p)
				}
			}
		}
		seen[n] = append(seen[n], h)
	}
	return nil
}

// HoldRule returns the rule of s: the env images of repo s.Repo at version
// s.Version get, on setup_env.sh's pip line, every held package as a
// constraint at its version (pip install ... -c /dev/stdin <<'SWEBUILD_HOLD'
// name==version ... SWEBUILD_HOLD), so whatever requires it resolves that
// version; an env from a bundled environment.yml gets each one pinned in
// the file's pip section instead. An env with neither is not changed (the
// rule reports no change, and its id is not recorded).
func HoldRule(s HoldSpec) (Rule, error) {
	if err := s.Validate(); err != nil {
		return Rule{}, fmt.Errorf("hold rule %q: %w", s.ID, err)
	}
	var held []string
	for _, h := range s.Hold {
		held = append(held, h.String())
	}
	holds := slices.Clone(s.Hold)
	return Rule{
		ID:       s.ID,
		Match:    "repo " + s.Repo + ", version " + s.Version + " (its env images)",
		Change:   "pip holds back " + strings.Join(held, ", ") + ": a constraint on setup_env.sh's pip line (or the environment.yml pip section)",
		Reason:   s.Reason,
		Evidence: s.Evidence,
		apply: func(rec *spec.Recipe) bool {
			if rec.Repo != s.Repo || rec.Version != s.Version {
				return false
			}
			return hold(rec, holds)
		},
	}, nil
}

// hold applies holds to rec's platform.
func hold(rec *spec.Recipe, holds []Hold) bool {
	lines := map[string]string{} // normalized name -> name==version
	for _, h := range holds {
		if h.on(rec.Platform) {
			lines[normName(h.Name)] = h.Name + "==" + h.Version
		}
	}
	if len(lines) == 0 {
		return false
	}
	if rec.EnvYMLCached {
		changed := false
		for _, h := range holds {
			if !h.on(rec.Platform) || !strings.Contains(rec.EnvYML, "- pip:") {
				continue
			}
			yml, c := pinPipYML(rec.EnvYML, h.Name, h.Version)
			rec.EnvYML, changed = yml, changed || c
		}
		return changed
	}
	if rec.Spec.PipPackages == nil {
		return false
	}
	// Constraints already on the line (the frozen rule's, or another
	// hold's) take the held versions; otherwise a heredoc of its own.
	rec.Spec.PipPackages = slices.Clone(rec.Spec.PipPackages)
	for i, p := range rec.Spec.PipPackages {
		head, body, ok := strings.Cut(p, "\n")
		if !strings.HasPrefix(head, "-c /dev/stdin <<'") || !ok {
			continue
		}
		end := strings.TrimSuffix(strings.TrimPrefix(head, "-c /dev/stdin <<'"), "'")
		cons := strings.Split(strings.TrimSuffix(body, "\n"+end), "\n")
		rec.Spec.PipPackages[i] = head + "\n" + strings.Join(mergeConstraints(cons, lines), "\n") + "\n" + end
		return true
	}
	rec.Spec.PipPackages = append(rec.Spec.PipPackages,
		"-c /dev/stdin <<'"+HoldHeredoc+"'\n"+strings.Join(mergeConstraints(nil, lines), "\n")+"\n"+HoldHeredoc)
	return true
}

// mergeConstraints replaces the constraint lines naming a held package by
// the held version and adds the others, sorted.
func mergeConstraints(cons []string, held map[string]string) []string {
	var out []string
	for _, c := range cons {
		name := c
		if i := strings.IndexAny(c, "<>=!~[; @"); i >= 0 {
			name = c[:i]
		}
		if _, ok := held[normName(name)]; !ok {
			out = append(out, c)
		}
	}
	for _, l := range held {
		out = append(out, l)
	}
	slices.Sort(out)
	return out
}
