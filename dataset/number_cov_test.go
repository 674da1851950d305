package dataset

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestNumbersAsEncodingJSON: a number in another column is accepted exactly
// when encoding/json accepts it (RFC 8259's grammar), kept as written, and a
// malformed one is an error naming the file's line.
func TestNumbersAsEncodingJSON(t *testing.T) {
	for _, lit := range []string{
		"0", "-0", "7", "-12", "1.50", "0.5", "1e5", "1E+5", "2.5e-3", "-0.0e0",
		"-", "1.", ".5", "1e", "1e+", "01", "+1", "1.e3", "--1", "0x10", "1_000",
	} {
		line := `{"instance_id":"acme__widget-1","repo":"acme/widget","base_commit":"` + strings.Repeat("a", 40) +
			`","test_patch":"t","version":"1.0","score":` + lit + `}`
		valid := json.Valid([]byte(line))
		got, err := Load(context.Background(), writeFile(t, "n.jsonl", "\n"+line+"\n"), LoadOptions{})
		switch {
		case valid && err != nil:
			t.Errorf("%s: refused a number encoding/json accepts: %v", lit, err)
		case valid && (len(got) != 1 || len(got[0].Extra) != 1 || got[0].Extra[0].Value != lit):
			t.Errorf("%s: kept as %+v, want the literal as written", lit, got)
		case !valid && err == nil:
			t.Errorf("%s: accepted a number encoding/json refuses", lit)
		case !valid && !strings.Contains(err.Error(), "n.jsonl:2"):
			t.Errorf("%s: the error does not name the line (n.jsonl:2): %v", lit, err)
		}
	}
}

// TestValidationErrorRecords: a record missing four fields is four problems
// and one invalid record; a second bad record makes two.
func TestValidationErrorRecords(t *testing.T) {
	good := `{"instance_id":"acme__widget-1","repo":"acme/widget","base_commit":"` + strings.Repeat("a", 40) + `","test_patch":"t","version":"1.0"}`
	content := good + "\n" + `{"instance_id":"acme__widget-2"}` + "\n" + `{"instance_id":"acme__widget-3","repo":"acme/widget","base_commit":"` + strings.Repeat("a", 40) + `","test_patch":"t"}` + "\n"
	_, err := Load(context.Background(), writeFile(t, "v.jsonl", content), LoadOptions{})
	var verr *ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("want a ValidationError, got %v", err)
	}
	if len(verr.Problems) != 5 || verr.Records() != 2 {
		t.Errorf("%d problems of %d records, want 5 of 2:\n%v", len(verr.Problems), verr.Records(), verr)
	}
}
