package grading

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// The parsers of upstream's log_parsers/javascript.py.

// ansiEscape is upstream's swebench.harness.utils.ansi_escape:
// re.sub(r"\x1B(?:[@-Z\\-_]|\[[0-?]*[ -/]*[@-~])", "", text).
func ansiEscape(text string) string {
	if strings.IndexByte(text, 0x1b) < 0 {
		return text
	}
	return pyRegexp(`\x1B(?:[@-Z\\-_]|\[[0-?]*[ -/]*[@-~])`).ReplaceAllLiteralString(text, "")
}

// parseCalypso is upstream's parse_log_calypso. The log is cut at every
// " ./node_modules/.bin/jest " and each piece after the first is read line
// by line until a line starting "Test Suites" or "  ● ". A stripped line
// starting "✓" (PASSED) or "✕" (FAILED) names a test: the names of the
// current describe blocks and the matched text joined with " - ", stripped;
// the text is group 1 of ^\s+✓\s(.*)\(\d+ms\)$ when the line contains
// "(<digits>ms)" anywhere, else of ^\s+✓\s(.*) (jest 29 prints "(12 ms)",
// which the first pattern does not strip). When the pattern does not match
// (no indentation, no whitespace after the mark, "(1ms)" not at the end)
// upstream's re.match(...).group(1) raises AttributeError. Any other
// indented line is a describe block: blocks indented as much or more are
// closed first. The block stack carries over from one piece to the next.
func parseCalypso(log string, sm *StatusMap) error {
	const sep = " ./node_modules/.bin/jest "
	ms := pyRegexp(`\(` + reD + `+ms\)`)
	type mark struct {
		symbol, status string
		plain, withMs  *regexp.Regexp
	}
	marks := [...]mark{
		{"✓", StatusPassed, pyRegexp(`^` + reS + `+✓` + reS + `(.*)`), pyRegexp(`^` + reS + `+✓` + reS + `(.*)\(` + reD + `+ms\)$`)},
		{"✕", StatusFailed, pyRegexp(`^` + reS + `+✕` + reS + `(.*)`), pyRegexp(`^` + reS + `+✕` + reS + `(.*)\(` + reD + `+ms\)$`)},
	}
	type block struct {
		name   string
		indent int
	}
	var suite []block
	first := strings.Index(log, sep)
	if first < 0 {
		return nil
	}
	for off := first + len(sep); ; {
		piece := log[off:]
		next := strings.Index(piece, sep)
		if next >= 0 {
			piece = piece[:next]
		}
		lineOff := off
		it := lineIter{s: piece}
	lines:
		for line, ok := it.next(); ok; line, ok = it.next() {
			start := lineOff
			lineOff += len(line) + 1
			if strings.HasPrefix(line, "Test Suites") || strings.HasPrefix(line, "  ● ") {
				break
			}
			st := pyStrip(line)
			for _, mk := range marks {
				if !strings.HasPrefix(st, mk.symbol) {
					continue
				}
				re := mk.plain
				if ms.MatchString(line) {
					re = mk.withMs
				}
				m := re.FindStringSubmatch(line)
				if m == nil {
					return raisesAt("parse_log_calypso", 1+strings.Count(log[:start], "\n"), line,
						"re.match(...).group(1) raises AttributeError")
				}
				names := make([]string, len(suite))
				for i, b := range suite {
					names[i] = b.name
				}
				sm.set(pyStrip(strings.Join(names, " - ")+" - "+m[1]), mk.status)
				continue lines
			}
			indent := indentOf(line)
			if indent <= 0 {
				continue
			}
			for len(suite) > 0 && suite[len(suite)-1].indent >= indent {
				suite = suite[:len(suite)-1]
			}
			suite = append(suite, block{st, indent})
		}
		if next < 0 {
			return nil
		}
		off += next + len(sep)
	}
}

// spaceNotCRLF is Python's [^\S\r\n]: whitespace other than "\r" and "\n".
const spaceNotCRLF = `[\x{9}\x{b}\x{c}\x{1c}-\x{20}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}-\x{2029}\x{202f}\x{205f}\x{3000}]`

// parseChartJS is upstream's parse_log_chart_js: after ansi_escape,
// re.findall(r"Chrome\s[\d\.]+[^\S\r\n]\(.+?\)[^\S\r\n](.*)FAILED$", log,
// re.MULTILINE) gives the failed tests (the name keeps the space before
// "FAILED"). Chart.js is a FAIL_ONLY repo: passing tests are not listed.
func parseChartJS(log string, sm *StatusMap) error {
	log = ansiEscape(log)
	if !strings.Contains(log, "Chrome") {
		return nil
	}
	re := pyRegexp(`(?m)Chrome` + reS + `[` + pyDigitChars + `.]+` + spaceNotCRLF + `\(.+?\)` + spaceNotCRLF + `(.*)FAILED$`)
	for _, m := range re.FindAllStringSubmatch(log, -1) {
		sm.set(m[1], StatusFailed)
	}
	return nil
}

// parseMarked is upstream's parse_log_marked: each line (not stripped)
// matching ^\d+\)\s(.*) gives group 1, stripped, FAILED (jasmine's
// numbered failure list).
func parseMarked(log string, sm *StatusMap) error {
	return forEachLine(log, func(line string) error {
		i := 0
		for i < len(line) {
			r, n := utf8.DecodeRuneInString(line[i:])
			if !isPyDigit(r) {
				break
			}
			i += n
		}
		if i == 0 || i+1 >= len(line) || line[i] != ')' {
			return nil
		}
		if sp, n := spaceAt(line, i+1); sp {
			sm.set(pyStrip(line[i+1+n:]), StatusFailed)
		}
		return nil
	})
}

// parseReactPDF is upstream's parse_log_react_pdf: for each line (not
// stripped) the first of these patterns that re.search finds gives group 1:
// ^PASS\s(.*)\s\([\d\.]+ms\), ^PASS\s(.*)\s\([\d\.]+\ss\),
// ^PASS\s(.*)\s\([\d\.]+s\), ^PASS\s(.*) (PASSED), then the same four with
// FAIL (FAILED).
func parseReactPDF(log string, sm *StatusMap) error {
	num := `\([` + pyDigitChars + `.]+`
	type pat struct {
		re     *regexp.Regexp
		status string
	}
	var pats []pat
	for _, w := range []struct{ word, status string }{{"PASS", StatusPassed}, {"FAIL", StatusFailed}} {
		for _, tail := range []string{reS + num + `ms\)`, reS + num + reS + `s\)`, reS + num + `s\)`, ``} {
			pats = append(pats, pat{pyRegexp(`^` + w.word + reS + `(.*)` + tail), w.status})
		}
	}
	return forEachLine(log, func(line string) error {
		if !strings.HasPrefix(line, "PASS") && !strings.HasPrefix(line, "FAIL") {
			return nil
		}
		for _, p := range pats {
			if m := p.re.FindStringSubmatch(line); m != nil {
				sm.set(m[1], p.status)
				break
			}
		}
		return nil
	})
}

// parseJest is upstream's parse_log_jest (jest --verbose):
// ^\s*(✓|✕|○)\s(.+?)(?:\s\((\d+\s*m?s)\))?$ on the stripped line; ✓ is
// PASSED, ✕ FAILED, ○ SKIPPED ("○ skipped name" keys "skipped name").
func parseJest(log string, sm *StatusMap) error {
	re := pyRegexp(`^` + reS + `*(✓|✕|○)` + reS + `(.+?)(?:` + reS + `\((` + reD + `+` + reS + `*m?s)\))?$`)
	return forEachLine(log, func(line string) error {
		line = pyStrip(line)
		if !hasAnyPrefix(line, "✓", "✕", "○") {
			return nil
		}
		m := re.FindStringSubmatch(line)
		if m == nil {
			return nil
		}
		switch m[1] {
		case "✓":
			sm.set(m[2], StatusPassed)
		case "✕":
			sm.set(m[2], StatusFailed)
		default:
			sm.set(m[2], StatusSkipped)
		}
		return nil
	})
}

// parseJestJSON is upstream's parse_log_jest_json: jest --json piped
// through JEST_JSON_JQ_TRANSFORM prints "[PASSED] name" / "[FAILED] name";
// ^\[(PASSED|FAILED)\]\s(.+)$ on the stripped line.
func parseJestJSON(log string, sm *StatusMap) error {
	return forEachLine(log, func(line string) error {
		line = pyStrip(line)
		var status, rest string
		switch {
		case strings.HasPrefix(line, "[PASSED]"):
			status, rest = StatusPassed, line[len("[PASSED]"):]
		case strings.HasPrefix(line, "[FAILED]"):
			status, rest = StatusFailed, line[len("[FAILED]"):]
		default:
			return nil
		}
		if rest == "" {
			return nil
		}
		if sp, n := spaceAt(rest, 0); sp && len(rest) > n {
			sm.set(rest[n:], status)
		}
		return nil
	})
}

// parseVitest is upstream's parse_log_vitest (--reporter=verbose):
// ^\s*(✓|×|↓)\s(.+?)(?:\s(\d+\s*m?s?|\[skipped\]))?$ on the stripped line;
// ✓ is PASSED, × FAILED, ↓ SKIPPED.
func parseVitest(log string, sm *StatusMap) error {
	re := pyRegexp(`^` + reS + `*(✓|×|↓)` + reS + `(.+?)(?:` + reS + `(` + reD + `+` + reS + `*m?s?|\[skipped\]))?$`)
	return forEachLine(log, func(line string) error {
		line = pyStrip(line)
		if !hasAnyPrefix(line, "✓", "×", "↓") {
			return nil
		}
		m := re.FindStringSubmatch(line)
		if m == nil {
			return nil
		}
		switch m[1] {
		case "✓":
			sm.set(m[2], StatusPassed)
		case "×":
			sm.set(m[2], StatusFailed)
		default:
			sm.set(m[2], StatusSkipped)
		}
		return nil
	})
}

// parseKarma is upstream's parse_log_karma (karma-mocha-reporter). Nothing
// counts before a line containing "Starting browser"; a line starting
// "SUMMARY:" ends the parse. Each line (not stripped) is matched with
// ^(\s*)?([✔✖])?\s(.*)$ : an indented line without a mark opens a describe
// block when it is indented more than the last one, and closes the
// innermost block when indented less (upstream pops from an empty list, and
// raises IndexError, when there is none); a marked line is a test named by
// the open blocks and its text joined with " > ", ✔ PASSED, ✖ FAILED. The
// indentation is group 1, which gives up one whitespace character to the
// \s after it on an unmarked line.
func parseKarma(log string, sm *StatusMap) error {
	re := pyRegexp(`^(` + reS + `*)?([✔✖])?` + reS + `(.*)$`)
	currentIndent := -1
	var suite []string
	started := false
	lineNo := 0
	it := lineIter{s: log}
	for line, ok := it.next(); ok; line, ok = it.next() {
		lineNo++
		if strings.HasPrefix(line, "SUMMARY:") {
			return nil
		}
		if strings.Contains(line, "Starting browser") {
			started = true
			continue
		}
		if !started {
			continue
		}
		m := re.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		indent, status, name := m[1], m[2], m[3]
		if indent != "" && status == "" {
			n := pyLen(indent)
			if n > currentIndent {
				currentIndent = n
				suite = append(suite, name)
			} else if n < currentIndent {
				currentIndent = n
				if len(suite) == 0 {
					return raisesAt("parse_log_karma", lineNo, line, "current_suite.pop() raises IndexError")
				}
				suite = suite[:len(suite)-1]
				continue
			}
		}
		if status != "" {
			full := name
			if len(suite) > 0 {
				full = strings.Join(suite, " > ") + " > " + name
			}
			if status == "✔" {
				sm.set(full, StatusPassed)
			} else {
				sm.set(full, StatusFailed)
			}
		}
	}
	return nil
}

// parseTap is upstream's parse_log_tap: ^(ok|not ok) (\d+) (.+)$ on the
// stripped line; "# SKIP" and "# TODO" stay in the name.
func parseTap(log string, sm *StatusMap) error {
	re := pyRegexp(`^(ok|not ok) (` + reD + `+) (.+)$`)
	return forEachLine(log, func(line string) error {
		line = pyStrip(line)
		if !strings.HasPrefix(line, "ok ") && !strings.HasPrefix(line, "not ok ") {
			return nil
		}
		m := re.FindStringSubmatch(line)
		if m == nil {
			return nil
		}
		if m[1] == "ok" {
			sm.set(m[3], StatusPassed)
		} else {
			sm.set(m[3], StatusFailed)
		}
		return nil
	})
}

// parseP5js is upstream's parse_log_p5js: after ansi_escape, "JSON blocks"
// and "XML blocks" are removed, then every match of
// ^\s*(\d+)\)(.{0,1000}?): (re.MULTILINE | re.DOTALL; finditer) whose group
// 2 is indented more on each of its lines than on the one before (the first
// line more than 0) gives the FAILED test named by group 2's lines,
// stripped, joined with ":". The lazy group may run up to 1000 characters
// over several lines to the first ":" (NOTES.md: a numbered listing line
// can swallow the failure summary).
func parseP5js(log string, sm *StatusMap) error {
	log = p5RemoveXMLBlocks(p5RemoveJSONBlocks(ansiEscape(log)))
	for pos := 0; pos < len(log); {
		bodyStart, colon, ok := p5NextFailure(log, pos)
		if !ok {
			break
		}
		body := log[bodyStart:colon]
		if p5ValidFail(body) {
			parts := strings.Split(body, "\n")
			for i, p := range parts {
				parts[i] = pyStrip(p)
			}
			sm.set(strings.Join(parts, ":"), StatusFailed)
		}
		pos = colon + 1
	}
	return nil
}

// p5NextFailure finds the first match of ^\s*(\d+)\)(.{0,1000}?): (multi-
// line, dot-all) starting at a line start at or after pos: where group 2
// starts, and the index of the ":" ending it.
func p5NextFailure(log string, pos int) (bodyStart, colon int, ok bool) {
	p := pos
	if p > 0 && log[p-1] != '\n' {
		i := strings.IndexByte(log[p:], '\n')
		if i < 0 {
			return 0, 0, false
		}
		p += i + 1
	}
	for p <= len(log) {
		// \s* (newlines included), then \d+ and ")".
		i := p
		for i < len(log) {
			sp, n := spaceAt(log, i)
			if !sp {
				break
			}
			i += n
		}
		j := i
		for j < len(log) {
			r, n := utf8.DecodeRuneInString(log[j:])
			if !isPyDigit(r) {
				break
			}
			j += n
		}
		if j > i && j < len(log) && log[j] == ')' {
			// (.{0,1000}?): the first ":" within 1000 characters.
			k, chars := j+1, 0
			for k < len(log) && chars <= 1000 {
				if log[k] == ':' {
					return j + 1, k, true
				}
				if chars == 1000 {
					break
				}
				_, n := utf8.DecodeRuneInString(log[k:])
				k += n
				chars++
			}
		}
		// Every line start up to i leads to the same digits: skip to the
		// first line start after i.
		nl := strings.IndexByte(log[i:], '\n')
		if nl < 0 {
			// A line start at the very end (after a final newline) was i
			// itself when the loop reached it; nothing follows.
			return 0, 0, false
		}
		p = i + nl + 1
	}
	return 0, 0, false
}

// p5ValidFail is upstream's is_valid_fail: each line of group 2 is indented
// (len(line) - len(line.lstrip())) strictly more than the one before, the
// first more than 0.
func p5ValidFail(body string) bool {
	last := 0
	for _, line := range strings.Split(body, "\n") {
		ind := indentOf(line)
		if ind <= last {
			return false
		}
		last = ind
	}
	return true
}

// p5RemoveJSONBlocks is upstream's remove_json_blocks: a line whose
// rstrip() ends in "{" (or "[") starts a block that only a line equal to
// "}" (or "]") after rstrip() ends; lines inside blocks, the block lines
// themselves, and lines that are "{...}" or "[...]" are dropped.
func p5RemoveJSONBlocks(log string) string {
	var b strings.Builder
	b.Grow(len(log))
	inBlock, inList, first := false, false, true
	it := lineIter{s: log}
	for line, ok := it.next(); ok; line, ok = it.next() {
		s := pyRStrip(line)
		switch {
		case strings.HasSuffix(s, "{"):
			inBlock = true
			continue
		case strings.HasSuffix(s, "["):
			inList = true
			continue
		case s == "}" && inBlock:
			inBlock = false
			continue
		case s == "]" && inList:
			inList = false
			continue
		case inBlock || inList:
			continue
		case strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}"):
			continue
		case strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]"):
			continue
		}
		if !first {
			b.WriteByte('\n')
		}
		first = false
		b.WriteString(line)
	}
	return b.String()
}

// p5RemoveXMLBlocks is upstream's remove_xml_blocks: while
// <(\w+)>[\s\S]*?<\/\1> matches (leftmost, searched from the start of the
// text each time), the match is replaced by "<name>" repeated (the number
// of "<name>" in the match, minus one) times.
//
// Searching again from the start makes upstream quadratic in the number of
// blocks. The search here resumes at the replaced match's start, which
// finds the same match: before that point no match existed, and the
// replacement cannot create one there unless a deletion joins a "<", "</",
// "<name" or "</name" left of it to text right of it into a new tag, in
// which case the search starts over from the beginning.
func p5RemoveXMLBlocks(log string) string {
	from := 0
	for {
		start, end, name, ok := xmlBlock(log, from)
		if !ok {
			return log
		}
		open := "<" + name + ">"
		n := strings.Count(log[start:end], open) - 1
		if n < 0 {
			n = 0
		}
		log = log[:start] + strings.Repeat(open, n) + log[end:]
		from = start
		if n == 0 && partialTagBefore(log, start) {
			from = 0
		}
	}
}

// xmlBlock finds the leftmost match of <(\w+)>[\s\S]*?<\/\1> starting at or
// after from.
func xmlBlock(s string, from int) (start, end int, name string, ok bool) {
	unclosed := map[string]bool{} // names with no closing tag after the current position
	for i := from; i < len(s); {
		k := strings.IndexByte(s[i:], '<')
		if k < 0 {
			break
		}
		i += k
		j := i + 1
		for j < len(s) {
			r, n := utf8.DecodeRuneInString(s[j:])
			if !isPyWord(r) {
				break
			}
			j += n
		}
		if j > i+1 && j < len(s) && s[j] == '>' {
			name := s[i+1 : j]
			if !unclosed[name] {
				if c := strings.Index(s[j+1:], "</"+name+">"); c >= 0 {
					return i, j + 1 + c + len(name) + 3, name, true
				}
				unclosed[name] = true
			}
		}
		i++
	}
	return 0, 0, "", false
}

// partialTagBefore reports whether s[:i] ends in "<", "</", "<" + word
// characters or "</" + word characters.
func partialTagBefore(s string, i int) bool {
	for i > 0 {
		r, n := utf8.DecodeLastRuneInString(s[:i])
		if !isPyWord(r) {
			break
		}
		i -= n
	}
	if i > 0 && s[i-1] == '/' {
		i--
	}
	return i > 0 && s[i-1] == '<'
}
