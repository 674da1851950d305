package grading

import (
	"strings"
	"unicode/utf8"

	"github.com/swebuild/swebuild/internal/pystr"
)

// The parsers of upstream's log_parsers/ruby.py; each applies re.match to
// line.strip() for every line of log.split("\n").

// parseMinitest is upstream's parse_log_minitest (minitest-reporters):
// ^(.+)\. .*=.*(\.|F|E).*$ ; "." PASSED, "F" and "E" FAILED. Matched by hand:
// the greedy group 1 runs to the last ". " (with a character before it)
// whose rest holds an "=" somewhere before its last ".", "F" or "E", which
// is the outcome (so a skip "S" is not recorded, and shoulda-context names
// lose their final "."). BenchmarkParseMultilingual/jekyll-8167/10MB: 100 ms
// of CPU with Go's regexp, 20 ms by hand.
//
// In linear time (issue 20 row 9: Python's backtracking takes 18 s on a
// 4 MiB "--- FAIL:" line, and so did trying each ". " in turn): the outcome
// is the line's last ".", "F" or "E" (at L) whichever ". " is chosen, so
// the "=" needed is best the last one before L (at e), and group 1 ends at
// the last ". " that ends at or before e.
func parseMinitest(log string, sm *StatusMap) error {
	return forEachLine(log, func(line string) error {
		line = pystr.Strip(line)
		if name, outcome, ok := minitestMatch(line); ok {
			if outcome == '.' {
				sm.set(name, StatusPassed)
			} else {
				sm.set(name, StatusFailed)
			}
		}
		return nil
	})
}

// minitestMatch matches parse_log_minitest's pattern on a stripped line in
// O(len(line)): group 1 and the outcome character.
func minitestMatch(line string) (string, byte, bool) {
	l := strings.LastIndexAny(line, ".FE")
	if l < 0 {
		return "", 0, false
	}
	e := strings.LastIndexByte(line[:l], '=')
	if e < 0 {
		return "", 0, false
	}
	k := strings.LastIndex(line[:e], ". ")
	if k < 1 {
		return "", 0, false
	}
	return line[:k], line[l], true
}

// parseCucumber is upstream's parse_log_cucumber (--format progress):
// ^(.*) \.+(\.|F) ; "." PASSED, "F" FAILED. Matched by hand: group 1 runs to
// the last " " followed by a run of dots and then "F", or by two dots or
// more, so a scenario whose first step did not pass is not recorded.
func parseCucumber(log string, sm *StatusMap) error {
	return forEachLine(log, func(line string) error {
		line = pystr.Strip(line)
		for k := strings.LastIndexByte(line, ' '); k >= 0; k = strings.LastIndexByte(line[:k], ' ') {
			d := k + 1
			for d < len(line) && line[d] == '.' {
				d++
			}
			dots := d - k - 1
			switch {
			case dots >= 1 && d < len(line) && line[d] == 'F':
				sm.set(line[:k], StatusFailed)
			case dots >= 2:
				sm.set(line[:k], StatusPassed)
			default:
				continue
			}
			break
		}
		return nil
	})
}

// parseRubyUnit is upstream's parse_log_ruby_unit (test-unit):
// ^\s*(?:test: )?(.+):\s+(\.|E\b|F\b|O\b) ; "." PASSED, "E" and "F"
// FAILED, "O" (omission) SKIPPED. \b is Python's Unicode word boundary, so
// the pattern is matched by hand (see rubyUnitMatch).
func parseRubyUnit(log string, sm *StatusMap) error {
	return forEachLine(log, func(line string) error {
		name, outcome, ok := rubyUnitMatch(pystr.Strip(line))
		if !ok {
			return nil
		}
		switch outcome {
		case '.':
			sm.set(name, StatusPassed)
		case 'O':
			sm.set(name, StatusSkipped)
		default:
			sm.set(name, StatusFailed)
		}
		return nil
	})
}

// rubyUnitMatch matches the stripped line (so \s* matches nothing). The
// optional "test: " is tried first, as the greedy ? does.
func rubyUnitMatch(line string) (string, byte, bool) {
	if rest, ok := strings.CutPrefix(line, "test: "); ok {
		if name, outcome, ok := rubyUnitTail(rest); ok {
			return name, outcome, true
		}
	}
	return rubyUnitTail(line)
}

// rubyUnitTail matches (.+):\s+(\.|E\b|F\b|O\b) at the start of s: the
// greedy group ends at the last ":" (with at least one character before it)
// that is followed by whitespace and then an outcome. \s+ takes the whole
// whitespace run, as no outcome is whitespace.
func rubyUnitTail(s string) (string, byte, bool) {
	for k := strings.LastIndexByte(s, ':'); k >= 1; k = strings.LastIndexByte(s[:k], ':') {
		j := k + 1
		for j < len(s) {
			sp, n := pystr.SpaceAt(s, j)
			if !sp {
				break
			}
			j += n
		}
		if j == k+1 || j >= len(s) {
			continue
		}
		switch c := s[j]; c {
		case '.':
			return s[:k], c, true
		case 'E', 'F', 'O':
			if j+1 == len(s) {
				return s[:k], c, true
			}
			if r, _ := utf8.DecodeRuneInString(s[j+1:]); !isPyWord(r) {
				return s[:k], c, true
			}
		}
	}
	return "", 0, false
}

// parseRspecTransformedJSON is upstream's parse_log_rspec_transformed_json:
// RSpec --format json piped through a jq transform prints
// "description - [id - ]status"; (.+) - (passed|failed) (re.match, no end
// anchor) takes the last " - passed" / " - failed" of the line. "pending"
// lines are not recorded.
func parseRspecTransformedJSON(log string, sm *StatusMap) error {
	re := pyRegexp(`^(.+) - (passed|failed)`)
	return forEachLine(log, func(line string) error {
		line = pystr.Strip(line)
		if !strings.Contains(line, " - ") {
			return nil
		}
		m := re.FindStringSubmatch(line)
		if m == nil {
			return nil
		}
		if m[2] == "passed" {
			sm.set(m[1], StatusPassed)
		} else {
			sm.set(m[1], StatusFailed)
		}
		return nil
	})
}
