// Package pystr is Python 3.11's notion of whitespace for str values, the
// one place swebuild writes it: str.isspace, str.strip/lstrip/rstrip with
// no arguments, the indentation len(s) - len(s.lstrip()), and the body of
// re's \s class for str patterns. Upstream's requirements handling
// (envfile), its flat Dockerfiles (builder/render), its log parsers
// (grading) and its eval-script checks (verify) all rely on it.
//
// The set is \t \n \v \f \r, the separators U+001C..U+001F, the space,
// U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F
// and U+3000 (Go's unicode.IsSpace plus U+001C..U+001F). Bytes that are
// not valid UTF-8 are never space: Python would not have decoded them.
package pystr

import "unicode/utf8"

// SpaceClass is the body of Python's \s for str patterns, for a Go regexp
// character class ("[" + SpaceClass + "]").
const SpaceClass = `\x{9}-\x{d}\x{1c}-\x{20}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}-\x{2029}\x{202f}\x{205f}\x{3000}`

// asciiSpace has bit c set for each ASCII character c for which
// str.isspace() is true.
const asciiSpace = 1<<'\t' | 1<<'\n' | 1<<'\v' | 1<<'\f' | 1<<'\r' |
	1<<0x1c | 1<<0x1d | 1<<0x1e | 1<<0x1f | 1<<' '

// IsASCIISpace reports whether str.isspace() is true for the ASCII
// character c.
func IsASCIISpace(c byte) bool {
	return c <= ' ' && (uint64(asciiSpace)>>c)&1 == 1
}

// IsSpace reports whether str.isspace() (and re's \s) is true for r.
func IsSpace(r rune) bool {
	if r < utf8.RuneSelf {
		return IsASCIISpace(byte(r))
	}
	switch {
	case r == 0x85, r == 0xa0, r == 0x1680:
		return true
	case r >= 0x2000 && r <= 0x200a:
		return true
	case r == 0x2028, r == 0x2029, r == 0x202f, r == 0x205f, r == 0x3000:
		return true
	}
	return false
}

// SpaceAt reports whether a whitespace character starts at s[i], and its
// length in bytes (1 for a byte that starts none).
func SpaceAt(s string, i int) (bool, int) {
	c := s[i]
	if c < utf8.RuneSelf {
		return IsASCIISpace(c), 1
	}
	// Every non-ASCII Python space starts with 0xC2, 0xE1, 0xE2 or 0xE3.
	if c != 0xc2 && c != 0xe1 && c != 0xe2 && c != 0xe3 {
		return false, 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return IsSpace(r), n
}

// SpaceBefore reports whether a whitespace character ends at s[i-1], and
// its length in bytes.
func SpaceBefore(s string, i int) (bool, int) {
	if i <= 0 {
		return false, 0
	}
	c := s[i-1]
	if c < utf8.RuneSelf {
		return IsASCIISpace(c), 1
	}
	r, n := utf8.DecodeLastRuneInString(s[:i])
	return IsSpace(r), n
}

// Strip is str.strip() with no arguments.
func Strip(s string) string { return RStrip(LStrip(s)) }

// LStrip is str.lstrip() with no arguments.
func LStrip(s string) string {
	i := 0
	for i < len(s) {
		sp, n := SpaceAt(s, i)
		if !sp {
			break
		}
		i += n
	}
	return s[i:]
}

// RStrip is str.rstrip() with no arguments.
func RStrip(s string) string {
	j := len(s)
	for j > 0 {
		sp, n := SpaceBefore(s, j)
		if !sp {
			break
		}
		j -= n
	}
	return s[:j]
}

// Indent is len(s) - len(s.lstrip()): the leading whitespace of s in code
// points.
func Indent(s string) int {
	return utf8.RuneCountInString(s[:len(s)-len(LStrip(s))])
}
