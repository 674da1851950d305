package grading

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/swebuild/swebuild/internal/pystr"
)

// Upstream's parsers use Python 3.11's re on str patterns, where \s, \d and
// \w are Unicode classes. Go's regexp has the same leftmost-first
// (backtracking-order) match semantics for patterns without backreferences,
// but its \s, \d, \w and \b are ASCII-only. The patterns in this package are
// therefore written with these explicit classes, taken from Python 3.11.2
// (Unicode 14.0.0) by testing every code point against re's \s and \d.
const (
	// pyDigitChars is the body of Python's \d: Unicode 14.0 category Nd (the
	// same set, see isPyDigit).
	pyDigitChars = `0-9\x{660}-\x{669}\x{6f0}-\x{6f9}\x{7c0}-\x{7c9}\x{966}-\x{96f}\x{9e6}-\x{9ef}\x{a66}-\x{a6f}` +
		`\x{ae6}-\x{aef}\x{b66}-\x{b6f}\x{be6}-\x{bef}\x{c66}-\x{c6f}\x{ce6}-\x{cef}\x{d66}-\x{d6f}\x{de6}-\x{def}` +
		`\x{e50}-\x{e59}\x{ed0}-\x{ed9}\x{f20}-\x{f29}\x{1040}-\x{1049}\x{1090}-\x{1099}\x{17e0}-\x{17e9}` +
		`\x{1810}-\x{1819}\x{1946}-\x{194f}\x{19d0}-\x{19d9}\x{1a80}-\x{1a89}\x{1a90}-\x{1a99}\x{1b50}-\x{1b59}` +
		`\x{1bb0}-\x{1bb9}\x{1c40}-\x{1c49}\x{1c50}-\x{1c59}\x{a620}-\x{a629}\x{a8d0}-\x{a8d9}\x{a900}-\x{a909}` +
		`\x{a9d0}-\x{a9d9}\x{a9f0}-\x{a9f9}\x{aa50}-\x{aa59}\x{abf0}-\x{abf9}\x{ff10}-\x{ff19}\x{104a0}-\x{104a9}` +
		`\x{10d30}-\x{10d39}\x{11066}-\x{1106f}\x{110f0}-\x{110f9}\x{11136}-\x{1113f}\x{111d0}-\x{111d9}` +
		`\x{112f0}-\x{112f9}\x{11450}-\x{11459}\x{114d0}-\x{114d9}\x{11650}-\x{11659}\x{116c0}-\x{116c9}` +
		`\x{11730}-\x{11739}\x{118e0}-\x{118e9}\x{11950}-\x{11959}\x{11c50}-\x{11c59}\x{11d50}-\x{11d59}` +
		`\x{11da0}-\x{11da9}\x{16a60}-\x{16a69}\x{16ac0}-\x{16ac9}\x{16b50}-\x{16b59}\x{1d7ce}-\x{1d7ff}` +
		`\x{1e140}-\x{1e149}\x{1e2f0}-\x{1e2f9}\x{1e950}-\x{1e959}\x{1fbf0}-\x{1fbf9}`

	// reS, reNotS and reD stand for Python's \s, \S and \d in a pattern.
	reS    = `[` + pystr.SpaceClass + `]`
	reNotS = `[^` + pystr.SpaceClass + `]`
	reD    = `[` + pyDigitChars + `]`
)

// pyRegexp compiles a pattern of this package. The patterns are constants,
// so a failure is a programming error that every test run would show.
func pyRegexp(pattern string) *regexp.Regexp {
	return regexp.MustCompile(pattern)
}

// goUnicodeVersion is the Unicode version of Go's unicode tables that
// isPyWord's exception list was computed against.
const goUnicodeVersion = "15.0.0"

// isPyWord reports whether Python 3.11's re matches r with \w in a str
// pattern: "_" or a character for which str.isalnum() is true. That is
// Go's letters and numbers (unicode.L, unicode.N) as of Unicode 14.0: the
// characters Unicode 15.0 added to L or N are excluded (computed by
// comparing every code point; a test checks unicode.Version).
func isPyWord(r rune) bool {
	if r < utf8.RuneSelf {
		return r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
	}
	if !unicode.IsLetter(r) && !unicode.IsNumber(r) {
		return false
	}
	switch {
	case r >= 0x1123f && r <= 0x11240, r == 0x11f02, r >= 0x11f04 && r <= 0x11f10,
		r >= 0x11f12 && r <= 0x11f33, r >= 0x11f50 && r <= 0x11f59, r == 0x1342f,
		r >= 0x13441 && r <= 0x13446, r == 0x1b132, r == 0x1b155, r >= 0x1d2c0 && r <= 0x1d2d3,
		r >= 0x1df25 && r <= 0x1df2a, r >= 0x1e030 && r <= 0x1e06d, r >= 0x1e4d0 && r <= 0x1e4eb,
		r >= 0x1e4f0 && r <= 0x1e4f9, r == 0x2b739, r >= 0x31350 && r <= 0x323af:
		return false
	}
	return true
}

// forEachLine calls fn with each item of Python's log.split("\n").
func forEachLine(log string, fn func(line string) error) error {
	it := lineIter{s: log}
	for line, ok := it.next(); ok; line, ok = it.next() {
		if err := fn(line); err != nil {
			return err
		}
	}
	return nil
}

// pyLen is Python's len() of a str: the number of code points.
func pyLen(s string) int { return utf8.RuneCountInString(s) }

// indentOf is Python's len(line) - len(line.lstrip()), in code points.
func indentOf(line string) int {
	return pyLen(line) - pyLen(pystr.LStrip(line))
}

// hasAnyPrefix reports whether s starts with one of prefixes.
func hasAnyPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// skipSpaces returns the index after the run of Python whitespace starting
// at s[i].
func skipSpaces(s string, i int) int {
	for i < len(s) {
		sp, n := pystr.SpaceAt(s, i)
		if !sp {
			break
		}
		i += n
	}
	return i
}

// skipDigits returns the index after the run of Python \d characters
// starting at s[i].
func skipDigits(s string, i int) int {
	for i < len(s) {
		if c := s[i]; c < utf8.RuneSelf {
			if c < '0' || c > '9' {
				break
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if !isPyDigit(r) {
			break
		}
		i += n
	}
	return i
}

// isDurationTail reports whether s[p:] is all of \s\(\d+\s*m?s\) (the
// optional duration of parse_log_jest and parse_log_redis).
func isDurationTail(s string, p int) bool {
	sp, n := pystr.SpaceAt(s, p)
	if !sp {
		return false
	}
	i := p + n
	if i >= len(s) || s[i] != '(' {
		return false
	}
	j := skipDigits(s, i+1)
	if j == i+1 {
		return false
	}
	j = skipSpaces(s, j)
	switch {
	case strings.HasPrefix(s[j:], "ms"):
		j += 2
	case strings.HasPrefix(s[j:], "s"):
		j++
	default:
		return false
	}
	return s[j:] == ")"
}

// trimDuration is group 1 of (.+?)(?:\s\((\d+\s*m?s)\))?$ on a non-empty
// rest: the lazy group stops where the optional duration can take the rest
// of the line. The duration holds one "(", so it can only start just before
// the last "(".
func trimDuration(rest string) string {
	k := strings.LastIndexByte(rest, '(')
	if k <= 0 {
		return rest
	}
	if sp, n := pystr.SpaceBefore(rest, k); sp && k-n >= 1 && isDurationTail(rest, k-n) {
		return rest[:k-n]
	}
	return rest
}

// markThenRest matches mark + \s + (.+) at the start of a stripped line
// and returns the text after the one whitespace character.
func markThenRest(line, mark string) (string, bool) {
	if !strings.HasPrefix(line, mark) {
		return "", false
	}
	rest := line[len(mark):]
	if rest == "" {
		return "", false
	}
	sp, n := pystr.SpaceAt(rest, 0)
	if !sp || n == len(rest) {
		return "", false
	}
	return rest[n:], true
}
