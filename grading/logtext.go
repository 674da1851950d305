package grading

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/swebuild/swebuild/internal/pystr"
)

// This file holds the small pieces of Python string semantics the upstream
// log parsers rely on: universal-newline reading, str.split() with no
// arguments and the \d class of Python 3.11's re (str.isspace and
// str.strip are internal/pystr's).

// NormalizeNewlines does what Python's open(path).read() does to line ends
// (universal newlines): "\r\n" and a lone "\r" both become "\n". The input is
// returned unchanged (no copy) when it holds no "\r".
func NormalizeNewlines(s string) string {
	i := strings.IndexByte(s, '\r')
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i >= 0 {
		b.WriteString(s[:i])
		b.WriteByte('\n')
		s = s[i+1:]
		if len(s) > 0 && s[0] == '\n' {
			s = s[1:]
		}
		i = strings.IndexByte(s, '\r')
	}
	b.WriteString(s)
	return b.String()
}

// pySplit2 returns the first two fields of Python's str.split() (no
// arguments: runs of whitespace separate, leading and trailing whitespace is
// ignored) and how many fields exist, counting at most 2.
func pySplit2(s string) (f0, f1 string, n int) {
	i := 0
	for k := 0; k < 2; k++ {
		// skip whitespace
		for i < len(s) {
			if c := s[i]; c < utf8.RuneSelf {
				if !pystr.IsASCIISpace(c) {
					break
				}
				i++
				continue
			}
			sp, w := pystr.SpaceAt(s, i)
			if !sp {
				break
			}
			i += w
		}
		if i >= len(s) {
			return f0, f1, n
		}
		start := i
		for i < len(s) {
			if c := s[i]; c < utf8.RuneSelf {
				if pystr.IsASCIISpace(c) {
					break
				}
				i++
				continue
			}
			sp, w := pystr.SpaceAt(s, i)
			if sp {
				break
			}
			i += w
		}
		if k == 0 {
			f0 = s[start:i]
		} else {
			f1 = s[start:i]
		}
		n++
	}
	return f0, f1, n
}

// isPyDigit reports whether Python 3.11's re matches r with \d in a str
// pattern: Unicode category Nd as of Unicode 14.0, the version Python 3.11
// ships. Go's unicode.Nd follows a newer Unicode, so the ranges are kept here
// as data (pyDigits).
func isPyDigit(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= '0' && r <= '9'
	}
	return unicode.Is(pyDigits, r)
}

// pyDigits is Unicode 14.0's category Nd (0-9 included, for unicode.Is).
var pyDigits = &unicode.RangeTable{
	R16: []unicode.Range16{
		{Lo: 0x30, Hi: 0x39, Stride: 1},
		{Lo: 0x660, Hi: 0x669, Stride: 1},
		{Lo: 0x6F0, Hi: 0x6F9, Stride: 1},
		{Lo: 0x7C0, Hi: 0x7C9, Stride: 1},
		{Lo: 0x966, Hi: 0x96F, Stride: 1},
		{Lo: 0x9E6, Hi: 0x9EF, Stride: 1},
		{Lo: 0xA66, Hi: 0xA6F, Stride: 1},
		{Lo: 0xAE6, Hi: 0xAEF, Stride: 1},
		{Lo: 0xB66, Hi: 0xB6F, Stride: 1},
		{Lo: 0xBE6, Hi: 0xBEF, Stride: 1},
		{Lo: 0xC66, Hi: 0xC6F, Stride: 1},
		{Lo: 0xCE6, Hi: 0xCEF, Stride: 1},
		{Lo: 0xD66, Hi: 0xD6F, Stride: 1},
		{Lo: 0xDE6, Hi: 0xDEF, Stride: 1},
		{Lo: 0xE50, Hi: 0xE59, Stride: 1},
		{Lo: 0xED0, Hi: 0xED9, Stride: 1},
		{Lo: 0xF20, Hi: 0xF29, Stride: 1},
		{Lo: 0x1040, Hi: 0x1049, Stride: 1},
		{Lo: 0x1090, Hi: 0x1099, Stride: 1},
		{Lo: 0x17E0, Hi: 0x17E9, Stride: 1},
		{Lo: 0x1810, Hi: 0x1819, Stride: 1},
		{Lo: 0x1946, Hi: 0x194F, Stride: 1},
		{Lo: 0x19D0, Hi: 0x19D9, Stride: 1},
		{Lo: 0x1A80, Hi: 0x1A89, Stride: 1},
		{Lo: 0x1A90, Hi: 0x1A99, Stride: 1},
		{Lo: 0x1B50, Hi: 0x1B59, Stride: 1},
		{Lo: 0x1BB0, Hi: 0x1BB9, Stride: 1},
		{Lo: 0x1C40, Hi: 0x1C49, Stride: 1},
		{Lo: 0x1C50, Hi: 0x1C59, Stride: 1},
		{Lo: 0xA620, Hi: 0xA629, Stride: 1},
		{Lo: 0xA8D0, Hi: 0xA8D9, Stride: 1},
		{Lo: 0xA900, Hi: 0xA909, Stride: 1},
		{Lo: 0xA9D0, Hi: 0xA9D9, Stride: 1},
		{Lo: 0xA9F0, Hi: 0xA9F9, Stride: 1},
		{Lo: 0xAA50, Hi: 0xAA59, Stride: 1},
		{Lo: 0xABF0, Hi: 0xABF9, Stride: 1},
		{Lo: 0xFF10, Hi: 0xFF19, Stride: 1},
	},
	R32: []unicode.Range32{
		{Lo: 0x104A0, Hi: 0x104A9, Stride: 1},
		{Lo: 0x10D30, Hi: 0x10D39, Stride: 1},
		{Lo: 0x11066, Hi: 0x1106F, Stride: 1},
		{Lo: 0x110F0, Hi: 0x110F9, Stride: 1},
		{Lo: 0x11136, Hi: 0x1113F, Stride: 1},
		{Lo: 0x111D0, Hi: 0x111D9, Stride: 1},
		{Lo: 0x112F0, Hi: 0x112F9, Stride: 1},
		{Lo: 0x11450, Hi: 0x11459, Stride: 1},
		{Lo: 0x114D0, Hi: 0x114D9, Stride: 1},
		{Lo: 0x11650, Hi: 0x11659, Stride: 1},
		{Lo: 0x116C0, Hi: 0x116C9, Stride: 1},
		{Lo: 0x11730, Hi: 0x11739, Stride: 1},
		{Lo: 0x118E0, Hi: 0x118E9, Stride: 1},
		{Lo: 0x11950, Hi: 0x11959, Stride: 1},
		{Lo: 0x11C50, Hi: 0x11C59, Stride: 1},
		{Lo: 0x11D50, Hi: 0x11D59, Stride: 1},
		{Lo: 0x11DA0, Hi: 0x11DA9, Stride: 1},
		{Lo: 0x16A60, Hi: 0x16A69, Stride: 1},
		{Lo: 0x16AC0, Hi: 0x16AC9, Stride: 1},
		{Lo: 0x16B50, Hi: 0x16B59, Stride: 1},
		{Lo: 0x1D7CE, Hi: 0x1D7FF, Stride: 1},
		{Lo: 0x1E140, Hi: 0x1E149, Stride: 1},
		{Lo: 0x1E2F0, Hi: 0x1E2F9, Stride: 1},
		{Lo: 0x1E950, Hi: 0x1E959, Stride: 1},
		{Lo: 0x1FBF0, Hi: 0x1FBF9, Stride: 1},
	},
	LatinOffset: 1,
}

// lineIter walks s the way Python's s.split("\n") does: next returns each
// item in turn, including a final empty item when s ends with "\n" and the
// single empty item of an empty s; ok is false once all items were returned.
type lineIter struct {
	s    string
	done bool
}

func (it *lineIter) next() (string, bool) {
	if it.done {
		return "", false
	}
	i := strings.IndexByte(it.s, '\n')
	if i < 0 {
		it.done = true
		return it.s, true
	}
	line := it.s[:i]
	it.s = it.s[i+1:]
	return line, true
}

// decodeRune is utf8.DecodeRuneInString; invalid bytes give RuneError, which
// is neither a Python space nor a digit.
func decodeRune(s string) (rune, int) {
	return utf8.DecodeRuneInString(s)
}
