package publish

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/swebuild/swebuild/internal/faultproxy"
	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/registry"
)

// readIDs reads an id list from ../shared/swebench-reference (or
// $SWEBUILD_SHARED); missing data fails under CI and skips otherwise.
func readIDs(tb testing.TB, file string) []string {
	tb.Helper()
	dir := os.Getenv("SWEBUILD_SHARED")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "swebench-reference")
	}
	f, err := os.Open(filepath.Join(dir, file))
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("shared reference data: %v", err)
		}
		tb.Skipf("shared reference data: %v", err)
	}
	defer f.Close()
	var ids []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			ids = append(ids, s)
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return ids
}

// BenchmarkNoopRerun2294x2 publishes the 2,294 SWE-bench test ids x 2
// platforms as tiny images once (setup, not timed), then times a re-run
// with the ledger: one HEAD per ref (4,588 per-arch images + 2,294 indexes),
// nothing uploaded. Target: <= 10 s per op against the local registry.
// The proxy (no faults) only counts requests.
func BenchmarkNoopRerun2294x2(b *testing.B) {
	ids := readIDs(b, "SWE-bench_test.instance_ids.txt")
	if len(ids) != 2294 {
		b.Fatalf("%d ids, want 2294", len(ids))
	}
	reg := regtest.Start(b, regtest.Options{})
	px := faultproxy.Start(b, reg.Host, faultproxy.Config{})
	f := makeFixture(b, ids, nil, 512, 0)
	ledgerPath := filepath.Join(b.TempDir(), "ledger.jsonl")

	publish := func(repo string, jobs, conc int) *Summary {
		led, err := OpenLedger(ledgerPath)
		if err != nil {
			b.Fatal(err)
		}
		defer led.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		c, err := registry.New(registry.Options{MaxRPS: -1, Concurrency: conc, Keychain: regtest.Anonymous()})
		if err != nil {
			b.Fatal(err)
		}
		sum, err := Publish(ctx, f.recs(), Options{Repo: repo, Client: c, Ledger: led, Jobs: jobs, Version: "bench", Progress: io.Discard})
		if err != nil {
			b.Fatal(err)
		}
		if err := sum.Err(); err != nil {
			b.Fatalf("%v\n%s", err, sum)
		}
		return sum
	}
	// Setup straight to the registry, wider: same repository names, the
	// proxy only sits in front of the timed re-runs.
	start := time.Now()
	sum := publish(reg.Host+"/bench", 16, 16)
	b.Logf("setup: published %d images and %d indexes in %s (%s)", sum.ImagesPushed, sum.IndexesPushed, time.Since(start).Round(time.Millisecond), px.Stats())
	refs := len(f.built) + len(ids)

	var reqs int
	for b.Loop() { // setup above runs once, whatever -benchtime says
		px.ResetStats()
		// What `swebuild publish` uses for a loopback registry: no rate
		// limit, 8 requests in flight, 8 instances at once.
		sum := publish(px.Host+"/bench", 8, registry.DefaultConcurrency)
		if sum.ImagesSkipped != len(f.built) || sum.IndexesSkipped != len(ids) {
			b.Fatalf("not a no-op: %+v", sum)
		}
		st := px.Stats()
		reqs = st.Total()
		if st.Requests[faultproxy.KindManifestHead] != refs || reqs > refs+1 {
			b.Fatalf("%d refs, requests %s", refs, st)
		}
	}
	b.ReportMetric(float64(reqs), "requests/op")
	b.ReportMetric(float64(refs), "refs/op")
}
