// Package envfile is what upstream SWE-bench v4.1.0 does with the few
// repository files its Python env scripts embed (requirements.txt and
// environment.yml at environment_setup_commit;
// swebench/harness/test_spec/python.py: get_requirements_by_commit,
// clean_requirements, get_environment_yml_by_commit,
// clean_environment_yml), reproduced byte for byte, including Python's
// notion of whitespace (internal/pystr) and code-point indentation: where
// upstream looks for them (Candidates), "-r" includes, REPLACE_REQ_PACKAGES,
// the env renamed, and requests' text decoding.
//
// It does no I/O of its own: GetRequirements and GetEnvironmentYML ask a
// Source for each URL (package fetch's client, through pipeline, which
// resolves the files before rendering); builder/render names the candidate
// URLs in its errors.
package envfile

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/swebuild/swebuild/internal/pystr"
)

// ErrNotFound is wrapped by GetRequirements and GetEnvironmentYML when no
// candidate path exists.
var ErrNotFound = errors.New("not found")

// Replacement is one entry of upstream's REPLACE_REQ_PACKAGES: Package is
// replaced by With, or removed when Remove is set (upstream's None).
type Replacement struct {
	Package string
	With    string
	Remove  bool
}

// Replacements reads REPLACE_REQ_PACKAGES as the spec tables hold it
// (spec.Tables.ReplaceReqPackages): (package, replacement) pairs, an empty
// replacement standing for upstream's None (the line is removed).
func Replacements(pairs [][2]string) []Replacement {
	out := make([]Replacement, 0, len(pairs))
	for _, p := range pairs {
		out = append(out, Replacement{Package: p[0], With: p[1], Remove: p[1] == ""})
	}
	return out
}

// rawRoot is upstream's SWE_BENCH_URL_RAW.
const rawRoot = "https://raw.githubusercontent.com/"

// pyJoin is Python's posixpath.join (os.path.join on Linux).
func pyJoin(parts ...string) string {
	path := ""
	for i, b := range parts {
		switch {
		case i == 0:
			path = b
		case strings.HasPrefix(b, "/"):
			path = b
		case path == "" || strings.HasSuffix(path, "/"):
			path += b
		default:
			path += "/" + b
		}
	}
	return path
}

// RawURL is the GitHub raw URL of path in repo at commit, joined as upstream
// joins it.
func RawURL(repo, commit, path string) string {
	return pyJoin(rawRoot, repo, commit, path)
}

// Candidates returns the URLs upstream tries, in order, for a repo's
// MAP_REPO_TO_REQS_PATHS (requirements.txt) or MAP_REPO_TO_ENV_YML_PATHS
// (environment.yml) entry at commit (the instance's environment_setup_commit,
// or base_commit when it has none).
func Candidates(repo, commit string, paths []string) []string {
	urls := make([]string, len(paths))
	for i, p := range paths {
		urls[i] = RawURL(repo, commit, p)
	}
	return urls
}

// RequirementsCandidates is Candidates for MAP_REPO_TO_REQS_PATHS.
func RequirementsCandidates(repo, commit string, reqsPaths []string) []string {
	return Candidates(repo, commit, reqsPaths)
}

// EnvironmentYMLCandidates is Candidates for MAP_REPO_TO_ENV_YML_PATHS.
func EnvironmentYMLCandidates(repo, commit string, ymlPaths []string) []string {
	return Candidates(repo, commit, ymlPaths)
}

// IncludeURL is the URL upstream fetches for a "-r fileName" line of the
// requirements file found at reqPath: fileName is relative to reqPath's
// directory.
func IncludeURL(repo, commit, reqPath, fileName string) string {
	dir := reqPath
	if i := strings.LastIndexByte(reqPath, '/'); i >= 0 {
		dir = reqPath[:i]
	} else {
		dir = ""
	}
	return pyJoin(rawRoot, repo, commit, dir, fileName)
}

// pyS is Python's regex \s for str patterns.
const pyS = `[` + pystr.SpaceClass + `]`

// excludedRequirement is upstream's exclude_line: "-e .", comments and
// ".[test" lines are dropped.
func excludedRequirement(line string) bool {
	s := pystr.Strip(line)
	return strings.HasPrefix(s, "-e .") || strings.HasPrefix(s, "#") || strings.HasPrefix(s, ".[test")
}

// ExpandRequirements does what get_requirements_by_commit does with the
// text of the requirements file: each line starting (after spaces) with
// "-r" names a file (relative to the file's directory) whose lines, less
// excluded ones, come first in the output; the file's own lines, less
// excluded ones, follow. include returns a named file's text, ok=false when
// it does not exist (upstream skips it silently); an error stops.
// Included files are not expanded further, as upstream.
func ExpandRequirements(text string, include func(fileName string) (body string, ok bool, err error)) (string, error) {
	var original, additional []string
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(pystr.Strip(line), "-r") {
			if !excludedRequirement(line) {
				original = append(original, line)
			}
			continue
		}
		// Upstream slices the unstripped line: line[len("-r"):].strip()
		// drops the first two code points, whatever they are.
		rest := line
		for i := 0; i < 2 && rest != ""; i++ {
			_, n := utf8.DecodeRuneInString(rest)
			rest = rest[n:]
		}
		body, ok, err := include(pystr.Strip(rest))
		if err != nil {
			return "", err
		}
		if !ok {
			continue
		}
		for _, extra := range strings.Split(body, "\n") {
			if !excludedRequirement(extra) {
				additional = append(additional, extra)
			}
		}
	}
	additional = append(additional, strings.Join(original, "\n"))
	return strings.Join(additional, "\n"), nil
}

// CleanRequirements is upstream's clean_requirements: a line starting with
// a replaced package (bare or followed by a version specifier) becomes the
// replacement without specifier, or is removed.
func CleanRequirements(text string, repl []Replacement) string {
	for _, r := range repl {
		if r.Remove {
			re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(r.Package) + `([<>=!~]=?.*|$)\n?`)
			text = re.ReplaceAllLiteralString(text, "")
		} else {
			re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(r.Package) + `([<>=!~]=?.*|$)`)
			text = re.ReplaceAllLiteralString(text, r.With)
		}
	}
	return text
}

// RenameEnvironment is what get_environment_yml_by_commit does with the
// file: every line starting with "name:" becomes "name: <envName>".
func RenameEnvironment(yml, envName string) string {
	lines := strings.Split(yml, "\n")
	for i, line := range lines {
		if strings.HasPrefix(line, "name:") {
			lines[i] = "name: " + envName
		}
	}
	return strings.Join(lines, "\n")
}

var pipSection = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?m)^(` + pyS + `*-` + pyS + `*pip` + pyS + `*:` + pyS + `*\n)`)
})

// CleanEnvironmentYML is upstream's clean_environment_yml: the replacements
// apply only inside the first "- pip:" section of the dependencies.
func CleanEnvironmentYML(yml string, repl []Replacement) string {
	m := pipSection().FindStringSubmatchIndex(yml)
	if m == nil {
		return yml
	}
	pipIndent := pystr.Indent(yml[m[2]:m[3]])
	start := m[1]
	end := len(yml)
	off := start
	for _, line := range strings.Split(yml[start:], "\n") {
		if pystr.Strip(line) != "" && pystr.Indent(line) <= pipIndent {
			end = off
			break
		}
		off += len(line) + 1
	}
	pip := yml[start:end]
	for _, r := range repl {
		if r.Remove {
			re := regexp.MustCompile(`(?m)^(` + pyS + `*-` + pyS + `*)` + regexp.QuoteMeta(r.Package) + `([<>~]=?.*|$)\n?`)
			pip = re.ReplaceAllLiteralString(pip, "")
		} else {
			re := regexp.MustCompile(`(?m)^(` + pyS + `*-` + pyS + `*)` + regexp.QuoteMeta(r.Package) + `([<>=!~]=?.*|$)`)
			pip = re.ReplaceAllString(pip, "${1}"+strings.ReplaceAll(r.With, "$", "$$"))
		}
	}
	return yml[:start] + pip + yml[end:]
}

// DecodeText is requests' Response.text for a UTF-8 body: invalid bytes
// become U+FFFD, one per maximal invalid subsequence, as Python's
// bytes.decode("utf-8", "replace") does.
func DecodeText(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 16)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || n > 1 {
			sb.Write(b[i : i+n])
			i += n
			continue
		}
		sb.WriteRune(utf8.RuneError)
		i += maximalSubpart(b[i:])
	}
	return sb.String()
}

// maximalSubpart is the length of the invalid sequence at the start of b
// that Unicode (and Python) replace with one U+FFFD.
func maximalSubpart(b []byte) int {
	c := b[0]
	var size int
	lo, hi := byte(0x80), byte(0xbf) // range of the second byte
	switch {
	case 0xc2 <= c && c <= 0xdf:
		size = 2
	case c == 0xe0:
		size, lo = 3, 0xa0
	case c == 0xed:
		size, hi = 3, 0x9f
	case 0xe1 <= c && c <= 0xef:
		size = 3
	case c == 0xf0:
		size, lo = 4, 0x90
	case c == 0xf4:
		size, hi = 4, 0x8f
	case 0xf1 <= c && c <= 0xf3:
		size = 4
	default:
		return 1
	}
	if len(b) < 2 || b[1] < lo || b[1] > hi {
		return 1
	}
	n := 2
	for n < size && n < len(b) && 0x80 <= b[n] && b[n] <= 0xbf {
		n++
	}
	return n
}

// Source gets one URL for GetRequirements and GetEnvironmentYML:
// found=false means the file is not there and upstream would try the next
// candidate; err is anything that must stop (offline miss, network
// failure). pipeline gives package fetch's client as a Source.
type Source interface {
	Fetch(ctx context.Context, url string) (body string, found bool, err error)
}

// firstOf returns the index and body of the first of urls that src has,
// trying them in order as upstream does. When none exists the error wraps
// ErrNotFound and names what, the paths, repo and commit and every URL.
func firstOf(ctx context.Context, src Source, urls []string, what, repo, commit string, paths []string) (int, string, error) {
	if len(urls) == 0 {
		return 0, "", fmt.Errorf("no candidate paths for %s of repo %s", what, repo)
	}
	for i, u := range urls {
		body, found, err := src.Fetch(ctx, u)
		if err != nil {
			return 0, "", fmt.Errorf("fetching %s: %w", u, err)
		}
		if found {
			return i, body, nil
		}
	}
	return 0, "", fmt.Errorf("could not find %s at paths %q for repo %s at commit %s (tried %s): %w",
		what, paths, repo, commit, strings.Join(urls, ", "), ErrNotFound)
}

// GetRequirements is upstream's get_requirements for repo at commit with
// the given MAP_REPO_TO_REQS_PATHS entry: the first of reqsPaths that src
// has, with "-r" includes fetched through src and expanded, and repl
// (REPLACE_REQ_PACKAGES) applied.
func GetRequirements(ctx context.Context, src Source, repo, commit string, reqsPaths []string, repl []Replacement) (string, error) {
	i, body, err := firstOf(ctx, src, RequirementsCandidates(repo, commit, reqsPaths), "requirements.txt", repo, commit, reqsPaths)
	if err != nil {
		return "", err
	}
	text, err := ExpandRequirements(body, func(name string) (string, bool, error) {
		u := IncludeURL(repo, commit, reqsPaths[i], name)
		b, found, err := src.Fetch(ctx, u)
		if err != nil {
			return "", false, fmt.Errorf("fetching %s: %w", u, err)
		}
		return b, found, nil
	})
	if err != nil {
		return "", err
	}
	return CleanRequirements(text, repl), nil
}

// GetEnvironmentYML is upstream's get_environment_yml for repo at commit
// with the given MAP_REPO_TO_ENV_YML_PATHS entry: the first of ymlPaths that
// src has, renamed to envName, with repl (REPLACE_REQ_PACKAGES) applied to
// its pip section.
func GetEnvironmentYML(ctx context.Context, src Source, repo, commit string, ymlPaths []string, envName string, repl []Replacement) (string, error) {
	_, body, err := firstOf(ctx, src, EnvironmentYMLCandidates(repo, commit, ymlPaths), "environment.yml", repo, commit, ymlPaths)
	if err != nil {
		return "", err
	}
	return CleanEnvironmentYML(RenameEnvironment(body, envName), repl), nil
}
