package publish

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLedgerLastRecordWinsAndTornTailIsDropped(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ledger.jsonl")
	l, err := OpenLedger(p)
	if err != nil {
		t.Fatal(err)
	}
	must := func(r Record) {
		t.Helper()
		if err := l.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	must(Record{Kind: KindImage, InstanceID: "a", Platform: "linux/amd64", Digest: "sha256:1", Error: "boom"})
	must(Record{Kind: KindImage, InstanceID: "a", Platform: "linux/amd64", Digest: "sha256:1", Pushed: true})
	must(Record{Kind: KindBlob, Ref: "h/r1", Digest: "sha256:b"})
	must(Record{Kind: KindBlob, Ref: "h/r2", Digest: "sha256:b", Pushed: true})
	must(Record{Kind: KindBlob, Ref: "h/r1", Digest: "sha256:b", Pushed: true})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A kill mid-write leaves a torn line.
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"kind":"index","instance_id":"a","pus`)
	f.Close()

	l, err = OpenLedger(p)
	if err != nil {
		t.Fatalf("reopening with torn tail: %v", err)
	}
	r, ok := l.Lookup(KindImage, "a", "linux/amd64")
	if !ok || !r.Pushed || r.Error != "" {
		t.Errorf("last record for image a: %+v", r)
	}
	if _, ok := l.Lookup(KindIndex, "a", ""); ok {
		t.Error("torn record was read")
	}
	if got := strings.Join(l.BlobRepos("sha256:b"), ","); got != "h/r1,h/r2" {
		t.Errorf("blob repos %q", got)
	}
	must(Record{Kind: KindIndex, InstanceID: "a", Digest: "sha256:i", Pushed: true})
	l.Close()
	b, _ := os.ReadFile(p)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[5], `{"time":`) {
		t.Errorf("torn tail not replaced cleanly:\n%s", b)
	}
	if n := len(l.Records()); n != 4 {
		t.Errorf("%d distinct keys, want 4", n)
	}
}

func TestLedgerCorruptMiddleLineIsAnError(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ledger.jsonl")
	os.WriteFile(p, []byte("{\"kind\":\"image\"}\nnot json\n{\"kind\":\"image\"}\n"), 0o644)
	if _, err := OpenLedger(p); err == nil || !strings.Contains(err.Error(), p+":2:") {
		t.Errorf("corrupt ledger: %v", err)
	}
}
