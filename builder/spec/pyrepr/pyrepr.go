// Package pyrepr writes Python 3's repr() of strings and lists of strings,
// byte for byte: upstream SWE-bench hashes str(list) and str(dict) for its
// image keys.
package pyrepr

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// AppendString appends Python 3's repr(str) of s: single quotes unless s
// contains ' and no ", backslash escapes for \\ \n \r \t and the quote,
// \xNN / \uNNNN / \UNNNNNNNN for non-printable characters, printable
// non-ASCII kept as is.
func AppendString(b *strings.Builder, s string) {
	quote := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		quote = '"'
	}
	b.WriteByte(quote)
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c < 0x7f && c != '\\' && c != quote {
				i++
				continue
			}
			b.WriteString(s[start:i])
			switch c {
			case '\\':
				b.WriteString(`\\`)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			case quote:
				b.WriteByte('\\')
				b.WriteByte(c)
			default:
				b.WriteString(`\x`)
				b.WriteByte(hexDigits[c>>4])
				b.WriteByte(hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r != utf8.RuneError && unicode.IsPrint(r) {
			i += size
			continue
		}
		b.WriteString(s[start:i])
		switch {
		case r == utf8.RuneError && size == 1:
			// Not valid UTF-8; Python strings cannot hold this. Escape the byte.
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[s[i]>>4])
			b.WriteByte(hexDigits[s[i]&0xf])
		case r < 0x100:
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[r>>4])
			b.WriteByte(hexDigits[r&0xf])
		case r < 0x10000:
			b.WriteString(`\u`)
			for shift := 12; shift >= 0; shift -= 4 {
				b.WriteByte(hexDigits[(r>>uint(shift))&0xf])
			}
		default:
			b.WriteString(`\U`)
			for shift := 28; shift >= 0; shift -= 4 {
				b.WriteByte(hexDigits[(r>>uint(shift))&0xf])
			}
		}
		i += size
		start = i
	}
	b.WriteString(s[start:])
	b.WriteByte(quote)
}

// ListRepr is Python's str(list_of_str): "['a', \"b'c\"]".
func ListRepr(items []string) string {
	n := 2
	for _, s := range items {
		n += len(s) + 4
	}
	var b strings.Builder
	b.Grow(n + n/16)
	b.WriteByte('[')
	for i, s := range items {
		if i > 0 {
			b.WriteString(", ")
		}
		AppendString(&b, s)
	}
	b.WriteByte(']')
	return b.String()
}
