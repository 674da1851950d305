package reportfmt

import (
	"bytes"
	"io"
	"testing"
)

func TestWrite(t *testing.T) {
	formats := []Format[string]{
		{"md", func(w io.Writer, r string) error { _, err := io.WriteString(w, "# "+r); return err }},
		{"json", func(w io.Writer, r string) error { return JSON(w, map[string]string{"r": r}) }},
	}
	for _, tc := range []struct{ format, want, err string }{
		{"md", "# x", ""},
		{"json", "{\n  \"r\": \"x\"\n}\n", ""},
		{"yaml", "", `unknown format "yaml" (want one of md, json)`},
	} {
		var buf bytes.Buffer
		err := Write(&buf, "x", tc.format, formats)
		if got := errString(err); got != tc.err || buf.String() != tc.want {
			t.Errorf("%s: wrote %q, error %q; want %q, %q", tc.format, buf.String(), got, tc.want, tc.err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
