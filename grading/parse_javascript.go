package grading

import (
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/swebuild/swebuild/internal/pystr"
)

// The parsers of upstream's log_parsers/javascript.py.

// ansiEscape is upstream's swebench.harness.utils.ansi_escape:
// re.sub(r"\x1B(?:[@-Z\\-_]|\[[0-?]*[ -/]*[@-~])", "", text). Each ESC
// followed by a byte in @-Z or \-_ goes with it; ESC [ goes with a run of
// 0-? bytes, a run of " "-/ bytes and a final @-~ byte (the classes are
// disjoint, so the greedy runs never give back); any other ESC stays. By
// hand (with the hand-matched pattern below, Chart.js went from 306 ms to
// 28 ms of CPU in BenchmarkParseMultilingual/chart_js/10MB).
func ansiEscape(text string) string {
	i := strings.IndexByte(text, 0x1b)
	if i < 0 {
		return text
	}
	var b strings.Builder
	b.Grow(len(text))
	last := 0
	for i >= 0 {
		end := ansiSeqEnd(text, i)
		if end > 0 {
			b.WriteString(text[last:i])
			last = end
		} else {
			end = i + 1
		}
		j := strings.IndexByte(text[end:], 0x1b)
		if j < 0 {
			break
		}
		i = end + j
	}
	b.WriteString(text[last:])
	return b.String()
}

// ansiSeqEnd returns where the escape sequence starting with the ESC at
// s[i] ends, or 0 when the pattern does not match there.
func ansiSeqEnd(s string, i int) int {
	j := i + 1
	if j >= len(s) {
		return 0
	}
	switch c := s[j]; {
	case c >= '@' && c <= 'Z', c >= '\\' && c <= '_':
		return j + 1
	case c != '[':
		return 0
	}
	j++
	for j < len(s) && s[j] >= '0' && s[j] <= '?' {
		j++
	}
	for j < len(s) && s[j] >= ' ' && s[j] <= '/' {
		j++
	}
	if j < len(s) && s[j] >= '@' && s[j] <= '~' {
		return j + 1
	}
	return 0
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
			st := pystr.Strip(line)
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
				sm.set(pystr.Strip(strings.Join(names, " - ")+" - "+m[1]), mk.status)
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

// parseChartJS is upstream's parse_log_chart_js: after ansi_escape, every
// match of re.findall(r"Chrome\s[\d\.]+[^\S\r\n]\(.+?\)[^\S\r\n](.*)FAILED$",
// log, re.MULTILINE) gives a failed test (the name keeps the space before
// "FAILED"). Chart.js is a FAIL_ONLY repo: passing tests are not listed.
// The pattern is matched by hand: from the digits on, everything lies on one
// line, which must end in "FAILED"; the lazy "(...)" ends at the first ")"
// followed by a space (a tab, ... but no newline).
func parseChartJS(log string, sm *StatusMap) error {
	log = ansiEscape(log)
	for pos := 0; ; {
		c := strings.Index(log[pos:], "Chrome")
		if c < 0 {
			return nil
		}
		c += pos
		pos = c + 1
		name, end, ok := chromeFailure(log, c+len("Chrome"))
		if ok {
			sm.set(name, StatusFailed)
			pos = end
		}
	}
}

// chromeFailure matches \s[\d\.]+[^\S\r\n]\(.+?\)[^\S\r\n](.*)FAILED$ at
// log[i:] and returns group 1 and where the match ends.
func chromeFailure(log string, i int) (string, int, bool) {
	if i >= len(log) {
		return "", 0, false
	}
	sp, n := pystr.SpaceAt(log, i)
	if !sp {
		return "", 0, false
	}
	i += n
	j := i
	for j < len(log) {
		if log[j] == '.' {
			j++
			continue
		}
		k := skipDigits(log, j)
		if k == j {
			break
		}
		j = k
	}
	if j == i {
		return "", 0, false
	}
	eol := strings.IndexByte(log[j:], '\n')
	if eol < 0 {
		eol = len(log)
	} else {
		eol += j
	}
	line := log[j:eol]
	if !strings.HasSuffix(line, "FAILED") {
		return "", 0, false
	}
	if sp, n := blankAt(line, 0); !sp || !strings.HasPrefix(line[n:], "(") {
		return "", 0, false
	} else {
		line = line[n+1:]
		j += n + 1
	}
	// The lazy .+? takes at least one character before the ")".
	for k := 1; k < len(line); k++ {
		if line[k] != ')' {
			continue
		}
		if sp, n := blankAt(line, k+1); sp && len(line)-(k+1+n) >= len("FAILED") {
			return line[k+1+n : len(line)-len("FAILED")], eol, true
		}
	}
	return "", 0, false
}

// blankAt reports whether a Python whitespace character other than "\r" and
// "\n" ([^\S\r\n]) starts at s[i], and its length.
func blankAt(s string, i int) (bool, int) {
	if i >= len(s) || s[i] == '\r' || s[i] == '\n' {
		return false, 0
	}
	return pystr.SpaceAt(s, i)
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
		if sp, n := pystr.SpaceAt(line, i+1); sp {
			sm.set(pystr.Strip(line[i+1+n:]), StatusFailed)
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
// PASSED, ✕ FAILED, ○ SKIPPED ("○ skipped name" keys "skipped name"). The
// pattern is matched by hand (see trimDuration):
// BenchmarkParseMultilingual/immutable_js-2006/10MB (jest) took 212 ms of
// CPU with Go's regexp, 19 ms by hand.
func parseJest(log string, sm *StatusMap) error {
	return forEachLine(log, func(line string) error {
		line = pystr.Strip(line)
		for _, m := range [...]struct{ mark, status string }{{"✓", StatusPassed}, {"✕", StatusFailed}, {"○", StatusSkipped}} {
			if rest, ok := markThenRest(line, m.mark); ok {
				sm.set(trimDuration(rest), m.status)
				break
			}
		}
		return nil
	})
}

// parseJestJSON is upstream's parse_log_jest_json: jest --json piped
// through JEST_JSON_JQ_TRANSFORM prints "[PASSED] name" / "[FAILED] name";
// ^\[(PASSED|FAILED)\]\s(.+)$ on the stripped line.
func parseJestJSON(log string, sm *StatusMap) error {
	return forEachLine(log, func(line string) error {
		line = pystr.Strip(line)
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
		if sp, n := pystr.SpaceAt(rest, 0); sp && len(rest) > n {
			sm.set(rest[n:], status)
		}
		return nil
	})
}

// parseVitest is upstream's parse_log_vitest (--reporter=verbose):
// ^\s*(✓|×|↓)\s(.+?)(?:\s(\d+\s*m?s?|\[skipped\]))?$ on the stripped line;
// ✓ is PASSED, × FAILED, ↓ SKIPPED. Matched by hand, see vitestName.
func parseVitest(log string, sm *StatusMap) error {
	return forEachLine(log, func(line string) error {
		line = pystr.Strip(line)
		for _, m := range [...]struct{ mark, status string }{{"✓", StatusPassed}, {"×", StatusFailed}, {"↓", StatusSkipped}} {
			if rest, ok := markThenRest(line, m.mark); ok {
				sm.set(vitestName(rest), m.status)
				break
			}
		}
		return nil
	})
}

// vitestName is group 2 of the vitest pattern on a non-empty rest: the lazy
// name ends at the first position p >= 1 where \s(\d+\s*m?s?|\[skipped\])
// takes the rest of the line, else it is all of rest. Every candidate p lies
// in the tail made of digits, whitespace, "m" and "s", or just before a
// final "[skipped]".
func vitestName(rest string) string {
	skipped := -1
	if strings.HasSuffix(rest, "[skipped]") {
		if sp, n := pystr.SpaceBefore(rest, len(rest)-len("[skipped]")); sp {
			skipped = len(rest) - len("[skipped]") - n
		}
	}
	tail := len(rest)
	for tail > 0 {
		r, n := utf8.DecodeLastRuneInString(rest[:tail])
		if !isPyDigit(r) && !pystr.IsSpace(r) && r != 'm' && r != 's' {
			break
		}
		tail -= n
	}
	for p := tail; p < len(rest); {
		if skipped >= 1 && skipped < p {
			break
		}
		if p >= 1 && isVitestDuration(rest, p) {
			return rest[:p]
		}
		_, n := utf8.DecodeRuneInString(rest[p:])
		p += n
	}
	if skipped >= 1 {
		return rest[:skipped]
	}
	return rest
}

// isVitestDuration reports whether s[p:] is all of \s\d+\s*m?s? .
func isVitestDuration(s string, p int) bool {
	sp, n := pystr.SpaceAt(s, p)
	if !sp {
		return false
	}
	j := skipDigits(s, p+n)
	if j == p+n {
		return false
	}
	switch s[skipSpaces(s, j):] {
	case "", "m", "s", "ms":
		return true
	}
	return false
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
		line = pystr.Strip(line)
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
				parts[i] = pystr.Strip(p)
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
			sp, n := pystr.SpaceAt(log, i)
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
		s := pystr.RStrip(line)
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
// Searching again from the start, and rebuilding the text, makes upstream
// quadratic in the number of blocks. Here the text is the output so far
// (done, where no match starts), some "<name>" left by the last replacement,
// and the rest of the input; the search resumes after done. That finds the
// same match: no match started in done, and a replacement cannot create one
// there unless a deletion joins a "<", "</", "<name" or "</name" at the end
// of done to the text after it into a new tag, in which case the text is
// put back together and searched from the start, as upstream does. A name
// with no closing tag in the rest is remembered (the rest only loses text
// at its start) until then.
func p5RemoveXMLBlocks(log string) string {
	var (
		done     []byte
		r        = log
		insName  string // the replacement "<insName>" * insCount precedes r
		insCount int
		unclosed = map[string]bool{}
	)
	for {
		var open string
		n := 0
		if insCount > 0 {
			// A match starts at the first inserted tag iff r closes it.
			open = "<" + insName + ">"
			c := -1
			if !unclosed[insName] {
				if c = strings.Index(r, "</"+insName+">"); c < 0 {
					unclosed[insName] = true
				}
			}
			if c < 0 {
				for ; insCount > 0; insCount-- {
					done = append(done, open...)
				}
				continue
			}
			n = insCount + strings.Count(r[:c], open) - 1
			r = r[c+len(insName)+3:]
		} else {
			start, end, name, ok := xmlBlock(r, unclosed)
			if !ok {
				return string(append(done, r...))
			}
			done = append(done, r[:start]...)
			open = "<" + name + ">"
			n = strings.Count(r[start:end], open) - 1
			insName = name
			r = r[end:]
		}
		insCount = n
		if n == 0 && partialTagBefore(done) {
			r = string(done) + r
			done = done[:0]
			unclosed = map[string]bool{}
		}
	}
}

// xmlBlock finds the leftmost match of <(\w+)>[\s\S]*?<\/\1> in s.
// unclosed holds names known to have no closing tag in s; names found to
// have none are added.
func xmlBlock(s string, unclosed map[string]bool) (start, end int, name string, ok bool) {
	for i := 0; i < len(s); {
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

// partialTagBefore reports whether s ends in "<", "</", "<" + word
// characters or "</" + word characters.
func partialTagBefore(s []byte) bool {
	i := len(s)
	for i > 0 {
		r, n := utf8.DecodeLastRune(s[:i])
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
