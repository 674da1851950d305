package pins

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
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
// had. An env is matched by platform and by an instance id the document
// lists, else by repo and version.
//
// An upstream Python env whose document holds conda packages (`conda list
// --explicit --md5`) is created from them: the recipe's CondaExplicit is
// the explicit spec (every captured URL#md5, once), which the renderer
// writes in place of upstream's conda create / conda env create /
// requirements steps, and its pip line becomes the pip packages conda does
// not hold (CondaPipSplit), each pinned ==.
//
// Any other env with a pip line (a profile's, or a document without conda
// packages) keeps its steps: its pip line names each requirement at its
// captured version (fixdep -> fixdep==1.0) and reads every captured PyPI
// package as a constraint (pip -c), so dependencies resolve to the
// captured versions too.
//
// Packages installed from a URL or a directory (pip's "name @ url", "-e
// path") are not on an index and are left out (FrozenWarnings lists them).
// Debian packages are not frozen.
func Frozen(docs []*sbom.Document) (Rule, error) {
	envs, err := frozenEnvs(docs)
	if err != nil {
		return Rule{}, err
	}
	return Rule{
		ID:    IDFrozen,
		Match: "env images with a captured environment document (--freeze DIR), by platform and instance id (else repo and version)",
		Change: "an upstream Python env with captured conda packages is created from their explicit URLs with md5 (conda create --file) " +
			"and pip installs the other captured PyPI packages exactly (==); otherwise setup_env.sh's pip line installs each " +
			"pip_packages requirement at its captured version (==) with every captured PyPI package as a constraint",
		Reason: "a later rebuild of a published image installs what it had, not what the index serves that day",
		Evidence: "drift between the publication the documents came from and the frozen rebuild is empty " +
			"(TestDriftFixture in cmd/swebuild); the conda form renders every captured URL#md5 and pip pin once, the rest of " +
			"upstream's files unchanged, for the 80 Verified envs (TestFrozenCondaVerified in builder/render)",
		apply: func(rec *spec.Recipe) bool { return freeze(rec, envs) },
	}, nil
}

func frozenEnvs(docs []*sbom.Document) ([]*sbom.Document, error) {
	var envs []*sbom.Document
	for i, d := range docs {
		if d == nil {
			return nil, fmt.Errorf("frozen documents: document %d is empty", i)
		}
		if err := d.Validate(); err != nil {
			return nil, fmt.Errorf("frozen documents: document %d (%q): %w", i, d.Image, err)
		}
		if d.Kind == "env" {
			envs = append(envs, d)
		}
	}
	if len(envs) == 0 {
		return nil, fmt.Errorf("frozen documents: none of the %d is an env image's", len(docs))
	}
	return envs, nil
}

// FrozenWarnings lists, one line per package, what the frozen rule over
// docs cannot freeze: captured pip packages installed from a URL or a
// directory (not on an index), and conda packages without an md5.
func FrozenWarnings(docs []*sbom.Document) []string {
	var out []string
	for _, d := range docs {
		if d == nil || d.Kind != "env" {
			continue
		}
		conda, _, unpinned := CondaPipSplit(d)
		where := d.Image + " (" + d.Platform.String() + ")"
		for _, p := range unpinned {
			if conda != nil {
				out = append(out, fmt.Sprintf("frozen: %s: pip package %s is installed from %s: not on an index, left out of the frozen env", where, p.Name, p.URL))
			} else {
				out = append(out, fmt.Sprintf("frozen: %s: pip package %s is installed from %s: not on an index, not constrained", where, p.Name, p.URL))
			}
		}
		for _, p := range conda {
			if p.Checksum == "" {
				out = append(out, fmt.Sprintf("frozen: %s: conda package %s has no md5 (listed without --md5): its URL is used unchecked", where, p.Name))
			}
		}
	}
	return out
}

// CondaPipSplit splits d's packages for a frozen conda env: conda are its
// conda packages (with an explicit URL), pinned the PyPI packages pip
// installed (pip freeze --all lists the conda-installed Python packages
// too: a PyPI package whose PEP 503 name and version equal a conda
// package's is conda's; one whose version differs was installed over it by
// pip), and unpinned pip's packages installed from a URL or a directory.
// Each list is in d's order (by name).
func CondaPipSplit(d *sbom.Document) (conda, pinned, unpinned []sbom.Package) {
	held := map[string]string{} // normalized conda name -> version
	for _, p := range d.Packages {
		if p.Ecosystem == sbom.Conda && p.URL != "" {
			conda = append(conda, p)
			held[sbom.NormalizePyPI(p.Name)] = p.Version
		}
	}
	seen := map[string]bool{}
	for _, p := range d.Packages {
		if p.Ecosystem != sbom.PyPI || p.Version == "" && p.URL == "" {
			continue
		}
		n := sbom.NormalizePyPI(p.Name)
		if v, ok := held[n]; ok && (v == p.Version || p.URL != "" && p.Version == "") {
			continue
		}
		if seen[n] {
			continue
		}
		seen[n] = true
		if p.URL != "" {
			unpinned = append(unpinned, p)
			continue
		}
		pinned = append(pinned, p)
	}
	return conda, pinned, unpinned
}

// ExplicitSpec is the conda explicit spec of packages: "@EXPLICIT", then
// URL#md5 (URL alone without a checksum) per package, in order.
func ExplicitSpec(conda []sbom.Package) string {
	var b strings.Builder
	b.WriteString("@EXPLICIT\n")
	for _, p := range conda {
		b.WriteString(p.URL)
		if md5, ok := strings.CutPrefix(p.Checksum, "md5:"); ok {
			b.WriteString("#" + md5)
		}
		b.WriteByte('\n')
	}
	return b.String()
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
	d := findEnv(rec, envs)
	if d == nil {
		return false
	}
	if rec.Profile == nil && rec.Language == spec.LangPython {
		if conda, pinned, _ := CondaPipSplit(d); len(conda) > 0 {
			rec.CondaExplicit = ExplicitSpec(conda)
			rec.Spec.PipPackages = nil
			for _, p := range pinned {
				rec.Spec.PipPackages = append(rec.Spec.PipPackages, p.Name+"=="+p.Version)
			}
			return true
		}
	}
	return freezePip(rec, d)
}

// freezePip pins rec's pip line to d's PyPI packages.
func freezePip(rec *spec.Recipe, d *sbom.Document) bool {
	if rec.Spec.PipPackages == nil || rec.EnvYMLCached {
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

// MaxFrozenDocument is the largest environment document ReadFrozen reads
// (64 MiB; the document of a conda env with its pip and Debian packages is
// a few hundred KiB).
const MaxFrozenDocument = 64 << 20

// ReadFrozen reads every *.json environment document in dir (as `swebuild
// drift --save DIR` writes them), sorted by file name. Each is read as a
// dataset is (core.ReadAllContext: at most MaxFrozenDocument bytes, a
// regular file refused by its size, a FIFO or an endless file refused at
// the limit, reading stopped when ctx is done) and its packages checked
// against their grammars (sbom.Package.Validate): the frozen rule writes
// them into shell lines. A document that cannot be read, decoded or
// checked is an error naming its file (and the package and field).
func ReadFrozen(ctx context.Context, dir string) ([]*sbom.Document, error) {
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
		raw, err := core.ReadAllContext(ctx, p, MaxFrozenDocument)
		if err != nil {
			return nil, fmt.Errorf("reading frozen documents: %w", err)
		}
		d, err := sbom.Decode(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if err := d.Validate(); err != nil {
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
		c.files = slices.Clone(s.files)
	}
	c.rules = append(c.rules, r)
	return c
}
