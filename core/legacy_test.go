package core

import (
	"strings"
	"testing"
)

// TestConvertLegacyLedger: a ledger of the older format ("kind":"image",
// "pushed") converts to core records, a bad line is a *LineError naming
// the file, line and field, and a torn last line is dropped. (publish's
// TestOlderLedgerIsConverted checks the in-place migration.)
func TestConvertLegacyLedger(t *testing.T) {
	old := `{"time":"2026-01-01T00:00:00Z","kind":"image","instance_id":"a","platform":"linux/amd64","ref":"h/x:k-1","digest":"` + dg + `","spec_key":"k","pushed":true}
{"time":"2026-01-01T00:00:00Z","kind":"image","instance_id":"c","platform":"windows/amd64","ref":"h/z:k-1","digest":"` + dg + `","pushed":true}
{"time":"2026-01-01T00:00:00Z","kind":"layer","ref":"h/z","digest":"` + dg + `","pushed":true}
{"time":"2026-01-01T00:00:00Z","kind":"index","instance_id":"a","ref":"h/i:k-2","digest":"` + dg + `","pushed":true}
{"time":"2026-01-01T00:00:00Z","kind":"ima`
	if !IsLegacyLedger([]byte(old)) {
		t.Fatal("IsLegacyLedger: false")
	}
	if IsLegacyLedger([]byte(`{"kind":"instance","instance_id":"a","platform":"linux/amd64","status":"failed","error":"x"}`)) {
		t.Fatal("IsLegacyLedger of core records: true")
	}
	recs, err := ConvertLegacyLedger([]byte(old), "ledger.jsonl")
	if len(recs) != 2 || recs[0].Platform != AMD64 || recs[0].Ref != "h/x@"+dg || recs[0].Tags[0] != "k-1" || recs[1].Kind != KindIndex {
		t.Errorf("records %+v", recs)
	}
	les, other := LineErrors(err)
	if other != nil {
		t.Fatal(other)
	}
	want := []string{`ledger.jsonl:2: platform: "windows/amd64" is not linux/amd64 or linux/arm64`, `ledger.jsonl:3: kind: "layer" is not image, index or blob`}
	if len(les) != len(want) {
		t.Fatalf("errors %v, want %q", err, want)
	}
	for i, le := range les {
		if !strings.Contains(le.Error(), want[i]) {
			t.Errorf("error %d: %v, want %q", i, le, want[i])
		}
	}
}
