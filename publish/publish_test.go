package publish

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/swebuild/swebuild/internal/faultproxy"
	"github.com/swebuild/swebuild/internal/regtest"
)

type anonKeychain struct{}

func (anonKeychain) Resolve(authn.Resource) (authn.Authenticator, error) { return authn.Anonymous, nil }

func publishOnce(t *testing.T, host, prefix string, f *fixture, ledgerPath string, jobs int, mods ...func(*Options)) *Summary {
	t.Helper()
	led, err := OpenLedger(ledgerPath)
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	opts := Options{Repo: host + "/" + prefix, Client: testClient(t, -1), Ledger: led, Jobs: jobs, Version: "test", Progress: &progress}
	for _, m := range mods {
		m(&opts)
	}
	sum, err := Publish(ctx, f.recs, opts)
	if err != nil {
		t.Fatalf("publish: %v\n%s", err, progress.String())
	}
	if sum.Err() != nil {
		t.Logf("progress:\n%s", progress.String())
	}
	return sum
}

var fixtureIDs = []string{"astropy__astropy-12907", "django__django-11099", "psf__requests-2317", "sympy__sympy-20590", "pylint-dev__pylint-4661", "sphinx-doc__sphinx-8721"}

// Faults at 20% of requests (429 + Retry-After, 500, 502, 503, resets
// mid-body, slow responses), repeated runs with different seeds: every run
// completes, every index is complete and lists exactly the built digests.
func TestPublishUnderFaultsCompletesWithNoPartialIndex(t *testing.T) {
	needSkopeo(t)
	reg := regtest.Start(t, regtest.Options{})
	px := faultproxy.Start(t, reg.Host, faultproxy.Config{})
	f := makeFixture(t, fixtureIDs, map[string]bool{"psf__requests-2317": true}, 4096, 2)
	for run := 0; run < 3; run++ {
		cfg := faultproxy.Uniform(int64(100+run), 0.20)
		cfg.SlowDelay = 50 * time.Millisecond
		px.SetConfig(cfg)
		px.ResetStats()
		prefix := fmt.Sprintf("faults%d", run)
		sum := publishOnce(t, px.Host, prefix, f, filepath.Join(t.TempDir(), "ledger.jsonl"), 4)
		st := px.Stats()
		t.Logf("run %d: %s", run, st)
		if err := sum.Err(); err != nil {
			t.Fatalf("run %d: %v\n%s", run, err, sum)
		}
		if sum.IndexesPushed != len(fixtureIDs) || sum.ImagesPushed != len(f.recs) {
			t.Errorf("run %d: summary %+v", run, sum)
		}
		faults := 0
		for _, n := range st.Faults {
			faults += n
		}
		if faults == 0 {
			t.Errorf("run %d: no faults injected; the test proves nothing", run)
		}
		for _, p := range checkPublished(t, reg.Host, prefix, f) {
			t.Errorf("run %d: %s", run, p)
		}
	}
}

// With 20% faults, ten publishes of one two-platform image all complete
// (skopeo --retry-times 5 managed 0/10 and crane 6/10 in the issue).
func TestTenRunsAt20PercentFaultsAllComplete(t *testing.T) {
	needSkopeo(t)
	reg := regtest.Start(t, regtest.Options{})
	px := faultproxy.Start(t, reg.Host, faultproxy.Config{})
	f := makeFixture(t, []string{"django__django-11099"}, nil, 64<<10, 2)
	for run := 0; run < 10; run++ {
		cfg := faultproxy.Uniform(int64(run+1), 0.20)
		cfg.SlowDelay = 50 * time.Millisecond
		px.SetConfig(cfg)
		prefix := fmt.Sprintf("ten%d", run)
		sum := publishOnce(t, px.Host, prefix, f, filepath.Join(t.TempDir(), "ledger.jsonl"), 1)
		if err := sum.Err(); err != nil {
			t.Errorf("run %d: %v\n%s", run, err, sum)
			continue
		}
		for _, p := range checkPublished(t, reg.Host, prefix, f) {
			t.Errorf("run %d: %s", run, p)
		}
	}
	t.Logf("proxy: %s", px.Stats())
}

// Without faults: the bytes uploaded equal the unique blob bytes (the shared
// base layers go up once and are mounted everywhere else), and a re-run with
// the ledger makes exactly one HEAD per ref (per-arch image and index) and
// nothing else.
func TestBytesUploadedEqualUniqueBlobsAndNoopRerun(t *testing.T) {
	reg := regtest.Start(t, regtest.Options{})
	px := faultproxy.Start(t, reg.Host, faultproxy.Config{})
	f := makeFixture(t, fixtureIDs, map[string]bool{"psf__requests-2317": true}, 32<<10, 2)
	ledger := filepath.Join(t.TempDir(), "ledger.jsonl")
	sum := publishOnce(t, px.Host, "bytes", f, ledger, 4)
	if err := sum.Err(); err != nil {
		t.Fatalf("%v\n%s", err, sum)
	}
	st := px.Stats()
	if st.UploadBodyBytes != f.uniqueBlobBytes() {
		t.Errorf("uploaded %d body bytes, unique blob bytes are %d (%d blobs)", st.UploadBodyBytes, f.uniqueBlobBytes(), len(f.blobs))
	}
	for d, n := range st.CompletedUploads {
		if n != 1 {
			t.Errorf("blob %s uploaded %d times", d, n)
		}
	}
	if len(st.CompletedUploads) != len(f.blobs) {
		t.Errorf("%d blobs uploaded, %d unique", len(st.CompletedUploads), len(f.blobs))
	}
	t.Logf("first run: %s", st)

	px.ResetStats()
	sum = publishOnce(t, px.Host, "bytes", f, ledger, 4)
	if sum.Err() != nil || sum.ImagesSkipped != len(f.recs) || sum.IndexesSkipped != len(fixtureIDs) || sum.ImagesPushed+sum.IndexesPushed != 0 {
		t.Fatalf("no-op re-run did work: %+v", sum)
	}
	st = px.Stats()
	refs := len(f.recs) + len(fixtureIDs)
	// One /v2/ ping for the registry, then one HEAD per ref.
	if st.Requests[faultproxy.KindManifestHead] != refs || st.Total() != refs+1 {
		t.Errorf("no-op re-run: %d refs, requests %s", refs, st)
	}

	// Trusting the ledger: zero requests.
	px.ResetStats()
	sum = publishOnce(t, px.Host, "bytes", f, ledger, 4, func(o *Options) { o.TrustLedger = true })
	if sum.Err() != nil || sum.ImagesSkipped != len(f.recs) || sum.IndexesSkipped != len(fixtureIDs) {
		t.Fatalf("trusted re-run: %+v", sum)
	}
	if n := px.Stats().Total(); n != 0 {
		t.Errorf("trusted re-run made %d requests", n)
	}

	// Without the ledger: still one HEAD per ref, nothing uploaded.
	px.ResetStats()
	sum = publishOnce(t, px.Host, "bytes", f, filepath.Join(t.TempDir(), "fresh.jsonl"), 4)
	st = px.Stats()
	if sum.Err() != nil || sum.ImagesPushed+sum.IndexesPushed != 0 || st.Total() != refs+1 {
		t.Errorf("re-run without ledger: %+v, requests %s", sum, st)
	}
}

// A changed spec key gets a new content tag: the image is re-tagged (blobs
// already present are not sent again) and the index is rewritten.
func TestChangedSpecKeyGetsNewTag(t *testing.T) {
	reg := regtest.Start(t, regtest.Options{})
	px := faultproxy.Start(t, reg.Host, faultproxy.Config{})
	f := makeFixture(t, []string{"django__django-11099"}, nil, 8<<10, 1)
	ledger := filepath.Join(t.TempDir(), "ledger.jsonl")
	if sum := publishOnce(t, px.Host, "spec", f, ledger, 1); sum.Err() != nil {
		t.Fatal(sum)
	}
	px.ResetStats()
	f.recs[0].SpecKey += "-pinned"
	sum := publishOnce(t, px.Host, "spec", f, ledger, 1)
	if sum.Err() != nil || sum.ImagesPushed != 1 || sum.ImagesSkipped != 1 || sum.IndexesPushed != 1 {
		t.Fatalf("summary after spec change: %+v", sum)
	}
	if st := px.Stats(); st.UploadBodyBytes != 0 {
		t.Errorf("re-tag uploaded %d bytes", st.UploadBodyBytes)
	}
	led, err := OpenLedger(ledger)
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	rec, _ := led.Lookup(KindImage, "django__django-11099", f.recs[0].Platform.String())
	if !strings.Contains(rec.Ref, ":k-") || rec.SpecKey != f.recs[0].SpecKey {
		t.Errorf("ledger record %+v", rec)
	}
}
