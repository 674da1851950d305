package publish

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/core"
)

var (
	dgA = digest.Digest("sha256:" + strings.Repeat("a", 64))
	dgB = digest.Digest("sha256:" + strings.Repeat("b", 64))
)

func publishedRec(id string, p core.Platform, d digest.Digest) core.Image {
	return core.Image{Kind: core.KindInstance, InstanceID: id, Platform: p, Digest: d, Ref: "h/r@" + d.String(), SpecKey: "k", Status: core.StatusPublished}
}

func TestLedgerLastRecordWinsAndTornTailIsDropped(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ledger.jsonl")
	l, err := OpenLedger(p)
	if err != nil {
		t.Fatal(err)
	}
	must := func(r core.Image) {
		t.Helper()
		if err := l.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	must(core.Image{Kind: core.KindInstance, InstanceID: "a", Platform: core.AMD64, Digest: dgA, Status: core.StatusFailed, Error: "boom"})
	must(publishedRec("a", core.AMD64, dgA))
	must(core.Image{Kind: core.KindBlob, Ref: "h/r1@" + dgB.String(), Digest: dgB, Status: core.StatusFailed, Error: "upload started"})
	must(core.Image{Kind: core.KindBlob, Ref: "h/r2@" + dgB.String(), Digest: dgB, Status: core.StatusPublished})
	must(core.Image{Kind: core.KindBlob, Ref: "h/r1@" + dgB.String(), Digest: dgB, Status: core.StatusPublished})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A kill mid-write leaves a torn line.
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"kind":"index","instance_id":"a","sta`)
	f.Close()

	l, err = OpenLedger(p)
	if err != nil {
		t.Fatalf("reopening with a torn tail: %v", err)
	}
	r, ok := l.Lookup(core.KindInstance, "a", core.AMD64)
	if !ok || r.Status != core.StatusPublished || r.Time == "" {
		t.Errorf("last record for image a: %+v", r)
	}
	if _, ok := l.Lookup(core.KindIndex, "a", core.Platform{}); ok {
		t.Error("torn record was read")
	}
	if got := strings.Join(l.BlobRepos(dgB), ","); got != "h/r1,h/r2" {
		t.Errorf("blob repos %q", got)
	}
	if len(l.Damaged()) != 0 {
		t.Errorf("a torn tail reported as damage: %v", l.Damaged())
	}
	must(core.Image{Kind: core.KindIndex, InstanceID: "a", Digest: dgA, Ref: "h/i@" + dgA.String(), Status: core.StatusPublished})
	l.Close()
	b, _ := os.ReadFile(p)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[5], `{"kind":"index"`) {
		t.Errorf("torn tail not replaced cleanly:\n%s", b)
	}
	if n := len(l.Records()); n != 4 {
		t.Errorf("%d distinct ids, want 4", n)
	}
}

// A damaged line in the middle (the old two-writers corruption) does not
// stop the next run: it is reported with its file and line, skipped, and
// what it was about is simply not known (checked against the registry).
func TestLedgerDamagedLineIsReportedAndSkipped(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ledger.jsonl")
	good := publishedRec("a", core.AMD64, dgA)
	b, err := core.Marshal(good)
	if err != nil {
		t.Fatal(err)
	}
	data := string(b) + `{"kind":"instance","instance_id":"b","platform":"linux/amd64","digest":"` + dgB.String() + `","ref":"h/r@` + dgB.String() + `","spec_key":"k","stat{"kind":"inst` + "\n" + string(b)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := OpenLedger(p)
	if err != nil {
		t.Fatalf("a damaged line refused the ledger: %v", err)
	}
	defer l.Close()
	d := l.Damaged()
	if len(d) != 1 || d[0].Line != 2 || !strings.Contains(d[0].Error(), p+":2:") {
		t.Fatalf("damaged lines %v, want line 2", d)
	}
	if _, ok := l.Lookup(core.KindInstance, "b", core.AMD64); ok {
		t.Error("damaged record used")
	}
	if _, ok := l.Lookup(core.KindInstance, "a", core.AMD64); !ok {
		t.Error("good record lost")
	}
}

// Two writers on one ledger: the second is refused at once with an "in use"
// error instead of interleaving lines; once the first closes, it opens.
func TestLedgerSecondWriterIsRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ledger.jsonl")
	l, err := OpenLedger(p)
	if err != nil {
		t.Fatal(err)
	}
	_, err = OpenLedger(p)
	if !IsInUse(err) || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second writer: %v", err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Go(func() {
			for j := 0; j < 50; j++ {
				_ = l.Append(publishedRec("x", core.AMD64, dgA))
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := OpenLedger(p)
	if err != nil {
		t.Fatalf("after close: %v", err)
	}
	defer l2.Close()
	if len(l2.Damaged()) != 0 {
		t.Errorf("concurrent appends damaged %d lines", len(l2.Damaged()))
	}
}

// A ledger that cannot be written fails the image instead of being ignored.
func TestLedgerWriteErrorsSurface(t *testing.T) {
	l, err := OpenLedger(filepath.Join(t.TempDir(), "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	err = l.Append(publishedRec("a", core.AMD64, dgA))
	if err == nil || !strings.Contains(err.Error(), "ledger") {
		t.Errorf("append to a closed ledger: %v", err)
	}
	if errors.Is(err, core.ErrInUse) {
		t.Error("wrong error")
	}
}

// A ledger of the older format ("kind":"image", "pushed") is converted to
// core records on open, the original kept as .legacy: what it says was
// pushed is known, blob uploads are mount sources, failures are failures.
func TestOlderLedgerIsConverted(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ledger.jsonl")
	old := `{"time":"2026-01-01T00:00:00Z","kind":"blob","ref":"h/r1","digest":"` + dgB.String() + `","pushed":false}
{"time":"2026-01-01T00:00:00Z","kind":"image","instance_id":"a","platform":"linux/amd64","ref":"h/x:k-1","digest":"` + dgA.String() + `","size":42,"media_type":"application/vnd.oci.image.manifest.v1+json","spec_key":"k","pushed":true}
{"time":"2026-01-01T00:00:00Z","kind":"image","instance_id":"b","platform":"linux/arm64","ref":"h/y:k-1","digest":"` + dgB.String() + `","spec_key":"k","pushed":false,"error":"push: 500"}
{"time":"2026-01-01T00:00:00Z","kind":"index","instance_id":"a","ref":"h/i:k-2","digest":"` + dgB.String() + `","pushed":true}
{"time":"2026-01-01T00:00:00Z","kind":"image","instance_id":"c","platform":"windows/amd64","ref":"h/z:k-1","digest":"` + dgA.String() + `","spec_key":"k","pushed":true}
`
	if err := os.WriteFile(p, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := OpenLedger(p)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !l.Migrated() {
		t.Fatal("not converted")
	}
	if b, err := os.ReadFile(p + ".legacy"); err != nil || string(b) != old {
		t.Errorf("original not kept: %v", err)
	}
	if d := l.Damaged(); len(d) != 1 || d[0].Line != 5 || d[0].Field != "platform" {
		t.Errorf("damaged %v, want line 5's platform", d)
	}
	a, _ := l.Lookup(core.KindInstance, "a", core.AMD64)
	if a.Status != core.StatusPublished || a.Ref != "h/x@"+dgA.String() || a.Size != 42 || a.Tags[0] != "k-1" {
		t.Errorf("image a: %+v", a)
	}
	if b, _ := l.Lookup(core.KindInstance, "b", core.ARM64); b.Status != core.StatusFailed || b.Error != "push: 500" {
		t.Errorf("image b: %+v", b)
	}
	if i, _ := l.Lookup(core.KindIndex, "a", core.Platform{}); i.Status != core.StatusPublished || i.Digest != dgB {
		t.Errorf("index a: %+v", i)
	}
	if got := l.BlobRepos(dgB); len(got) != 1 || got[0] != "h/r1" {
		t.Errorf("blob repos %v", got)
	}
	recs, err := core.ReadFile(p)
	if err != nil || len(recs) != 4 {
		t.Errorf("the converted file reads as %d core records: %v", len(recs), err)
	}
}
