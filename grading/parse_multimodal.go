package grading

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/swebuild/swebuild/internal/pystr"
)

// The parsers upstream v5.0.2 added to log_parsers/javascript.py for
// SWE-bench Multimodal's JavaScript repositories (PARSER_REGISTRY only;
// RulesV5). Python's \s, \d and \S are spelled out (reS, reD, reNotS);
// Go's regexp gives the same leftmost-first submatches as Python's
// backtracking for these patterns (no backreferences). Each is checked
// against upstream's own function in TestReferenceUpstreamCasesV5.

// pyWordClass stands for Python's \w: Unicode letters, numbers and "_"
// (differs from Python 3.11 only on characters Unicode 15 added).
const pyWordClass = `[\p{L}\p{N}_]`

// collapseSpaces is re.sub(r"\s+", " ", s).strip().
func collapseSpaces(s string) string {
	return pystr.Strip(strings.Join(pyFields(s), " "))
}

// parseCarbon is parse_log_carbon (also v5's parse_log_lighthouse_jest):
// upstream's function is parse_log_react_pdf line for line (the same eight
// patterns in the same order), so it is parseReactPDF.
func parseCarbon(log string, sm *StatusMap) error {
	return parseReactPDF(log, sm)
}

// parseGrommet is parse_log_grommet: findall(^FAIL\s(.*)) then
// findall(^PASS\s(.*)) over the log (re.M; \s may be a newline), each
// stripped and without a final " (1.2 ms)".
func parseGrommet(log string, sm *StatusMap) error {
	timing := pyRegexp(reS + `\([` + pyDigitChars + `.]+` + reS + `?(?:ms|s)\)$`)
	for _, w := range []struct{ word, status string }{{"FAIL", StatusFailed}, {"PASS", StatusPassed}} {
		for _, m := range pyRegexp(`(?m)^`+w.word+reS+`(.*)`).FindAllStringSubmatch(log, -1) {
			sm.set(timing.ReplaceAllString(pystr.Strip(m[1]), ""), w.status)
		}
	}
	return nil
}

// findAllGroups is re.findall(pattern, log) for a pattern with groups:
// the group wanted of each match.
func findAllGroups(pattern, log string, group int) []string {
	var out []string
	for _, m := range pyRegexp(pattern).FindAllStringSubmatch(log, -1) {
		out = append(out, m[group])
	}
	return out
}

// parseOpenlayers is parse_log_openlayers: four failure patterns (karma's
// Chrome lines, mocha's numbered failures up to "Error:", rendering
// "case NAME: mismatch"), in order, whitespace collapsed.
func parseOpenlayers(log string, sm *StatusMap) error {
	d := `[` + pyDigitChars + `.]+`
	for _, p := range []string{
		`(?m)Chrome` + reS + `Headless` + reS + d + reS + `\(Linux` + reS + reNotS + `+\)` + reS + `(.*)` + reS + `FAILED\n`,
		`(?m)Chrome` + reS + d + reS + `\(Linux` + reS + reNotS + `+\)` + reS + `(.*)FAILED\n`,
		`(?m)^` + reS + `{2}` + reD + `+\)((?s:.)*?)Error:`,
		`(?m)^case` + reS + `(.*):` + reS + `mismatch`,
	} {
		for _, f := range findAllGroups(p, log, 1) {
			sm.set(collapseSpaces(f), StatusFailed)
		}
	}
	return nil
}

// parseBpmnJS is parse_log_bpmn_js: four failure patterns of PhantomJS and
// Chrome lines ending "FAILED\n"; the third has two groups and the second
// names the test.
func parseBpmnJS(log string, sm *StatusMap) error {
	d := `[` + pyDigitChars + `.]+`
	for _, p := range []struct {
		pattern string
		group   int
	}{
		{`2KPhantomJS` + reS + d + reS + `\(Linux` + reS + d + `\)` + reS + `(.*)FAILED\n`, 1},
		{`2KPhantomJS` + reS + d + reS + `\(Linux` + reS + `x86_64\)` + reS + `(.*)FAILED\n`, 1},
		{`Chrome` + reS + `Headless` + reS + `(.*)` + reS + `\(Linux` + reS + `x86_64\)` + reS + `(.*)FAILED\n`, 2},
		{`HeadlessChrome` + reS + d + reS + `\(Linux` + reS + d + `\)` + reS + `(.*)FAILED\n`, 1},
	} {
		for _, f := range findAllGroups(p.pattern, log, p.group) {
			sm.set(f, StatusFailed)
		}
	}
	return nil
}

// parseESLint is parse_log_eslint: mocha's numbered failures,
// (\s{2}\d+\))([\s\S]*?)\s+(?:(.*)Error), the second group with
// whitespace collapsed.
func parseESLint(log string, sm *StatusMap) error {
	p := `(` + reS + `{2}` + reD + `+\))((?s:.)*?)` + reS + `+(?:(.*)Error)`
	for _, f := range findAllGroups(p, log, 2) {
		sm.set(collapseSpaces(f), StatusFailed)
	}
	return nil
}

// parseHighlightJS is parse_log_highlightjs (mocha): the log up to the
// first "\n<indent>N passing"; "✓"/"✔" lines pass, "N)" lines fail, keyed
// by the suite line (any line starting with two spaces, upstream's
// four-space branch is unreachable) joined by "." with the name, "(Nms)"
// removed.
func parseHighlightJS(log string, sm *StatusMap) error {
	if loc := pyRegexp(`\n[ \t]*` + reD + `+ passing`).FindStringIndex(log); loc != nil {
		log = log[:loc[0]]
	}
	timing := pyRegexp(`\(` + reD + `+ms\)`)
	clean := func(name string) string {
		if timing.MatchString(name) {
			name = timing.ReplaceAllString(name, "")
		}
		return pystr.Strip(name)
	}
	failed := pyRegexp(`^` + reD + `+\)`)
	var suite []string
	full := func(name string) string { return strings.Join(append(append([]string{}, suite...), name), ".") }
	return forEachLine(log, func(line string) error {
		s := pystr.Strip(line)
		switch {
		case strings.HasPrefix(s, "✓") || strings.HasPrefix(s, "✔"):
			check := "✔"
			if strings.HasPrefix(s, "✓") {
				check = "✓"
			}
			_, rest, _ := strings.Cut(line, check)
			sm.set(full(clean(rest)), StatusPassed)
		case failed.MatchString(s):
			_, rest, _ := strings.Cut(line, ")")
			sm.set(full(clean(rest)), StatusFailed)
		case line != "" && strings.HasPrefix(line, "  "):
			suite = []string{s}
		}
		return nil
	})
}

// parseQuartoCLI is parse_log_quarto_cli (deno test): lines with
// "[smoke]" or "[unit]" before the first "ERRORS" or "failures:" line; the
// name is the text before "...", /tmp paths numbered in order of first
// appearance; "32mok" passes, "31mFAILED" or no status fails, summary and
// INFO lines are skipped.
func parseQuartoCLI(log string, sm *StatusMap) error {
	prefix := pyRegexp(`\[(smoke|unit)\]`)
	tmps := []*regexp.Regexp{pyRegexp(`/tmp/(` + pyWordClass + `+)\.qmd`), pyRegexp(`/tmp/(` + pyWordClass + `+)/`)}
	tmpKey := map[string]int{}
	it := lineIter{s: log}
	for line, ok := it.next(); ok; line, ok = it.next() {
		if strings.Contains(line, "ERRORS") || strings.Contains(line, "failures:") {
			break
		}
		if !prefix.MatchString(line) {
			continue
		}
		for _, p := range tmps {
			if m := p.FindString(line); m != "" {
				if _, seen := tmpKey[m]; !seen {
					tmpKey[m] = len(tmpKey)
				}
				line = p.ReplaceAllLiteralString(line, "/tmp/"+strconv.Itoa(tmpKey[m]))
			}
		}
		name, _, _ := strings.Cut(line, "...")
		name = pystr.Strip(name)
		reject := strings.HasPrefix(line, "test result:") ||
			strings.Contains(line, "passed") && strings.Contains(line, "failed") && strings.Contains(line, "steps") ||
			strings.Contains(line, "34mINFO")
		if !reject {
			if strings.Contains(line, "32mok") {
				sm.set(name, StatusPassed)
			} else if strings.Contains(line, "31mFAILED") {
				sm.set(name, StatusFailed)
			}
		}
		if _, ok := sm.Get(name); !ok && !reject {
			sm.set(name, StatusFailed)
		}
	}
	return nil
}

// mochaJSONTitles is re.findall(r"\"fullTitle\"\:\s\"(.*)\",\n", text).
func mochaJSONTitles(text string) []string {
	return findAllGroups(`"fullTitle":`+reS+`"(.*)",\n`, text, 1)
}

// rsplitFirst is s.rsplit(sep, 1)[0].
func rsplitFirst(s, sep string) string {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i]
	}
	return s
}

// splitLast is s.split(sep)[-1].
func splitLast(s, sep string) string {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[i+len(sep):]
	}
	return s
}

// indentSuite is the suite stack of parse_log_lighthouse_mocha and
// parse_log_next_v1: an indented line pops every entry indented as much or
// more and is pushed.
type indentSuite struct {
	names  []string
	indent []int
}

func (s *indentSuite) push(line string) {
	ind := indentOf(line)
	for len(s.names) > 0 && s.indent[len(s.indent)-1] >= ind {
		s.names, s.indent = s.names[:len(s.names)-1], s.indent[:len(s.indent)-1]
	}
	s.names, s.indent = append(s.names, pystr.Strip(line)), append(s.indent, ind)
}

func (s *indentSuite) key(test string) string {
	return strings.Join(append(append([]string{}, s.names...), test), " - ")
}

// parseLighthouseMocha is parse_log_lighthouse_mocha: each run after
// "running N test files", up to "N passing"; "✔ name (Nms)" passes,
// "N) name (Nms)" fails, keyed by the indented suite lines before.
func parseLighthouseMocha(log string, sm *StatusMap) error {
	runs := pyRegexp(`running`+reS+reD+`+`+reS+`test`+reS+`files`).Split(log, -1)
	passing := pyRegexp(reD + `+` + reS + `passing`)
	pats := []struct {
		re     *regexp.Regexp
		status string
	}{
		{pyRegexp(`^✔` + reS + `(.*)` + reS + `\(` + reD + `+m+s\)`), StatusPassed},
		{pyRegexp(`^✔` + reS + `(.*)`), StatusPassed},
		{pyRegexp(`^` + reD + `+\)` + reS + `(.*)` + reS + `\(` + reD + `+m+s\)`), StatusFailed},
		{pyRegexp(`^` + reD + `+\)` + reS + `(.*)`), StatusFailed},
	}
	for _, run := range runs[1:] {
		run = pystr.Strip(passing.Split(run, 2)[0])
		var suite indentSuite
		forEachLine(run, func(line string) error {
			s := pystr.Strip(line)
			for _, p := range pats {
				if m := p.re.FindStringSubmatch(s); m != nil {
					sm.set(suite.key(m[1]), p.status)
					return nil
				}
			}
			if indentOf(line) > 0 {
				suite.push(line)
			}
			return nil
		})
	}
	return nil
}

// pyFloat is Python's float(s) for a version string, or an error where
// float() raises ValueError.
func pyFloat(s string) (float64, error) {
	t := pystr.Strip(s)
	if strings.Contains(t, "__") || strings.HasPrefix(t, "_") || strings.HasSuffix(t, "_") {
		return 0, fmt.Errorf("could not convert string to float: %q", s)
	}
	if strings.ContainsAny(t, "xXpP") && !strings.Contains(strings.ToLower(t), "inf") {
		return 0, fmt.Errorf("could not convert string to float: %q", s)
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(t, "_", ""), 64)
	if err != nil && !strings.Contains(err.Error(), "value out of range") {
		return 0, fmt.Errorf("could not convert string to float: %q", s)
	}
	return f, nil
}

// lighthouseParser is parse_log_lighthouse for a record of version: mocha
// for 9.5, 10.0 and 10.2, parse_log_carbon (lighthouse_jest) from 3 on
// (float(version); ValueError otherwise), mocha's JSON reporter before.
func lighthouseParser(version string) parseFunc {
	switch version {
	case "9.5", "10.0", "10.2":
		return parseLighthouseMocha
	}
	v, err := pyFloat(version)
	if err != nil {
		return func(string, *StatusMap) error {
			return fmt.Errorf("parse_log_lighthouse: version: %v (ValueError): %w", err, ErrUpstreamParserRaises)
		}
	}
	if v >= 3 {
		return parseCarbon
	}
	return func(log string, sm *StatusMap) error {
		chunks := strings.Split(log, "./node_modules/.bin/mocha --reporter json")
		for _, c := range chunks[1:] {
			for _, t := range mochaJSONTitles(rsplitFirst(splitLast(c, `"passes": [`), "]")) {
				sm.set(t, StatusPassed)
			}
			for _, t := range mochaJSONTitles(rsplitFirst(splitLast(c, `"failures": [`), "],")) {
				sm.set(t, StatusFailed)
			}
		}
		return nil
	}
}

// nextParser is parse_log_next: parse_log_next_v2 for version 1.27,
// parse_log_next_v1 otherwise.
func nextParser(version string) parseFunc {
	if version == "1.27" {
		return parseNextV2
	}
	return parseNextV1
}

// parseNextV1 is parse_log_next_v1 (karma in xvfb): ANSI codes and
// "AssertionError: #...\n\n" blocks removed; each piece after " xvfb-run ",
// from its last "Starting browser Chrome", up to a line starting "TOTAL":
// "✗ name" fails and "✓ name" passes (the first mark on the line), keyed by
// the indented suite lines " - "-joined.
func parseNextV1(log string, sm *StatusMap) error {
	log = pyRegexp(`\x1b(?:[@-Z\\-_]|\[[0-?]*[ -/]*[@-~])`).ReplaceAllString(log, "")
	log = pyRegexp(`(?s)AssertionError:`+reS+`+#(.*?)\n\n`).ReplaceAllString(log, "")
	pieces := strings.Split(log, " xvfb-run ")
	var suite indentSuite
	for _, piece := range pieces[1:] {
		piece = splitLast(piece, "Starting browser Chrome")
		it := lineIter{s: piece}
		for line, ok := it.next(); ok; line, ok = it.next() {
			if strings.HasPrefix(line, "TOTAL") {
				break
			}
			if hasAnyPrefix(pystr.Strip(line), "ERROR", "LOG", "WARN", "Check", "in") {
				continue
			}
			if _, rest, ok := strings.Cut(line, "✗"); ok {
				sm.set(suite.key(pystr.LStrip(rest)), StatusFailed)
			} else if _, rest, ok := strings.Cut(line, "✓"); ok {
				sm.set(suite.key(pystr.LStrip(rest)), StatusPassed)
			} else if indentOf(line) > 0 {
				suite.push(line)
			}
		}
	}
	return nil
}

// parseNextV2 is parse_log_next_v2 (cypress spec runs): each
// "Running:...)\n\n\n  SUITE\n" heads a section; "    N) name" fails and
// "    ✓ name (" passes, keyed "SUITE: name".
func parseNextV2(log string, sm *StatusMap) error {
	head := pyRegexp(`Running:(.*)\)\n{3}` + reS + `{2}(.*)\n`)
	matches := head.FindAllStringSubmatchIndex(log, -1)
	fail := pyRegexp(`(?m)^` + reS + `{4}` + reD + `+\)` + reS + `(.*)`)
	pass := pyRegexp(`(?m)^` + reS + `{4}✓` + reS + `(.*)\(`)
	for i, m := range matches {
		suite := log[m[4]:m[5]]
		end := len(log)
		if i+1 < len(matches) {
			end = matches[i+1][0]
		}
		section := log[m[1]:end]
		for _, f := range fail.FindAllStringSubmatch(section, -1) {
			sm.set(suite+": "+pystr.Strip(f[1]), StatusFailed)
		}
		for _, p := range pass.FindAllStringSubmatch(section, -1) {
			sm.set(suite+": "+pystr.Strip(p[1]), StatusPassed)
		}
	}
	return nil
}

// parsePrismJS is parse_log_prismjs: after each
// "./node_modules/.bin/mocha tests/run.js --reporter json", the text from
// its first "{" to its last "}" is json.loads'ed; "failures" fail and
// "passes" pass by fullTitle. Where upstream raises (bad JSON, a missing
// key, a non-object entry) so does this.
func parsePrismJS(log string, sm *StatusMap) error {
	const cmd = "./node_modules/.bin/mocha tests/run.js --reporter json"
	chunks := strings.Split(log, cmd)
	for _, c := range chunks[1:] {
		if i := strings.IndexByte(c, '{'); i >= 0 {
			c = c[i+1:]
		}
		text := "{" + rsplitFirst(c, "}") + "}"
		var results map[string]json.RawMessage
		if err := json.Unmarshal([]byte(text), &results); err != nil {
			return fmt.Errorf("parse_log_prismjs: json.loads: %v: %w", err, ErrUpstreamParserRaises)
		}
		for _, k := range []struct{ key, status string }{{"failures", StatusFailed}, {"passes", StatusPassed}} {
			raw, ok := results[k.key]
			if !ok {
				return fmt.Errorf("parse_log_prismjs: KeyError %q: %w", k.key, ErrUpstreamParserRaises)
			}
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				return fmt.Errorf("parse_log_prismjs: %v: %w", err, ErrUpstreamParserRaises)
			}
			switch x := v.(type) {
			case map[string]any: // iterating keys: str["fullTitle"] raises TypeError
				if len(x) > 0 {
					return fmt.Errorf("parse_log_prismjs: %s is an object (TypeError): %w", k.key, ErrUpstreamParserRaises)
				}
			case string:
				if x != "" {
					return fmt.Errorf("parse_log_prismjs: %s is a string (TypeError): %w", k.key, ErrUpstreamParserRaises)
				}
			case []any:
				for _, t := range x {
					obj, ok := t.(map[string]any)
					if !ok {
						return fmt.Errorf("parse_log_prismjs: an entry of %s is not an object (TypeError): %w", k.key, ErrUpstreamParserRaises)
					}
					title, ok := obj["fullTitle"]
					if !ok {
						return fmt.Errorf("parse_log_prismjs: KeyError 'fullTitle': %w", ErrUpstreamParserRaises)
					}
					s, ok := title.(string)
					if !ok {
						return fmt.Errorf("parse_log_prismjs: a fullTitle that is not a string (upstream keys the map by it): %w", ErrParserNotImplemented)
					}
					sm.set(s, k.status)
				}
			default: // number, bool, null: not iterable
				return fmt.Errorf("parse_log_prismjs: %s is not iterable (TypeError): %w", k.key, ErrUpstreamParserRaises)
			}
		}
	}
	return nil
}
