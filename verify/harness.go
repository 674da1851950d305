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
	var files []patchFile
	cur := -1
	headers := false // the current file has its ---/+++ (or ***/---) pair
	start := func() {
		files = append(files, patchFile{})
		cur, headers = len(files)-1, false
	}
	add := func(p string, strip bool) {
		if p = cleanPatchPath(p, strip); p == "" {
			return
		}
		if cur < 0 {
			start()
		}
		for _, q := range files[cur].paths {
			if q == p {
				return
			}
		}
		files[cur].paths = append(files[cur].paths, p)
	}
	lines := strings.Split(patch, "\n")
	oldLeft, newLeft := 0, 0 // lines left in the current unified hunk
	inContext := false       // in a context-diff hunk
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSuffix(lines[i], "\r")
		if oldLeft > 0 || newLeft > 0 {
			if !strings.HasPrefix(line, "\\") {
				oldLeft, newLeft = countHunkLine(line, oldLeft, newLeft)
				files[cur].lines = append(files[cur].lines, line)
			}
			continue
		}
		next := ""
		if i+1 < len(lines) {
			next = strings.TrimSuffix(lines[i+1], "\r")
		}
		switch {
		case strings.HasPrefix(line, "diff --git "):
			start()
			inContext = false
			a, b := gitHeaderPaths(strings.TrimPrefix(line, "diff --git "))
			add(a, true)
			add(b, true)
		case strings.HasPrefix(line, "Index: "):
			start()
			inContext = false
			add(strings.TrimPrefix(line, "Index: "), false)
		case strings.HasPrefix(line, "rename from "), strings.HasPrefix(line, "copy from "):
			add(line[strings.Index(line, " from ")+6:], false)
		case strings.HasPrefix(line, "rename to "), strings.HasPrefix(line, "copy to "):
			add(line[strings.Index(line, " to ")+4:], false)
		case contextRange().MatchString(line):
			if cur >= 0 {
				files[cur].lines = append(files[cur].lines, "@"+line)
			}
		case strings.HasPrefix(line, "--- ") && strings.HasPrefix(next, "+++ "),
			strings.HasPrefix(line, "*** ") && strings.HasPrefix(next, "--- ") && !contextRange().MatchString(next):
			if cur < 0 || headers || len(files[cur].lines) > 0 {
				start()
			}
			headers, inContext = true, false
			add(headerName(line[4:]), true)
			add(headerName(next[4:]), true)
			i++
		case strings.HasPrefix(line, "@@ -"):
			inContext = false
			if cur < 0 {
				continue
			}
			files[cur].lines = append(files[cur].lines, "@"+line)
			if m := unifiedRange().FindStringSubmatch(line); m != nil {
				oldLeft, newLeft = rangeLen(m[1]), rangeLen(m[2])
			}
		case strings.HasPrefix(line, "***************"):
			inContext = true
			if cur >= 0 {
				files[cur].lines = append(files[cur].lines, "@"+line)
			}
		case inContext && cur >= 0:
			if l, ok := contextLine(line); ok {
				files[cur].lines = append(files[cur].lines, l)
			}
		}
	}
	return files
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
// it does not). named are the repository paths the eval script names.
func harnessReason(p string, f patchFile, named map[string]bool) string {
	base := path.Base(p)
	dir := path.Dir(p)
	parts := strings.Split(p, "/")
	for _, c := range parts {
		if c == ".git" {
			return "a file of the repository's .git directory (configuration, hooks): git runs what they name in the eval script"
		}
	}
	if named[p] {
		return "the eval script runs or reads it"
	}
	switch {
	case base == "conftest.py":
		return "pytest imports conftest.py files before the tests"
	case base == "sitecustomize.py" || base == "usercustomize.py" || (len(parts) > 1 && (parts[len(parts)-2] == "sitecustomize" || parts[len(parts)-2] == "usercustomize")):
		return "Python imports sitecustomize/usercustomize at start-up"
	case strings.HasSuffix(base, ".pth"):
		return "a .pth file: Python runs its import lines at start-up"
	case len(parts) == 1 && strings.HasSuffix(base, ".py") && pythonShadowed[strings.TrimSuffix(base, ".py")]:
		return "shadows the Python module " + strings.TrimSuffix(base, ".py") + " the test runner imports (python -m puts the repository's root first on sys.path)"
	case len(parts) > 1 && strings.HasSuffix(base, ".py") && pythonShadowed[parts[0]]:
		return "shadows the Python package " + parts[0] + " the test runner imports (python -m puts the repository's root first on sys.path)"
	case base == "pytest.ini" || base == ".pytest.ini":
		return "pytest's configuration"
	case base == "tox.ini":
		return sectionReason(f, "tox.ini", func(s string) bool {
			return s == "pytest" || s == "tox" || strings.HasPrefix(s, "tox:") || strings.HasPrefix(s, "testenv")
		})
	case base == "setup.cfg":
		return sectionReason(f, "setup.cfg", func(s string) bool { return s == "tool:pytest" || s == "pytest" })
	case base == "pyproject.toml":
		return sectionReason(f, "pyproject.toml", func(s string) bool {
			return s == "tool.pytest" || strings.HasPrefix(s, "tool.pytest.") || s == "tool.tox" || strings.HasPrefix(s, "tool.tox.")
		})
	case base == "package.json":
		return packageJSONReason(f)
	case jsRunnerConfig().MatchString(base) || base == "mocha.opts":
		return "JavaScript test runner configuration"
	case base == "phpunit.xml" || base == "phpunit.xml.dist" || base == ".rspec":
		return "test runner configuration"
	case (base == "config" || base == "config.toml") && path.Base(dir) == ".cargo":
		return "cargo configuration (a runner for test binaries)"
	case strings.HasSuffix(base, ".go"):
		for _, l := range f.lines {
			if changed(l) && goTestMain().MatchString(l[1:]) {
				return "adds or changes a Go TestMain, which runs the tests"
			}
		}
	}
	return ""
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
	cwd, known := "", true // the working directory, relative to /testbed
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
				switch {
				case len(words) < 2:
					cwd, known = "", true
				case words[1] == "/testbed" || words[1] == "/testbed/":
					cwd, known = "", true
				case strings.HasPrefix(words[1], "/") || strings.Contains(words[1], "$"):
					known = false
				default:
					cwd = strings.TrimPrefix(path.Clean("/"+cwd+"/"+words[1]), "/")
				}
				continue
			}
			if !known {
				continue
			}
			file := ""
			switch w := words[0]; {
			case w == "source" || w == ".":
				if len(words) > 1 {
					file = words[1]
				}
			case scriptInterpreters[path.Base(w)]:
				for _, a := range words[1:] {
					if a == "-c" || a == "-m" || a == "-e" {
						break
					}
					if !strings.HasPrefix(a, "-") {
						file = a
						break
					}
				}
			case strings.Contains(w, "/"):
				file = w
			}
			if file == "" || strings.ContainsAny(file, "$*?[`") {
				continue
			}
			if rest, ok := strings.CutPrefix(file, "/testbed/"); ok {
				file = rest
			} else if strings.HasPrefix(file, "/") {
				continue
			} else {
				file = cwd + "/" + file
			}
			if p := strings.TrimPrefix(path.Clean("/"+file), "/"); p != "" && !strings.HasPrefix(p, "..") {
				out[p] = true
			}
		}
	}
	return out
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
