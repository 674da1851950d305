package verify

// Patches that change the test harness: what the test runner loads before or
// around the tests (a conftest.py pytest imports, a pytest.py that shadows
// pytest, sitecustomize, .pth files, test-runner configuration, a Go
// TestMain, .git's configuration and hooks, the scripts the eval script runs)
// is code the patch controls that can print or decide test results without
// fixing anything. HarnessChanges finds them in the patch text alone, so a
// prediction can be refused before anything runs (FailureHarness).
//
// The patch is read leniently, the way `patch --batch --fuzz=5 -p1` (the last
// of upstream's apply commands) reads it, not the way `git apply` does: GNU
// patch applies context and normal diffs, takes file names from "Index:",
// "***", "---" and "+++" lines and ignores text between files, so a strict
// unified-diff parser (a library's) would miss files that still get written.
// Every name any header gives counts.

import (
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// HarnessFile is a file of a patch that changes the test harness, and why.
type HarnessFile struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// HarnessChanges lists the files patch adds, removes or changes that the
// test runner loads before or around the tests, sorted by path, one entry per
// path (the first reason found). Files the test patch sets are left out: the
// eval script resets them and applies the test patch over them. evalScript
// is the script the run executes: a file it names outside a heredoc (django's
// tests/runtests.py, sympy's bin/test, a setup.py it runs) is harness too.
func HarnessChanges(patch, testPatch, evalScript string) []HarnessFile {
	testFiles := map[string]bool{}
	for _, f := range scanPatch(testPatch) {
		for _, p := range f.paths {
			testFiles[p] = true
		}
	}
	named := evalScriptPaths(evalScript)
	found := map[string]string{}
	for _, f := range scanPatch(patch) {
		for _, p := range f.paths {
			if testFiles[p] {
				continue
			}
			if _, dup := found[p]; dup {
				continue
			}
			if why := harnessReason(p, f, named); why != "" {
				found[p] = why
			}
		}
	}
	out := make([]HarnessFile, 0, len(found))
	for p, why := range found {
		out = append(out, HarnessFile{Path: p, Reason: why})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// HarnessPaths are the paths of files, for messages.
func HarnessPaths(files []HarnessFile) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.Path
	}
	return out
}

// patchFile is one file of a patch: every path its headers name (cleaned,
// relative to the repository root) and its hunk lines, each with its first
// byte (' ', '+', '-', or '@' for a hunk header) kept.
type patchFile struct {
	paths []string
	lines []string
}

// changed reports whether line is an added or removed line.
func changed(line string) bool {
	return strings.HasPrefix(line, "+") || strings.HasPrefix(line, "-")
}

// scanPatch splits a patch into files. A file starts at a "diff --git" or
// "Index:" line, or at a unified ("---" then "+++") or context ("***" then
// "---") header pair not right after one of those; its names come from
// those lines and from "rename from/to" and "copy from/to" lines. Names in
// "---", "+++" and "***" lines lose their first component, as -p1 strips it.
// Unified hunks are read by their line counts, so a removed "-- x" line is
// not taken for a header.
func scanPatch(patch string) []patchFile {
	var sc patchScanner
	sc.cur = -1
	lines := strings.Split(patch, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSuffix(lines[i], "\r")
		if sc.oldLeft > 0 || sc.newLeft > 0 {
			if !strings.HasPrefix(line, "\\") {
				sc.oldLeft, sc.newLeft = countHunkLine(line, sc.oldLeft, sc.newLeft)
				sc.files[sc.cur].lines = append(sc.files[sc.cur].lines, line)
			}
			continue
		}
		next := ""
		if i+1 < len(lines) {
			next = strings.TrimSuffix(lines[i+1], "\r")
		}
		if sc.headerPair(line, next) {
			i++
			continue
		}
		sc.line(line)
	}
	return sc.files
}

// patchScanner is scanPatch's state: the files so far, the current one (-1
// before the first), whether it has its header pair, the lines left in the
// current unified hunk, and whether a context-diff hunk is being read.
type patchScanner struct {
	files            []patchFile
	cur              int
	headers          bool
	oldLeft, newLeft int
	inContext        bool
}

// start begins a new file.
func (sc *patchScanner) start() {
	sc.files = append(sc.files, patchFile{})
	sc.cur, sc.headers = len(sc.files)-1, false
}

// add gives the current file (a new one when there is none) the name p,
// stripped of its first component when strip.
func (sc *patchScanner) add(p string, strip bool) {
	if p = cleanPatchPath(p, strip); p == "" {
		return
	}
	if sc.cur < 0 {
		sc.start()
	}
	if slices.Contains(sc.files[sc.cur].paths, p) {
		return
	}
	sc.files[sc.cur].paths = append(sc.files[sc.cur].paths, p)
}

// keep adds line to the current file's lines, if there is a current file.
func (sc *patchScanner) keep(line string) {
	if sc.cur >= 0 {
		sc.files[sc.cur].lines = append(sc.files[sc.cur].lines, line)
	}
}

// headerPair reads a unified ("---" then "+++") or context ("***" then
// "---") header pair of line and next, and reports whether it was one.
func (sc *patchScanner) headerPair(line, next string) bool {
	unified := strings.HasPrefix(line, "--- ") && strings.HasPrefix(next, "+++ ")
	context := strings.HasPrefix(line, "*** ") && strings.HasPrefix(next, "--- ") && !contextRange().MatchString(next)
	// A context diff's range line ("*** 1,5 ****") is not a header.
	if !unified && !context || contextRange().MatchString(line) {
		return false
	}
	if sc.cur < 0 || sc.headers || len(sc.files[sc.cur].lines) > 0 {
		sc.start()
	}
	sc.headers, sc.inContext = true, false
	sc.add(headerName(line[4:]), true)
	sc.add(headerName(next[4:]), true)
	return true
}

// line reads one line that is neither in a unified hunk nor a header pair.
func (sc *patchScanner) line(line string) {
	switch {
	case strings.HasPrefix(line, "diff --git "):
		sc.start()
		sc.inContext = false
		a, b := gitHeaderPaths(strings.TrimPrefix(line, "diff --git "))
		sc.add(a, true)
		sc.add(b, true)
	case strings.HasPrefix(line, "Index: "):
		sc.start()
		sc.inContext = false
		sc.add(strings.TrimPrefix(line, "Index: "), false)
	case strings.HasPrefix(line, "rename from "), strings.HasPrefix(line, "copy from "):
		sc.add(line[strings.Index(line, " from ")+6:], false)
	case strings.HasPrefix(line, "rename to "), strings.HasPrefix(line, "copy to "):
		sc.add(line[strings.Index(line, " to ")+4:], false)
	case contextRange().MatchString(line):
		sc.keep("@" + line)
	case strings.HasPrefix(line, "@@ -"):
		sc.inContext = false
		if sc.cur < 0 {
			return
		}
		sc.keep("@" + line)
		if m := unifiedRange().FindStringSubmatch(line); m != nil {
			sc.oldLeft, sc.newLeft = rangeLen(m[1]), rangeLen(m[2])
		}
	case strings.HasPrefix(line, "***************"):
		sc.inContext = true
		sc.keep("@" + line)
	case sc.inContext && sc.cur >= 0:
		if l, ok := contextLine(line); ok {
			sc.keep(l)
		}
	}
}

var (
	unifiedRange = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^@@ -\d+(,\d+)? \+\d+(,\d+)? @@`) })
	contextRange = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\*\*\*|---) \d+(,\d+)? (\*\*\*\*|----)\s*$`) })
)

// countHunkLine counts line of a unified hunk against the old and new
// lines left in it.
func countHunkLine(line string, oldLeft, newLeft int) (int, int) {
	switch {
	case strings.HasPrefix(line, "+"):
		return oldLeft, newLeft - 1
	case strings.HasPrefix(line, "-"):
		return oldLeft - 1, newLeft
	default: // context (" x" or an empty line)
		return oldLeft - 1, newLeft - 1
	}
}

// contextLine is a context diff's hunk line as a unified one: changes are
// marked "+ ", "- " and "! " there, context "  ".
func contextLine(line string) (string, bool) {
	switch {
	case strings.HasPrefix(line, "! "), strings.HasPrefix(line, "+ "):
		return "+" + line[2:], true
	case strings.HasPrefix(line, "- "):
		return "-" + line[2:], true
	case strings.HasPrefix(line, "  "):
		return " " + line[2:], true
	}
	return "", false
}

// rangeLen is a unified hunk range's line count (",N"; absent: 1).
func rangeLen(s string) int {
	if s == "" {
		return 1
	}
	n, err := strconv.Atoi(s[1:])
	if err != nil {
		return 0
	}
	return n
}

// gitHeaderPaths splits the rest of a "diff --git" line into its two names
// (C-quoted or not). With unquoted names that contain spaces the split is
// ambiguous; both halves at the " b/" split are taken.
func gitHeaderPaths(rest string) (string, string) {
	if strings.HasPrefix(rest, `"`) {
		a, tail, ok := unquoteC(rest)
		if ok {
			tail = strings.TrimPrefix(tail, " ")
			if b, _, ok := unquoteC(tail); ok {
				return a, b
			}
			return a, tail
		}
	}
	if i := strings.LastIndex(rest, " b/"); i > 0 {
		b := rest[i+1:]
		if strings.HasPrefix(b, `"`) {
			b, _, _ = unquoteC(b)
		}
		return rest[:i], b
	}
	if i := strings.LastIndex(rest, ` "b/`); i > 0 {
		b, _, _ := unquoteC(rest[i+1:])
		return rest[:i], b
	}
	a, b, _ := strings.Cut(rest, " ")
	return a, b
}

// headerName is the file name of a "---", "+++" or "***" line: up to a tab
// (the time stamp), C-unquoted when quoted.
func headerName(rest string) string {
	if strings.HasPrefix(rest, `"`) {
		if s, _, ok := unquoteC(rest); ok {
			return s
		}
	}
	if i := strings.IndexByte(rest, '\t'); i >= 0 {
		rest = rest[:i]
	}
	return strings.TrimRight(rest, " ")
}

// unquoteC reads a C-quoted name at the start of s (git's quoting of names
// with special characters) and returns it and the rest of s.
func unquoteC(s string) (string, string, bool) {
	if !strings.HasPrefix(s, `"`) {
		return "", s, false
	}
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			u, err := strconv.Unquote(s[:i+1])
			if err != nil {
				// Octal escapes of bytes (\303) are valid Go too; anything
				// else is left as written.
				return s[1:i], s[i+1:], true
			}
			return u, s[i+1:], true
		}
	}
	return "", s, false
}

// cleanPatchPath is a header name relative to the repository root: without
// /dev/null, with its first component stripped when strip (-p1; git's a/ and
// b/), and cleaned. Names that leave the repository ("../x", absolute after
// stripping) are kept as written: GNU patch refuses them, git apply too.
func cleanPatchPath(p string, strip bool) string {
	p = strings.TrimSpace(p)
	if p == "" || p == "/dev/null" {
		return ""
	}
	if strip {
		if _, rest, ok := strings.Cut(p, "/"); ok {
			p = rest
		} else {
			return ""
		}
	}
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	if p == "" || p == "." {
		return ""
	}
	return p
}

// pythonShadowed are modules a file or package at the repository's root
// shadows for `python -m pytest`, which puts the working directory (/testbed)
// first on sys.path.
var pythonShadowed = map[string]bool{"pytest": true, "_pytest": true, "pluggy": true, "py": true, "unittest": true}

// harnessReason says why path p of file f changes the test harness ("" when
// it does not). named are the repository paths the eval script names. The
// first of harnessRules whose match accepts the path gives the reason.
func harnessReason(p string, f patchFile, named map[string]bool) string {
	h := harnessPath{base: path.Base(p), dir: path.Dir(p), parts: strings.Split(p, "/"), f: f}
	if slices.Contains(h.parts, ".git") {
		return "a file of the repository's .git directory (configuration, hooks): git runs what they name in the eval script"
	}
	if named[p] {
		return "the eval script runs or reads it"
	}
	for _, r := range harnessRules {
		if r.match(h) {
			return r.reason(h)
		}
	}
	return ""
}

// harnessPath is one changed path of a patch as harnessRules look at it.
type harnessPath struct {
	base, dir string
	parts     []string // the path's components
	f         patchFile
}

// parent is the name of the directory holding the file ("" at the root).
func (h harnessPath) parent() string {
	if len(h.parts) < 2 {
		return ""
	}
	return h.parts[len(h.parts)-2]
}

// harnessRule is one kind of file that changes the test harness: match says
// whether a path is of that kind, reason why it changes the harness ("" when
// this file's change does not, e.g. a tox.ini section pytest does not read).
type harnessRule struct {
	match  func(h harnessPath) bool
	reason func(h harnessPath) string
}

// harnessName is a match for the file names given.
func harnessName(names ...string) func(h harnessPath) bool {
	return func(h harnessPath) bool { return slices.Contains(names, h.base) }
}

// harnessSays is a reason that is always why.
func harnessSays(why string) func(h harnessPath) string {
	return func(harnessPath) string { return why }
}

// harnessRules are the kinds of files that change the test harness, in the
// order they are tried.
var harnessRules = []harnessRule{
	{harnessName("conftest.py"), harnessSays("pytest imports conftest.py files before the tests")},
	{func(h harnessPath) bool {
		return harnessName("sitecustomize.py", "usercustomize.py")(h) || h.parent() == "sitecustomize" || h.parent() == "usercustomize"
	}, harnessSays("Python imports sitecustomize/usercustomize at start-up")},
	{func(h harnessPath) bool { return strings.HasSuffix(h.base, ".pth") },
		harnessSays("a .pth file: Python runs its import lines at start-up")},
	{func(h harnessPath) bool {
		return len(h.parts) == 1 && strings.HasSuffix(h.base, ".py") && pythonShadowed[strings.TrimSuffix(h.base, ".py")]
	}, func(h harnessPath) string {
		return "shadows the Python module " + strings.TrimSuffix(h.base, ".py") + " the test runner imports (python -m puts the repository's root first on sys.path)"
	}},
	{func(h harnessPath) bool {
		return len(h.parts) > 1 && strings.HasSuffix(h.base, ".py") && pythonShadowed[h.parts[0]]
	}, func(h harnessPath) string {
		return "shadows the Python package " + h.parts[0] + " the test runner imports (python -m puts the repository's root first on sys.path)"
	}},
	{harnessName("pytest.ini", ".pytest.ini"), harnessSays("pytest's configuration")},
	{harnessName("tox.ini"), func(h harnessPath) string {
		return sectionReason(h.f, "tox.ini", func(s string) bool {
			return s == "pytest" || s == "tox" || strings.HasPrefix(s, "tox:") || strings.HasPrefix(s, "testenv")
		})
	}},
	{harnessName("setup.cfg"), func(h harnessPath) string {
		return sectionReason(h.f, "setup.cfg", func(s string) bool { return s == "tool:pytest" || s == "pytest" })
	}},
	{harnessName("pyproject.toml"), func(h harnessPath) string {
		return sectionReason(h.f, "pyproject.toml", func(s string) bool {
			return s == "tool.pytest" || strings.HasPrefix(s, "tool.pytest.") || s == "tool.tox" || strings.HasPrefix(s, "tool.tox.")
		})
	}},
	{harnessName("package.json"), func(h harnessPath) string { return packageJSONReason(h.f) }},
	{func(h harnessPath) bool { return jsRunnerConfig().MatchString(h.base) || h.base == "mocha.opts" },
		harnessSays("JavaScript test runner configuration")},
	{harnessName("phpunit.xml", "phpunit.xml.dist", ".rspec"), harnessSays("test runner configuration")},
	{func(h harnessPath) bool {
		return harnessName("config", "config.toml")(h) && path.Base(h.dir) == ".cargo"
	},
		harnessSays("cargo configuration (a runner for test binaries)")},
	{func(h harnessPath) bool { return strings.HasSuffix(h.base, ".go") }, func(h harnessPath) string {
		for _, l := range h.f.lines {
			if changed(l) && goTestMain().MatchString(l[1:]) {
				return "adds or changes a Go TestMain, which runs the tests"
			}
		}
		return ""
	}},
}

var (
	jsRunnerConfig = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(jest\.config|jest-setup|jest\.setup|\.mocharc|vitest\.config|vitest\.workspace|karma\.conf|ava\.config|\.c8rc|\.nycrc)(\.[A-Za-z0-9]+)*$`)
	})
	goTestMain = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s*func\s+TestMain\s*\(`) })
	iniSection = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s*\[\s*([^\]]+?)\s*\]`) })
)

// sectionReason is the reason for an INI or TOML file when a line the patch
// changes lies in a section test (the section's name) accepts, or in a
// section the patch does not show (no header between the hunk's start and
// the line, and none in the hunk header); "" otherwise.
func sectionReason(f patchFile, name string, test func(string) bool) string {
	section, known := "", false
	for _, l := range f.lines {
		if strings.HasPrefix(l, "@") {
			section, known = "", false
			// git puts the last line matching its funcname pattern in the
			// hunk header: a section header there names the section.
			if _, heading, ok := strings.Cut(strings.TrimPrefix(l, "@@"), "@@"); ok {
				if m := iniSection().FindStringSubmatch(heading); m != nil {
					section, known = m[1], true
				}
			}
			continue
		}
		text := l
		if len(text) > 0 {
			text = text[1:]
		}
		if m := iniSection().FindStringSubmatch(text); m != nil {
			section, known = m[1], true
			if changed(l) && test(section) {
				return "changes the [" + section + "] section of " + name + ", the test runner's configuration"
			}
			continue
		}
		if !changed(l) || strings.TrimSpace(text) == "" {
			continue
		}
		switch {
		case !known:
			return "changes a line of " + name + " whose section the patch does not show (it may be the test runner's configuration)"
		case test(section):
			return "changes the [" + section + "] section of " + name + ", the test runner's configuration"
		}
	}
	return ""
}

// packageJSONKeys are the package.json members that say how tests run.
var packageJSONKeys = map[string]bool{"scripts": true, "jest": true, "mocha": true, "ava": true, "vitest": true, "c8": true, "nyc": true}

var (
	jsonKeyLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\s*)"([^"]*)"\s*:\s*(.*)$`) })
	// versionLike are values of a dependency entry: a semver range, a tag,
	// or a source (npm:, file:, git, http, workspace:).
	versionLike = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^"([~^<>=*xXv0-9. |-]*|latest|next|beta|alpha|canary|(npm|file|link|workspace|git|git\+[a-z]+|github|https?):[^"]*)",?$`)
	})
)

// packageJSONReason is the reason for a package.json when a line the patch
// changes is in "scripts" or a test runner's member ("jest", "mocha", ...),
// or in a member the patch does not show and is not a dependency entry.
func packageJSONReason(f patchFile) string {
	for i, l := range f.lines {
		if !changed(l) {
			continue
		}
		text := l[1:]
		if m := jsonKeyLine().FindStringSubmatch(text); m != nil && packageJSONKeys[m[2]] {
			return `changes "` + m[2] + `" in package.json: how the tests run`
		}
		key, known := enclosingJSONKey(f.lines[:i], indentOf(text))
		if known {
			if packageJSONKeys[key] {
				return `changes "` + key + `" in package.json: how the tests run`
			}
			continue
		}
		m := jsonKeyLine().FindStringSubmatch(text)
		if strings.TrimSpace(text) == "" || strings.Trim(strings.TrimSpace(text), "{}[],") == "" || (m != nil && versionLike().MatchString(strings.TrimSpace(m[3]))) {
			continue
		}
		return "changes a member of package.json the patch does not show the key of (it may be a test script)"
	}
	return ""
}

// enclosingJSONKey looks back through the hunk lines before a line indented
// by indent for the object it is in: the nearest line indented less that
// opens one ("key": {). known is false when the hunk does not show it.
func enclosingJSONKey(before []string, indent int) (string, bool) {
	for j := len(before) - 1; j >= 0; j-- {
		l := before[j]
		if strings.HasPrefix(l, "@") {
			return "", false
		}
		if strings.HasPrefix(l, "+") {
			continue // not in the file before the patch; its opener is
		}
		text := l
		if len(text) > 0 {
			text = text[1:]
		}
		if strings.TrimSpace(text) == "" || indentOf(text) >= indent {
			continue
		}
		if m := jsonKeyLine().FindStringSubmatch(text); m != nil && strings.HasPrefix(strings.TrimSpace(m[3]), "{") {
			return m[2], true
		}
		if strings.TrimSpace(text) == "{" && indentOf(text) == 0 {
			return "", true // the top level
		}
		return "", false
	}
	return "", false
}

// indentOf counts leading spaces and tabs.
func indentOf(s string) int {
	return len(s) - len(strings.TrimLeft(s, " \t"))
}

// evalScriptPaths are the repository files an eval script runs, outside its
// heredocs (the test patch it applies inline is data): the program of each
// command when it is a path (./tests/runtests.py, bin/test, ./gradlew), the
// script an interpreter is given (python setup.py, bash x.sh) and what
// source or . reads, relative to /testbed (cd is followed). Files it only
// names as arguments (git diff -- package.json, touch src/parser.y) are not
// run by it.
func evalScriptPaths(script string) map[string]bool {
	out := map[string]bool{}
	wd := scriptDir{known: true}
	var delim string
	for _, line := range strings.Split(script, "\n") {
		if delim != "" {
			if strings.TrimRight(line, "\r") == delim {
				delim = ""
			}
			continue
		}
		if m := heredocStart().FindStringSubmatch(line); m != nil {
			delim = m[2]
		}
		if i := strings.Index(line, "#"); i == 0 || i > 0 && (line[i-1] == ' ' || line[i-1] == '\t') {
			line = line[:i]
		}
		for _, cmd := range shellCommands(line) {
			words := commandWords(cmd)
			if len(words) == 0 {
				continue
			}
			if words[0] == "cd" {
				wd.cd(words)
				continue
			}
			if p, ok := wd.resolve(commandFile(words)); ok {
				out[p] = true
			}
		}
	}
	return out
}

// scriptDir is an eval script's working directory, relative to /testbed, as
// its cd commands move it; known is false once a cd leaves what can be
// followed (an absolute path elsewhere, a variable).
type scriptDir struct {
	cwd   string
	known bool
}

// cd follows the command cd words[1:].
func (d *scriptDir) cd(words []string) {
	switch {
	case len(words) < 2:
		d.cwd, d.known = "", true
	case words[1] == "/testbed" || words[1] == "/testbed/":
		d.cwd, d.known = "", true
	case strings.HasPrefix(words[1], "/") || strings.Contains(words[1], "$"):
		d.known = false
	default:
		d.cwd = strings.TrimPrefix(path.Clean("/"+d.cwd+"/"+words[1]), "/")
	}
}

// resolve is file's repository path when the working directory is known and
// file names one inside /testbed without globs or variables.
func (d *scriptDir) resolve(file string) (string, bool) {
	if !d.known || file == "" || strings.ContainsAny(file, "$*?[`") {
		return "", false
	}
	if rest, ok := strings.CutPrefix(file, "/testbed/"); ok {
		file = rest
	} else if strings.HasPrefix(file, "/") {
		return "", false
	} else {
		file = d.cwd + "/" + file
	}
	p := strings.TrimPrefix(path.Clean("/"+file), "/")
	return p, p != "" && !strings.HasPrefix(p, "..")
}

// commandFile is the file a command runs or reads: what source or . reads,
// the script an interpreter is given, or the program when it is a path (""
// when none).
func commandFile(words []string) string {
	switch w := words[0]; {
	case w == "source" || w == ".":
		if len(words) > 1 {
			return words[1]
		}
	case scriptInterpreters[path.Base(w)]:
		for _, a := range words[1:] {
			if a == "-c" || a == "-m" || a == "-e" {
				break
			}
			if !strings.HasPrefix(a, "-") {
				return a
			}
		}
	case strings.Contains(w, "/"):
		return w
	}
	return ""
}

// scriptInterpreters run the script file they are given first.
var scriptInterpreters = map[string]bool{"python": true, "python2": true, "python3": true, "bash": true, "sh": true, "node": true, "perl": true, "ruby": true, "php": true, "tclsh": true}

// shellCommands splits a line at ; & | ( ) (well enough for eval scripts:
// quoted separators are rare there, and a wrong split only adds a command).
func shellCommands(line string) []string {
	return strings.FieldsFunc(line, func(r rune) bool {
		return r == ';' || r == '&' || r == '|' || r == '(' || r == ')'
	})
}

// commandWords are a command's words without its quotes, the variable
// assignments before it and the wrappers that run the next word (env,
// timeout N, exec, time, nice, nohup, command).
func commandWords(cmd string) []string {
	words := strings.Fields(strings.NewReplacer("'", "", `"`, "").Replace(cmd))
	for len(words) > 0 {
		w := words[0]
		switch {
		case strings.Contains(w, "=") && !strings.HasPrefix(w, "-") && !strings.Contains(w[:strings.Index(w, "=")], "/"):
			words = words[1:]
		case w == "env" || w == "exec" || w == "time" || w == "nice" || w == "nohup" || w == "command":
			words = words[1:]
		case w == "timeout" && len(words) > 1:
			words = words[2:]
		default:
			return words
		}
	}
	return nil
}

var heredocStart = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`<<-?\s*(['"]?)([A-Za-z_][A-Za-z0-9_]*)(['"]?)`) })
