package publish

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/swebuild/swebuild/internal/faultproxy"
	"github.com/swebuild/swebuild/internal/regtest"
)

// Two publishes of one build into one repository at once, each with its own
// ledger (issue 20 row 16: 59 of 149 blobs were uploaded twice). Both check
// each blob (HEAD) before uploading it, but started together they check
// before either has committed it, so both upload: a registry has no way to
// claim an upload, and only a shared ledger tells one run what another is
// doing. What holds: both complete, every index is whole, and a third run
// with a ledger of its own afterwards uploads no blob at all (the HEAD
// before each upload finds it).
func TestTwoPublishesWithSeparateLedgersIntoOneRepository(t *testing.T) {
	reg := regtest.Start(t, regtest.Options{})
	src := regtest.Start(t, regtest.Options{})
	px := faultproxy.Start(t, reg.Host, faultproxy.Config{Seed: 5, RateSlow: 1, SlowDelay: 20 * time.Millisecond})
	f := makeFixture(t, fixtureIDs, map[string]bool{"psf__requests-2317": true}, 16<<10, 2)
	f.stage(t, src.Host, src.Host, "staging/build")
	var wg sync.WaitGroup
	sums := make([]*Summary, 2)
	for i := range sums {
		wg.Go(func() {
			sums[i] = publishOnce(t, px.Host, "two", f, filepath.Join(t.TempDir(), "ledger.jsonl"), 4)
		})
	}
	wg.Wait()
	for i, s := range sums {
		if s == nil || s.Err() != nil {
			t.Fatalf("publish %d: %v", i, s)
		}
	}
	st := px.Stats()
	twice := 0
	for _, n := range st.CompletedUploads {
		if n > 1 {
			twice++
		}
	}
	t.Logf("%d of %d unique blobs uploaded more than once; manifest PUTs retried for an unknown reference: %d and %d; %s", twice, len(f.blobs), sums[0].RefRetries, sums[1].RefRetries, st)
	for _, p := range checkPublished(t, reg.Host, "two", f) {
		t.Error(p)
	}
	px.ResetStats()
	third := publishOnce(t, px.Host, "two", f, filepath.Join(t.TempDir(), "ledger.jsonl"), 4)
	if err := third.Err(); err != nil {
		t.Fatal(err)
	}
	st = px.Stats()
	if n := st.Requests[faultproxy.KindUploadPost] + st.Requests[faultproxy.KindUploadPut] + st.Requests[faultproxy.KindManifestPut]; n != 0 {
		t.Errorf("a third run with its own ledger made %d upload or manifest requests, want 0: %s", n, st)
	}
}
