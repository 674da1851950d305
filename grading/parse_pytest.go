package grading

import "strings"

// hasStatusPrefix is upstream's any(line.startswith(x.value) for x in TestStatus).
func hasStatusPrefix(line string) bool {
	if line == "" {
		return false
	}
	switch line[0] {
	case 'F':
		return strings.HasPrefix(line, StatusFailed)
	case 'P':
		return strings.HasPrefix(line, StatusPassed)
	case 'S':
		return strings.HasPrefix(line, StatusSkipped)
	case 'E':
		return strings.HasPrefix(line, StatusError)
	case 'X':
		return strings.HasPrefix(line, StatusXFail)
	}
	return false
}

// hasStatusSuffix is upstream's any(line.endswith(x.value) for x in TestStatus).
func hasStatusSuffix(line string) bool {
	if line == "" {
		return false
	}
	switch line[len(line)-1] {
	case 'D':
		return strings.HasSuffix(line, StatusFailed) || strings.HasSuffix(line, StatusPassed) ||
			strings.HasSuffix(line, StatusSkipped)
	case 'R':
		return strings.HasSuffix(line, StatusError)
	case 'L':
		return strings.HasSuffix(line, StatusXFail)
	}
	return false
}

// pytestStyle is what tells parse_log_pytest, parse_log_matplotlib and
// parse_log_pytest_options apart, in v4.1.0 and in v5 (RulesV5).
type pytestStyle struct {
	mouseButtons bool // matplotlib: "MouseButton.LEFT" -> "1" and "MouseButton.RIGHT" -> "3" first
	optionNames  bool // pytest_options: the test id through optionTestName
	skipSummary  bool // v5: no "SKIPPED [N] path:line: reason" summary line (isSkipSummary)
}

// parsePytestStyle is the body those parsers share: a line starting with a
// status gives {split()[1]: split()[0]}, after " - " is replaced by " " on
// FAILED lines.
func parsePytestStyle(log string, sm *StatusMap, st pytestStyle) error {
	it := lineIter{s: log}
	for line, ok := it.next(); ok; line, ok = it.next() {
		if st.mouseButtons && strings.Contains(line, "MouseButton.") {
			line = strings.ReplaceAll(line, "MouseButton.LEFT", "1")
			line = strings.ReplaceAll(line, "MouseButton.RIGHT", "3")
		}
		if !hasStatusPrefix(line) {
			continue
		}
		if strings.HasPrefix(line, StatusFailed) {
			line = strings.ReplaceAll(line, " - ", " ")
		}
		f0, f1, n := pySplit2(line)
		if n <= 1 || (st.skipSummary && isSkipSummary(f0, f1)) {
			continue
		}
		if st.optionNames {
			f1 = optionTestName(f1)
		}
		sm.set(f1, f0)
	}
	return nil
}

// parsePytest is upstream's parse_log_pytest.
func parsePytest(log string, sm *StatusMap) error {
	return parsePytestStyle(log, sm, pytestStyle{})
}

// parseMatplotlib is upstream's parse_log_matplotlib: parse_log_pytest after
// "MouseButton.LEFT" -> "1" and "MouseButton.RIGHT" -> "3".
func parseMatplotlib(log string, sm *StatusMap) error {
	return parsePytestStyle(log, sm, pytestStyle{mouseButtons: true})
}

// parsePytestOptions is upstream's parse_log_pytest_options: like
// parse_log_pytest, but a test id "main[option]" whose option is an absolute
// path (starts with one "/" and has no "*") keeps only the path's last
// element: "main[/last]".
func parsePytestOptions(log string, sm *StatusMap) error {
	return parsePytestStyle(log, sm, pytestStyle{optionNames: true})
}

// optionTestName applies re.compile(r"(.*?)\[(.*)\]").search to a test id
// (which holds no whitespace, so no newline): it matches from the first "["
// to the last "]" after it, and anything after that "]" is dropped.
func optionTestName(id string) string {
	i := strings.IndexByte(id, '[')
	if i < 0 {
		return id
	}
	j := strings.LastIndexByte(id, ']')
	if j < i {
		return id
	}
	main, option := id[:i], id[i+1:j]
	if strings.HasPrefix(option, "/") && !strings.HasPrefix(option, "//") && !strings.Contains(option, "*") {
		option = "/" + option[strings.LastIndexByte(option, '/')+1:]
	}
	return main + "[" + option + "]"
}

// parsePytestV2 is upstream's parse_log_pytest_v2: each line loses ANSI
// colour codes (re.sub(r"\[(\d+)m", "", line)) and then every character
// chr(1)..chr(31); a line starting with a status gives {split()[1]:
// split()[0]}, otherwise a line ending with one gives {split()[0]:
// split()[1]}.
func parsePytestV2(log string, sm *StatusMap) error {
	it := lineIter{s: log}
	for line, ok := it.next(); ok; line, ok = it.next() {
		line = cleanV2(line)
		if hasStatusPrefix(line) {
			if strings.HasPrefix(line, StatusFailed) {
				line = strings.ReplaceAll(line, " - ", " ")
			}
			f0, f1, n := pySplit2(line)
			if n >= 2 {
				sm.set(f1, f0)
			}
		} else if hasStatusSuffix(line) {
			f0, f1, n := pySplit2(line)
			if n >= 2 {
				sm.set(f0, f1)
			}
		}
	}
	return nil
}

// cleanV2 removes, in one left-to-right pass, every "[" + one or more \d
// characters + "m", then deletes the characters chr(1)..chr(31). It returns
// line itself when there is nothing to remove.
func cleanV2(line string) string {
	dirty := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		if (c >= 1 && c < 32) || c == '[' {
			dirty = true
			break
		}
	}
	if !dirty {
		return line
	}
	// Pass 1: the regexp substitution.
	var b []byte
	last := 0
	for i := 0; i < len(line); i++ {
		if line[i] != '[' {
			continue
		}
		if end := ansiEnd(line, i); end > 0 {
			if b == nil {
				b = make([]byte, 0, len(line))
			}
			b = append(b, line[last:i]...)
			last = end
			i = end - 1
		}
	}
	s := line
	if b != nil {
		b = append(b, line[last:]...)
		s = string(b)
	}
	// Pass 2: str.translate deleting chr(1)..chr(31).
	k := 0
	for k < len(s) && !(s[k] >= 1 && s[k] < 32) {
		k++
	}
	if k == len(s) {
		return s
	}
	out := make([]byte, 0, len(s))
	out = append(out, s[:k]...)
	for ; k < len(s); k++ {
		if c := s[k]; !(c >= 1 && c < 32) {
			out = append(out, c)
		}
	}
	return string(out)
}

// ansiEnd reports where a match of `\[(\d+)m` starting at s[i] == '[' ends,
// or 0 when there is none.
func ansiEnd(s string, i int) int {
	j := i + 1
	digits := 0
	for j < len(s) {
		c := s[j]
		if c >= '0' && c <= '9' {
			j++
			digits++
			continue
		}
		if c < 0x80 {
			break
		}
		r, n := decodeRune(s[j:])
		if !isPyDigit(r) {
			break
		}
		j += n
		digits++
	}
	if digits == 0 || j >= len(s) || s[j] != 'm' {
		return 0
	}
	return j + 1
}

// parseSeaborn is upstream's parse_log_seaborn. Lines on which upstream's
// split()[1] raises IndexError make it return ErrUpstreamParserRaises.
func parseSeaborn(log string, sm *StatusMap) error {
	it := lineIter{s: log}
	lineNo := 0
	for line, ok := it.next(); ok; line, ok = it.next() {
		lineNo++
		switch {
		case strings.HasPrefix(line, StatusFailed):
			_, f1, n := pySplit2(line)
			if n < 2 {
				return raisesAt("parse_log_seaborn", lineNo, line, "line.split()[1] raises IndexError")
			}
			sm.set(f1, StatusFailed)
		case strings.Contains(line, " "+StatusPassed+" "):
			f0, f1, n := pySplit2(line)
			if n < 2 {
				return raisesAt("parse_log_seaborn", lineNo, line, "parts[1] raises IndexError")
			}
			if f1 == StatusPassed {
				sm.set(f0, StatusPassed)
			}
		case strings.HasPrefix(line, StatusPassed):
			_, f1, n := pySplit2(line)
			if n < 2 {
				return raisesAt("parse_log_seaborn", lineNo, line, "parts[1] raises IndexError")
			}
			sm.set(f1, StatusPassed)
		}
	}
	return nil
}
