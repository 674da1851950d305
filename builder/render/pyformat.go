package render

import (
	"fmt"
	"strings"
)

// pyFormat is the subset of Python's str.format the Dockerfile templates use:
// {name} replaced from vars, {{ and }} for literal braces. A missing name is
// an error (Python raises KeyError).
func pyFormat(tmpl string, vars func(name string) (string, bool)) (string, error) {
	var b strings.Builder
	b.Grow(len(tmpl) + 128)
	for i := 0; i < len(tmpl); {
		c := tmpl[i]
		switch {
		case c == '{' && i+1 < len(tmpl) && tmpl[i+1] == '{':
			b.WriteByte('{')
			i += 2
		case c == '}' && i+1 < len(tmpl) && tmpl[i+1] == '}':
			b.WriteByte('}')
			i += 2
		case c == '{':
			end := strings.IndexByte(tmpl[i:], '}')
			if end < 0 {
				return "", fmt.Errorf("template: unmatched '{' at byte %d", i)
			}
			name := tmpl[i+1 : i+end]
			v, ok := vars(name)
			if !ok {
				return "", fmt.Errorf("template: no value for {%s}", name)
			}
			b.WriteString(v)
			i += end + 1
		case c == '}':
			return "", fmt.Errorf("template: single '}' at byte %d", i)
		default:
			j := strings.IndexAny(tmpl[i:], "{}")
			if j < 0 {
				b.WriteString(tmpl[i:])
				i = len(tmpl)
			} else {
				b.WriteString(tmpl[i : i+j])
				i += j
			}
		}
	}
	return b.String(), nil
}
