// Package pyjson writes JSON as Python's json module does, for tests that
// compare swebuild's output with files upstream's Python wrote. It is the
// tests' own writer, independent of the code under test.
package pyjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf16"
)

// DumpsIndent4 writes a JSON document as Python's json.dumps(obj,
// indent=4) does (ensure_ascii, key order kept, no final newline). Numbers
// are written as the input spells them: Python would re-format a float
// (1e5 as 100000.0), so inputs hold numbers as Python wrote them.
func DumpsIndent4(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out bytes.Buffer
	var write func(level int) error
	nl := func(level int) {
		out.WriteByte('\n')
		out.WriteString(strings.Repeat("    ", level))
	}
	write = func(level int) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch v := tok.(type) {
		case json.Delim:
			closer := map[json.Delim]string{'{': "}", '[': "]"}[v]
			out.WriteString(string(v))
			if !dec.More() {
				_, err := dec.Token()
				out.WriteString(closer)
				return err
			}
			first := true
			for dec.More() {
				if !first {
					out.WriteByte(',')
				}
				first = false
				nl(level + 1)
				if v == '{' {
					kt, err := dec.Token()
					if err != nil {
						return err
					}
					writeString(&out, kt.(string))
					out.WriteString(": ")
				}
				if err := write(level + 1); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			nl(level)
			out.WriteString(closer)
		case string:
			writeString(&out, v)
		case bool:
			fmt.Fprint(&out, v)
		case json.Number:
			out.WriteString(v.String())
		case nil:
			out.WriteString("null")
		}
		return nil
	}
	if err := write(0); err != nil {
		if errors.Is(err, io.EOF) {
			// Token reports a document cut short as a plain io.EOF.
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("data after the JSON document at offset %d", dec.InputOffset())
	}
	return out.Bytes(), nil
}

// writeString is json.dumps(s) with ensure_ascii=True.
func writeString(out *bytes.Buffer, s string) {
	out.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			out.WriteString(`\"`)
		case r == '\\':
			out.WriteString(`\\`)
		case r == '\n':
			out.WriteString(`\n`)
		case r == '\r':
			out.WriteString(`\r`)
		case r == '\t':
			out.WriteString(`\t`)
		case r == '\b':
			out.WriteString(`\b`)
		case r == '\f':
			out.WriteString(`\f`)
		case r < 0x20 || r > 0x7e:
			if r > 0xffff {
				a, b := utf16.EncodeRune(r)
				fmt.Fprintf(out, `\u%04x\u%04x`, a, b)
			} else {
				fmt.Fprintf(out, `\u%04x`, r)
			}
		default:
			out.WriteRune(r)
		}
	}
	out.WriteByte('"')
}
