// Package reportfmt is what the reports (sizes, drift) share about their
// output formats: choosing a format by name, and their JSON encoding.
package reportfmt

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Format is one output format of a report of type R: its name (a flag's
// value) and how it writes a report.
type Format[R any] struct {
	Name  string
	Write func(w io.Writer, r R) error
}

// Names lists the names of formats, in their order.
func Names[R any](formats []Format[R]) []string {
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = f.Name
	}
	return names
}

// Write writes r in the format of formats called name; an unknown name is
// an error listing them.
func Write[R any](w io.Writer, r R, name string, formats []Format[R]) error {
	for _, f := range formats {
		if f.Name == name {
			return f.Write(w, r)
		}
	}
	return fmt.Errorf("unknown format %q (want one of %s)", name, strings.Join(Names(formats), ", "))
}

// JSON writes v as JSON indented by two spaces, with a newline at the end.
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("writing JSON report: %w", err)
	}
	return nil
}
