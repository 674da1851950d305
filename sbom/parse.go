package sbom

import (
	"bytes"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Listing formats: what a profile's listing command prints.
const (
	// FormatPipFreeze is `pip freeze --all`: name==version lines, PEP 508
	// direct references (name @ url) and editable installs (-e ...).
	FormatPipFreeze = "pip-freeze"
	// FormatCondaExplicit is `conda list --explicit --md5`: one package
	// URL a line, with #md5 when asked.
	FormatCondaExplicit = "conda-explicit"
	// FormatDpkgQuery is `dpkg-query -W -f '${Package}\t${Version}\t${Architecture}\n'`.
	FormatDpkgQuery = "dpkg-query"
)

// Formats lists the formats Parse reads.
func Formats() []string { return []string{FormatPipFreeze, FormatCondaExplicit, FormatDpkgQuery} }

// Package is one installed package.
type Package struct {
	Ecosystem string // pypi, conda, deb
	// Name: pypi names are PEP 503 normalised (lower case, runs of -_. -> -);
	// others as the tool lists them.
	Name    string
	Version string
	// URL is the conda explicit URL, or pip's source text for a package
	// not installed from an index ("name @ url" or "-e ..." as printed).
	URL string
	// Checksum is "md5:<hex>" (conda list --explicit --md5).
	Checksum string
	// Arch is the deb architecture or the conda subdir.
	Arch string
	// Build is the conda build string (e.g. "h2ae2ef3_17"); empty for the
	// other ecosystems. Two conda packages of one version may differ in it.
	Build string
}

// Key is the package's identity across two listings: ecosystem/name.
func (p Package) Key() string { return p.Ecosystem + "/" + p.Name }

// Listing is the output of one listing command run in an image.
type Listing struct {
	Format  string // FormatPipFreeze, FormatCondaExplicit or FormatDpkgQuery
	Command string // the command as run
	Output  []byte
}

// Packages parses the listing (Parse with its format).
func (l Listing) Packages() ([]Package, error) {
	ps, err := Parse(l.Format, l.Output)
	if err != nil {
		return nil, fmt.Errorf("reading the output of %q: %w", l.Command, err)
	}
	return ps, nil
}

// Parse reads the output of a listing command of the given format. Errors
// name the line number and its text.
func Parse(format string, out []byte) ([]Package, error) {
	var parse func(lines []string) ([]Package, error)
	switch format {
	case FormatPipFreeze:
		parse = parsePipFreeze
	case FormatCondaExplicit:
		parse = parseCondaExplicit
	case FormatDpkgQuery:
		parse = parseDpkgQuery
	default:
		return nil, fmt.Errorf("unknown listing format %q (want one of %s)", format, strings.Join(Formats(), ", "))
	}
	text := string(bytes.ReplaceAll(out, []byte("\r\n"), []byte("\n")))
	ps, err := parse(strings.Split(text, "\n"))
	if err != nil {
		return nil, fmt.Errorf("%s listing: %w", format, err)
	}
	Sort(ps)
	return ps, nil
}

// Sort orders packages by Key, then Version, Arch and URL.
func Sort(ps []Package) {
	slices.SortStableFunc(ps, func(a, b Package) int {
		for _, c := range [][2]string{{a.Key(), b.Key()}, {a.Version, b.Version}, {a.Arch, b.Arch}, {a.Build, b.Build}, {a.URL, b.URL}} {
			if n := strings.Compare(c[0], c[1]); n != 0 {
				return n
			}
		}
		return 0
	})
}

func lineError(n int, line, format string, args ...any) error {
	return fmt.Errorf("line %d %q: %s", n, line, fmt.Sprintf(format, args...))
}

var pep503 = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[-_.]+`) })

// NormalizePyPI is PEP 503's name normalisation.
func NormalizePyPI(name string) string { return strings.ToLower(pep503().ReplaceAllString(name, "-")) }

// A PEP 508 distribution name.
var pipName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`) })

// pip's comment before an editable line: "# Editable Git install with no
// remote (calc==1.0.0)", "# Editable install with no version control
// (calc==1.0.0)".
var editableComment = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^#\s*Editable .*\(([^()=\s]+)==([^()\s]+)\)\s*$`) })

func parsePipFreeze(lines []string) ([]Package, error) {
	var ps []Package
	var pendName, pendVersion string // from an "# Editable ..." comment
	for i, raw := range lines {
		n, line := i+1, strings.TrimSpace(raw)
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "#"):
			if m := editableComment().FindStringSubmatch(line); m != nil {
				pendName, pendVersion = m[1], m[2]
			}
			continue
		case strings.HasPrefix(line, "-e ") || strings.HasPrefix(line, "--editable "):
			src := strings.TrimSpace(line[strings.Index(line, " ")+1:])
			name, version := pendName, pendVersion
			if name == "" {
				name, version = eggName(src)
			}
			if name == "" {
				return nil, lineError(n, raw, "an editable install whose package name is neither in the comment before it nor in an #egg= fragment")
			}
			ps = append(ps, Package{Ecosystem: PyPI, Name: NormalizePyPI(name), Version: version, URL: line})
		case strings.Contains(line, " @ "):
			name, _, _ := strings.Cut(line, " @ ")
			name = strings.TrimSpace(name)
			if b, _, ok := strings.Cut(name, "["); ok { // extras
				name = b
			}
			if !pipName().MatchString(name) {
				return nil, lineError(n, raw, "%q is not a package name", name)
			}
			ps = append(ps, Package{Ecosystem: PyPI, Name: NormalizePyPI(name), URL: line})
		case strings.HasPrefix(line, "-"):
			return nil, lineError(n, raw, "an option pip freeze does not print")
		default:
			name, version, ok := strings.Cut(line, "==")
			if !ok {
				return nil, lineError(n, raw, "want name==version, name @ url or -e source")
			}
			version = strings.TrimPrefix(version, "=") // name===version
			name, version = strings.TrimSpace(name), strings.TrimSpace(version)
			if !pipName().MatchString(name) || version == "" {
				return nil, lineError(n, raw, "want name==version")
			}
			ps = append(ps, Package{Ecosystem: PyPI, Name: NormalizePyPI(name), Version: version})
		}
		pendName, pendVersion = "", ""
	}
	return ps, nil
}

// eggName reads the name (and version, when given as name-version) from an
// #egg= fragment of an editable source.
func eggName(src string) (string, string) {
	_, frag, ok := strings.Cut(src, "#")
	if !ok {
		return "", ""
	}
	q, err := url.ParseQuery(frag)
	if err != nil {
		return "", ""
	}
	egg := q.Get("egg")
	if egg == "" {
		return "", ""
	}
	return egg, ""
}

func parseCondaExplicit(lines []string) ([]Package, error) {
	var ps []Package
	for i, raw := range lines {
		n, line := i+1, strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") || line == "@EXPLICIT" {
			continue
		}
		p, err := condaPackage(line)
		if err != nil {
			return nil, lineError(n, raw, "%v", err)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// condaPackage reads one explicit line:
// CHANNEL/SUBDIR/NAME-VERSION-BUILD.{conda,tar.bz2}[#MD5].
func condaPackage(line string) (Package, error) {
	u, md5, _ := strings.Cut(line, "#")
	pu, err := url.Parse(u)
	if err != nil || pu.Scheme == "" {
		return Package{}, fmt.Errorf("not a package URL")
	}
	dir, file := path.Split(pu.Path)
	var stem string
	for _, ext := range []string{".tar.bz2", ".conda"} {
		if s, ok := strings.CutSuffix(file, ext); ok {
			stem = s
		}
	}
	if stem == "" {
		return Package{}, fmt.Errorf("the file name %q does not end in .conda or .tar.bz2", file)
	}
	parts := strings.Split(stem, "-")
	if len(parts) < 3 {
		return Package{}, fmt.Errorf("the file name %q is not NAME-VERSION-BUILD", file)
	}
	name := strings.Join(parts[:len(parts)-2], "-")
	p := Package{Ecosystem: Conda, Name: name, Version: parts[len(parts)-2], Build: parts[len(parts)-1], URL: u, Arch: path.Base(strings.TrimSuffix(dir, "/"))}
	if md5 != "" {
		if !md5Hex().MatchString(md5) {
			return Package{}, fmt.Errorf("%q is not an md5", md5)
		}
		p.Checksum = "md5:" + md5
	}
	return p, nil
}

var md5Hex = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{32}$`) })

func parseDpkgQuery(lines []string) ([]Package, error) {
	var ps []Package
	for i, raw := range lines {
		n := i + 1
		if strings.TrimSpace(raw) == "" {
			continue
		}
		f := strings.Split(raw, "\t")
		if len(f) != 3 {
			return nil, lineError(n, raw, "want 3 tab-separated fields (package, version, architecture), got %d", len(f))
		}
		if f[0] == "" {
			return nil, lineError(n, raw, "no package name")
		}
		if f[1] == "" { // known to dpkg but not installed
			continue
		}
		ps = append(ps, Package{Ecosystem: Deb, Name: f[0], Version: f[1], Arch: f[2]})
	}
	return ps, nil
}
