package pins

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// FileSchema names the shape of a pins file; a new shape gets a new name.
const FileSchema = "swebuild.pins/v1"

// MaxFileBytes bounds a pins file (a nightly's proposal is a few KiB).
const MaxFileBytes = 4 << 20

// File is a pins file: hold rules written by a nightly's repair (its
// proposal) or by hand, selected with --pins default,FILE.
type File struct {
	Schema string     `json:"schema"`
	Rules  []FileRule `json:"rules"`
}

// FileRule is one rule of a pins file: the hold (HoldSpec: id, repo,
// version, packages, reason, evidence as text for `swebuild pins list`)
// and, when it came from a nightly's repair, the machine-readable record
// of how it was found (package repair's Evidence), kept as written.
type FileRule struct {
	HoldSpec
	Record json.RawMessage `json:"record,omitempty"`
}

// Encode is the file as written: indented JSON and a newline. The same
// file gives the same bytes.
func (f File) Encode() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(f); err != nil {
		return nil, fmt.Errorf("encoding pins file: %w", err)
	}
	return b.Bytes(), nil
}

// PinRules returns the file's rules (HoldRule of each), in file order, after
// checking the file: its schema, every rule (the error names the field,
// rules[i].hold[j].version) and no id twice.
func (f File) PinRules() ([]Rule, error) {
	if f.Schema != FileSchema {
		return nil, fmt.Errorf("schema: %q, want %q", f.Schema, FileSchema)
	}
	if len(f.Rules) == 0 {
		return nil, errors.New("rules: none")
	}
	var out []Rule
	seen := map[string]int{}
	for i, fr := range f.Rules {
		if j, dup := seen[fr.ID]; dup {
			return nil, &ruleError{i, fmt.Errorf(".id: %q is also rules[%d]'s", fr.ID, j)}
		}
		seen[fr.ID] = i
		r, err := HoldRule(fr.HoldSpec)
		if err != nil {
			return nil, &ruleError{i, fmt.Errorf(".%w", errors.Unwrap(err))}
		}
		out = append(out, r)
	}
	return out, nil
}

// DecodeFile decodes a pins file strictly (unknown fields are errors); a
// syntax error names its line and column.
func DecodeFile(raw []byte) (File, error) {
	var f File
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			line, col := lineCol(raw, se.Offset)
			return f, fmt.Errorf("line %d, column %d: %v", line, col, err)
		case errors.As(err, &te):
			line, col := lineCol(raw, te.Offset)
			field := strings.ReplaceAll(te.Field, "HoldSpec.", "")
			return f, fmt.Errorf("line %d, column %d: %s: a JSON %s where a %s goes", line, col, field, te.Value, te.Type)
		}
		return f, err
	}
	if dec.More() {
		return f, errors.New("more than one JSON value")
	}
	return f, nil
}

func lineCol(raw []byte, off int64) (int, int) {
	if off > int64(len(raw)) {
		off = int64(len(raw))
	}
	before := raw[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// ReadFile reads and checks the pins file at path: at most MaxFileBytes,
// decoded strictly, every rule checked. Errors name the file.
func ReadFile(path string) (File, []Rule, error) {
	fh, err := os.Open(path)
	if err != nil {
		return File{}, nil, fmt.Errorf("pins file: %w", err)
	}
	defer fh.Close()
	if st, err := fh.Stat(); err != nil || !st.Mode().IsRegular() {
		return File{}, nil, fmt.Errorf("pins file %s: not a regular file", path)
	}
	raw, err := io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
	if err != nil {
		return File{}, nil, fmt.Errorf("pins file %s: %w", path, err)
	}
	if len(raw) > MaxFileBytes {
		return File{}, nil, fmt.Errorf("pins file %s: over %d bytes", path, MaxFileBytes)
	}
	f, err := DecodeFile(raw)
	if err != nil {
		return f, nil, fmt.Errorf("pins file %s: %w", path, err)
	}
	rules, err := f.PinRules()
	if err != nil {
		var re *ruleError
		if errors.As(err, &re) {
			if lines := ruleLines(raw); re.index < len(lines) {
				return f, nil, fmt.Errorf("pins file %s: line %d: %w", path, lines[re.index], err)
			}
		}
		return f, nil, fmt.Errorf("pins file %s: %w", path, err)
	}
	return f, rules, nil
}

// ruleError is a problem of rule index of a file.
type ruleError struct {
	index int
	err   error
}

func (e *ruleError) Error() string { return fmt.Sprintf("rules[%d]%v", e.index, e.err) }
func (e *ruleError) Unwrap() error { return e.err }

// ruleLines returns the line each element of the top-level "rules" array
// starts on.
func ruleLines(raw []byte) []int {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil
		}
		if k != "rules" {
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return nil
			}
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return nil
		}
		var lines []int
		for dec.More() {
			off := dec.InputOffset()
			for off < int64(len(raw)) && strings.ContainsRune(" \t\r\n,", rune(raw[off])) {
				off++
			}
			line, _ := lineCol(raw, off)
			lines = append(lines, line)
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return lines
			}
		}
		return lines
	}
	return nil
}

// isFileItem reports whether a --pins item names a pins file rather than a
// rule id: a path (with a slash) or a name ending in .json.
func isFileItem(item string) bool {
	return strings.ContainsRune(item, '/') || strings.HasSuffix(item, ".json")
}
