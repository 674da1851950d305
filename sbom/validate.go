package sbom

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"sync"
	"unicode"
)

// Validation of a document's packages against the grammars of their
// ecosystems. A document is data from a registry (an earlier publication):
// the frozen rebuild (pins.Frozen) writes its names, versions and URLs into
// the shell lines of setup_env.sh, so a name, version or URL outside its
// grammar (a newline, a quote, "$(", a heredoc's end) is refused before
// anything is rendered, naming the package and the field.

// FieldError is a package field outside its grammar.
type FieldError struct {
	Package string // ecosystem/name as read (quoted in the message)
	Field   string // name, version, url, checksum, arch, build
	Value   string
	Msg     string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("package %s/%q: %s %q: %s", ecoOf(e.Package), nameOf(e.Package), e.Field, e.Value, e.Msg)
}

func ecoOf(key string) string  { e, _, _ := strings.Cut(key, "/"); return e }
func nameOf(key string) string { _, n, _ := strings.Cut(key, "/"); return n }

// PEP 508 names: ASCII letters and digits, with ".", "-" and "_" inside.
var pep508Name = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(?i:[a-z0-9]|[a-z0-9][a-z0-9._-]*[a-z0-9])$`) })

// PEP 440 versions (the public version with an optional local label), in
// any of the spellings PEP 440 normalises ("1.0.post1", "1.0-1", "1!2.0rc1",
// "v1.0", "22.2.0+repack"), case-insensitive, no spaces.
var pep440Version = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(?i:v?(?:[0-9]+!)?[0-9]+(?:\.[0-9]+)*` +
		`(?:[-_.]?(?:alpha|a|beta|b|preview|pre|c|rc)[-_.]?[0-9]*)?` +
		`(?:-[0-9]+|[-_.]?(?:post|rev|r)[-_.]?[0-9]*)?` +
		`(?:[-_.]?dev[-_.]?[0-9]*)?` +
		`(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?)$`)
})

// conda's package grammar: names lower-case letters, digits, "_", "-" and
// "."; versions letters, digits, "_", ".", "+" and "!" (no "-": the file
// name is NAME-VERSION-BUILD); build strings the same without "!"; a
// subdir such as linux-64, linux-aarch64 or noarch.
var (
	condaName    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9_][a-z0-9_.-]*$`) })
	condaVersion = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.+!]+$`) })
	condaBuild   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.+]+$`) })
	condaSubdir  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]+(?:-[a-z0-9_]+)*$`) })
)

// A conda explicit URL: http(s) or file, then only characters that need no
// quoting anywhere (RFC 3986's unreserved, "/", "%", ":" and "@" of a
// token or a port, "+" and "!" of versions): no space, quote, "#", "?",
// "$" or control character.
var condaURL = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(?:https?|file)://[A-Za-z0-9._~/%:@+!-]+$`) })

// Debian policy 5.6.1 and 5.6.12: package names are lower-case letters,
// digits, "+", "-" and ".", at least two long, starting alphanumeric;
// versions are [epoch:]upstream[-revision] of letters, digits and
// ".+~-", the upstream part starting with a digit (as dpkg requires).
var (
	debName    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`) })
	debVersion = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(?:[0-9]+:)?[0-9][A-Za-z0-9.+~-]*$`) })
	debArch    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]+(?:-[a-z0-9]+)*$`) })
)

// checksums: algorithm -> hex digits.
var checksumLen = map[string]int{"md5": 32, "sha1": 40, "sha256": 64, "sha512": 128}

var lowerHex = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]+$`) })

// Validate checks p's fields against its ecosystem's grammar: a pypi name
// (PEP 508) and version (PEP 440); a conda name, version, build, subdir and
// explicit URL (http(s) or file, whose file name is NAME-VERSION-BUILD of
// these fields and whose directory is the subdir); a Debian name, version
// and architecture; a checksum ALG:HEX of the right length; and, for pip's
// packages installed from a URL or a directory, a source with no control
// character. An error is a *FieldError naming the field.
func (p Package) Validate() error {
	bad := func(field, value, msg string) error {
		return &FieldError{Package: p.Key(), Field: field, Value: value, Msg: msg}
	}
	switch p.Ecosystem {
	case PyPI:
		if !pep508Name().MatchString(p.Name) {
			return bad("name", p.Name, "not a PEP 508 distribution name")
		}
		if p.Version != "" && !pep440Version().MatchString(p.Version) {
			return bad("version", p.Version, "not a PEP 440 version")
		}
		if i := strings.IndexFunc(p.URL, unicode.IsControl); i >= 0 {
			return bad("url", p.URL, "a control character in pip's source")
		}
	case Conda:
		if !condaName().MatchString(p.Name) {
			return bad("name", p.Name, "not a conda package name (lower-case letters, digits, _ - .)")
		}
		if !condaVersion().MatchString(p.Version) {
			return bad("version", p.Version, "not a conda version (letters, digits, _ . + !)")
		}
		if p.Build != "" && !condaBuild().MatchString(p.Build) {
			return bad("build", p.Build, "not a conda build string (letters, digits, _ . +)")
		}
		if p.Arch != "" && !condaSubdir().MatchString(p.Arch) {
			return bad("arch", p.Arch, "not a conda subdir (such as linux-64 or noarch)")
		}
		if p.URL != "" {
			if msg := p.condaURLProblem(); msg != "" {
				return bad("url", p.URL, msg)
			}
		}
	case Deb:
		if !debName().MatchString(p.Name) {
			return bad("name", p.Name, "not a Debian package name")
		}
		if !debVersion().MatchString(p.Version) {
			return bad("version", p.Version, "not a Debian version ([epoch:]upstream[-revision])")
		}
		if p.Arch != "" && !debArch().MatchString(p.Arch) {
			return bad("arch", p.Arch, "not a Debian architecture")
		}
	default:
		return bad("ecosystem", p.Ecosystem, "not pypi, conda or deb")
	}
	if p.Checksum != "" {
		alg, hex, _ := strings.Cut(p.Checksum, ":")
		if n, ok := checksumLen[alg]; !ok || len(hex) != n || !lowerHex().MatchString(hex) {
			return bad("checksum", p.Checksum, "not md5, sha1, sha256 or sha512 as ALG:HEX")
		}
	}
	return nil
}

// condaURLProblem says what is wrong with a conda package's explicit URL,
// or "".
func (p Package) condaURLProblem() string {
	if !condaURL().MatchString(p.URL) {
		return "not an http(s) or file URL of plain characters (no space, quote, #, ?, $ or control character)"
	}
	u, err := url.Parse(p.URL)
	if err != nil {
		return "not a URL: " + err.Error()
	}
	dir, file := path.Split(u.Path)
	stem, ok := strings.CutSuffix(file, ".conda")
	if !ok {
		if stem, ok = strings.CutSuffix(file, ".tar.bz2"); !ok {
			return "its file name does not end in .conda or .tar.bz2"
		}
	}
	if want := p.Name + "-" + p.Version + "-" + p.Build; stem != want {
		return fmt.Sprintf("its file name is %s, not the package's %s", file, want)
	}
	if p.Arch != "" && path.Base(strings.TrimSuffix(dir, "/")) != p.Arch {
		return fmt.Sprintf("its directory is not the package's subdir %s", p.Arch)
	}
	return ""
}

// Validate checks every package of d (Package.Validate); the error names
// the first package outside its grammar and the field.
func (d *Document) Validate() error {
	for _, p := range d.Packages {
		if err := p.Validate(); err != nil {
			return err
		}
	}
	return nil
}
