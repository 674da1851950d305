package hub_test

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/swebuild/swebuild/dataset/hub"
	"github.com/swebuild/swebuild/dataset/hub/hubtest"
	"github.com/swebuild/swebuild/retry"
)

// liteDev is the real parquet file of SWE-bench_Lite's dev split.
func liteDev(t *testing.T) []byte {
	t.Helper()
	dir, _ := os.Getwd()
	for !fileExists(filepath.Join(dir, "go.mod")) {
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found")
		}
		dir = parent
	}
	p := filepath.Join(dir, "..", "shared", "swebench-reference", "datasets", "SWE-bench_Lite", "dev.parquet")
	b, err := os.ReadFile(p)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("reference data missing under CI: %v", err)
		}
		t.Skipf("reference data not available: %v", err)
	}
	return b
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

const devPath = "data/dev-00000-of-00001.parquet"

// liteHub serves SWE-bench/SWE-bench_Lite as the hub does: README.md with
// the card's configs, and the dev split as parquet.
func liteHub(t *testing.T) (*hubtest.Server, string, []byte) {
	s := hubtest.New(t)
	dev := liteDev(t)
	sha := s.Commit("SWE-bench/SWE-bench_Lite", "main", map[string][]byte{
		"README.md":      []byte("---\nconfigs: ...\n---\n"),
		".gitattributes": []byte("*.parquet filter=lfs diff=lfs merge=lfs -text\n"),
		devPath:          dev,
	}, hubtest.Card(map[string]string{"dev": "data/dev-*"}))
	return s, sha, dev
}

func newClient(t *testing.T, s *hubtest.Server, dir string, opts hub.Options) *hub.Client {
	t.Helper()
	opts.Endpoint = s.URL
	opts.CacheDir = dir
	if opts.Budget.MinBackoff == 0 {
		opts.Budget.MinBackoff, opts.Budget.MaxBackoff = time.Millisecond, 2*time.Millisecond
	}
	c, err := hub.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ref(t *testing.T, s string) hub.Ref {
	t.Helper()
	r, err := hub.ParseRef(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestFetchThenCacheThenOffline: the first fetch asks the hub (the revision,
// then the file through the CDN redirect); a second client on the same cache
// and an offline one make no request and give the same pinned snapshot.
func TestFetchThenCacheThenOffline(t *testing.T) {
	s, sha, dev := liteHub(t)
	dir := t.TempDir()
	ctx := context.Background()
	snap, err := newClient(t, s, dir, hub.Options{}).Fetch(ctx, ref(t, "SWE-bench/SWE-bench_Lite:dev"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := snap.String(), "SWE-bench/SWE-bench_Lite@"+sha+":dev"; got != want {
		t.Errorf("snapshot %s, want %s", got, want)
	}
	if len(snap.Files) != 1 || snap.Files[0].Path != devPath {
		t.Fatalf("files %+v", snap.Files)
	}
	if b, _ := os.ReadFile(snap.Files[0].Local); !bytes.Equal(b, dev) {
		t.Errorf("cached file differs from the served one")
	}
	if got := snap.URI(snap.Files[0]); got != "hf://datasets/SWE-bench/SWE-bench_Lite@"+sha+"/"+devPath {
		t.Errorf("URI %s", got)
	}
	// revision, resolve (302), CDN
	if n := s.Requests(); n != 3 {
		t.Errorf("first fetch: %d requests, want 3", n)
	}
	for _, opts := range []hub.Options{{}, {Offline: true}} {
		c := newClient(t, s, dir, opts)
		again, err := c.Fetch(ctx, ref(t, "SWE-bench/SWE-bench_Lite:dev"))
		if err != nil {
			t.Fatalf("offline=%v: %v", opts.Offline, err)
		}
		if again.String() != snap.String() || again.Files[0].Local != snap.Files[0].Local {
			t.Errorf("offline=%v: %s %s, want %s", opts.Offline, again, again.Files[0].Local, snap)
		}
		if c.Requests() != 0 || s.Requests() != 3 {
			t.Errorf("offline=%v: client made %d requests, server saw %d in all", opts.Offline, c.Requests(), s.Requests())
		}
	}
	if s.CDNAuthorized() != 0 {
		t.Errorf("the CDN got a token")
	}
	// Offline with an empty cache: an error naming what is missing.
	_, err = newClient(t, s, t.TempDir(), hub.Options{Offline: true}).Fetch(ctx, ref(t, "SWE-bench/SWE-bench_Lite:dev"))
	if !errors.Is(err, hub.ErrOffline) || !strings.Contains(err.Error(), "dataset SWE-bench/SWE-bench_Lite revision main is not in the cache") {
		t.Errorf("offline, empty cache: %v", err)
	}
}

// TestBranchTTL: a branch is trusted for RefTTL, then asked again; a commit
// is never asked again; a moved branch brings the new commit's files.
func TestBranchTTL(t *testing.T) {
	s, sha, _ := liteHub(t)
	dir := t.TempDir()
	ctx := context.Background()
	now := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	c := newClient(t, s, dir, hub.Options{RefTTL: time.Hour, Now: clock})
	if _, err := c.Fetch(ctx, ref(t, "SWE-bench/SWE-bench_Lite:dev")); err != nil {
		t.Fatal(err)
	}
	now = now.Add(59 * time.Minute)
	c.Fetch(ctx, ref(t, "SWE-bench/SWE-bench_Lite:dev"))
	if n := s.Requests(); n != 3 {
		t.Errorf("within the TTL: %d requests, want 3", n)
	}
	now = now.Add(2 * time.Minute)
	snap, err := c.Fetch(ctx, ref(t, "SWE-bench/SWE-bench_Lite:dev"))
	if err != nil || snap.Revision != sha {
		t.Fatalf("after the TTL: %v %v", snap, err)
	}
	if n := s.Requests(); n != 4 {
		t.Errorf("after the TTL: %d requests, want 4 (the revision only)", n)
	}
	// A pinned commit: no request, whatever the time.
	now = now.Add(100 * time.Hour)
	if _, err := c.Fetch(ctx, ref(t, "SWE-bench/SWE-bench_Lite@"+sha+":dev")); err != nil {
		t.Fatal(err)
	}
	if n := s.Requests(); n != 4 {
		t.Errorf("pinned commit: %d requests, want 4", n)
	}
	// The branch moves.
	dev2 := append(liteDev(t), []byte{}...)
	sha2 := s.Commit("SWE-bench/SWE-bench_Lite", "main", map[string][]byte{"data/dev-00000-of-00002.parquet": dev2, "data/dev-00001-of-00002.parquet": dev2}, nil)
	snap, err = c.Fetch(ctx, ref(t, "SWE-bench/SWE-bench_Lite:dev"))
	if err != nil || snap.Revision != sha2 || len(snap.Files) != 2 {
		t.Fatalf("moved branch: %v %v", snap, err)
	}
}

func TestHubErrors(t *testing.T) {
	s, sha, _ := liteHub(t)
	ctx := context.Background()
	for _, tc := range []struct {
		ref  string
		is   error
		want string
	}{
		{"SWE-bench/SWE-bench_Nope", hub.ErrRepoNotFound, "dataset SWE-bench/SWE-bench_Nope not found on " + s.URL + " (a private or gated dataset needs a token)"},
		{"SWE-bench/SWE-bench_Lite@v9:dev", hub.ErrRevisionNotFound, `dataset SWE-bench/SWE-bench_Lite has no revision "v9"`},
		{"SWE-bench/SWE-bench_Lite:nope", hub.ErrNoSplit, "dataset SWE-bench/SWE-bench_Lite@" + sha + `: no such split "nope"; its splits: dev`},
		{"SWE-bench/SWE-bench_Lite", hub.ErrNoSplit, `no such split "test"; its splits: dev`},
	} {
		_, err := newClient(t, s, t.TempDir(), hub.Options{}).Fetch(ctx, ref(t, tc.ref))
		if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.ref, err, tc.want)
		}
	}
	// 401 with a token that has no access: worded differently.
	_, err := newClient(t, s, t.TempDir(), hub.Options{Token: "hf_x"}).Fetch(ctx, ref(t, "SWE-bench/SWE-bench_Nope"))
	if !errors.Is(err, hub.ErrRepoNotFound) || !strings.Contains(err.Error(), "the token sent has no access") {
		t.Errorf("with a token: %v", err)
	}
}

// TestTruncatedDownload: a body cut short is retried; when every attempt is
// cut short, the error says how much came, and nothing is left in the cache.
func TestTruncatedDownload(t *testing.T) {
	s, _, dev := liteHub(t)
	ctx := context.Background()
	obj := hubtest.ObjectPath(dev)
	s.SetFault(obj, hubtest.Fault{Truncate: 1})
	snap, err := newClient(t, s, t.TempDir(), hub.Options{}).Fetch(ctx, ref(t, "SWE-bench/SWE-bench_Lite:dev"))
	if err != nil {
		t.Fatalf("one truncated answer: %v", err)
	}
	if b, _ := os.ReadFile(snap.Files[0].Local); !bytes.Equal(b, dev) {
		t.Error("retried download differs")
	}
	if n := s.RequestsTo(obj); n != 2 {
		t.Errorf("%d CDN requests, want 2", n)
	}

	s.SetFault(obj, hubtest.Fault{Truncate: 100})
	dir := t.TempDir()
	_, err = newClient(t, s, dir, hub.Options{Budget: retry.Budget{Attempts: 3}}).Fetch(ctx, ref(t, "SWE-bench/SWE-bench_Lite:dev"))
	want := "data/dev-00000-of-00001.parquet: downloading: truncated: 65133 of 130267 bytes (unexpected EOF), after 3 attempts"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("always truncated: %v, want %q", err, want)
	}
	var leftovers []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(p, "files") {
			leftovers = append(leftovers, p)
		}
		return nil
	})
	if len(leftovers) != 0 {
		t.Errorf("left in the cache: %v", leftovers)
	}
}

func TestRetriesAndStalls(t *testing.T) {
	s, _, dev := liteHub(t)
	ctx := context.Background()
	info := "/api/datasets/SWE-bench/SWE-bench_Lite/revision/main"
	s.SetFault(info, hubtest.Fault{Unavailable: 2})
	if _, err := newClient(t, s, t.TempDir(), hub.Options{}).Fetch(ctx, ref(t, "SWE-bench/SWE-bench_Lite:dev")); err != nil {
		t.Fatalf("two 503s: %v", err)
	}
	if n := s.RequestsTo(info); n != 3 {
		t.Errorf("%d revision requests, want 3", n)
	}
	s.SetFault(info, hubtest.Fault{Unavailable: 10})
	_, err := newClient(t, s, t.TempDir(), hub.Options{Budget: retry.Budget{Attempts: 2}}).Fetch(ctx, ref(t, "SWE-bench/SWE-bench_Lite:dev"))
	if err == nil || !strings.Contains(err.Error(), "503 Service Unavailable after 2 attempts") {
		t.Errorf("503s: %v", err)
	}
	s.SetFault(info, hubtest.Fault{})
	s.SetFault(hubtest.ObjectPath(dev), hubtest.Fault{Stall: 300 * time.Millisecond})
	_, err = newClient(t, s, t.TempDir(), hub.Options{Budget: retry.Budget{Attempts: 2}, StallTimeout: 50 * time.Millisecond}).Fetch(ctx, ref(t, "SWE-bench/SWE-bench_Lite:dev"))
	if err == nil || !strings.Contains(err.Error(), "no data for too long") || !strings.Contains(err.Error(), "after 2 attempts") {
		t.Errorf("stalled body: %v", err)
	}
	// A stall shorter than the limit is fine.
	if _, err := newClient(t, s, t.TempDir(), hub.Options{}).Fetch(ctx, ref(t, "SWE-bench/SWE-bench_Lite:dev")); err != nil {
		t.Errorf("short stall: %v", err)
	}
}

// TestToken: a private dataset needs the token; it is sent to the hub and
// not to the CDN the download is redirected to.
func TestToken(t *testing.T) {
	s, _, _ := liteHub(t)
	s.Token = "hf_secret"
	ctx := context.Background()
	if _, err := newClient(t, s, t.TempDir(), hub.Options{}).Fetch(ctx, ref(t, "SWE-bench/SWE-bench_Lite:dev")); !errors.Is(err, hub.ErrRepoNotFound) {
		t.Errorf("without a token: %v", err)
	}
	if _, err := newClient(t, s, t.TempDir(), hub.Options{Token: "hf_secret"}).Fetch(ctx, ref(t, "SWE-bench/SWE-bench_Lite:dev")); err != nil {
		t.Errorf("with the token: %v", err)
	}
	if n := s.CDNAuthorized(); n != 0 {
		t.Errorf("%d CDN requests carried the token", n)
	}
}

// TestTokenDroppedOnOriginChange: HF_TOKEN goes to the endpoint's own
// scheme, host and port only. Go's client keeps Authorization on a redirect
// to the same host name on another port or scheme (and to a subdomain); the
// hub client drops it on any change: here a CDN on the same host, another
// port, reached from an http and from an https endpoint.
func TestTokenDroppedOnOriginChange(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ name, endpointScheme string }{
		{"port change", "http"},
		{"scheme and port change", "https"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := liteHub(t)
			s.Token = "hf_secret"
			cdn := httptest.NewServer(s.Handler()) // 127.0.0.1, another port
			t.Cleanup(cdn.Close)
			s.CDN = cdn.URL
			opts := hub.Options{Token: "hf_secret", Endpoint: s.URL, CacheDir: t.TempDir()}
			opts.Budget.MinBackoff, opts.Budget.MaxBackoff = time.Millisecond, 2*time.Millisecond
			if tc.endpointScheme == "https" {
				tls := httptest.NewTLSServer(s.Handler())
				t.Cleanup(tls.Close)
				opts.Endpoint, opts.HTTPClient = tls.URL, tls.Client()
			}
			c, err := hub.New(opts)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Fetch(ctx, ref(t, "SWE-bench/SWE-bench_Lite:dev")); err != nil {
				t.Fatalf("fetch through the redirect: %v", err)
			}
			if n := s.CDNAuthorized(); n != 0 {
				t.Errorf("%d requests to %s carried the token", n, cdn.URL)
			}
		})
	}
}

// TestParquetConversionFallback: a dataset whose default branch holds no
// file swebuild reads is read from the hub's parquet conversion, pinned to
// that branch's commit.
func TestParquetConversionFallback(t *testing.T) {
	s := hubtest.New(t)
	dev := liteDev(t)
	s.Commit("acme/scripted", "main", map[string][]byte{"README.md": []byte("# x\n"), "scripted.py": []byte("import datasets\n"), "data/test.csv": []byte("a,b\n")}, nil)
	conv := s.Commit("acme/scripted", hub.ConvertRevision, map[string][]byte{"default/dev/0000.parquet": dev, "other/dev/0000.parquet": dev}, nil)
	snap, err := newClient(t, s, t.TempDir(), hub.Options{}).Fetch(context.Background(), ref(t, "acme/scripted:dev"))
	if err != nil {
		t.Fatal(err)
	}
	if snap.Revision != conv || len(snap.Files) != 1 || snap.Files[0].Path != "default/dev/0000.parquet" {
		t.Errorf("snapshot %s %+v, want commit %s of the conversion", snap, snap.Files, conv)
	}
	if n := s.RequestsTo("/api/datasets/acme/scripted/revision/" + hub.ConvertRevision); n != 1 {
		t.Errorf("%d requests for the conversion branch", n)
	}
	// A named revision is read as it is: no fallback.
	_, err = newClient(t, s, t.TempDir(), hub.Options{}).Fetch(context.Background(), ref(t, "acme/scripted@main:test"))
	if err == nil || !strings.Contains(err.Error(), "only files swebuild does not read") || !strings.Contains(err.Error(), "data/test.csv") {
		t.Errorf("named main: %v", err)
	}
}

func TestFileSizeLimit(t *testing.T) {
	s, _, _ := liteHub(t)
	_, err := newClient(t, s, t.TempDir(), hub.Options{MaxFileBytes: 100_000}).Fetch(context.Background(), ref(t, "SWE-bench/SWE-bench_Lite:dev"))
	if !errors.Is(err, hub.ErrTooLarge) || !strings.Contains(err.Error(), "130267 bytes: over the size limit of 100000 bytes a file") {
		t.Errorf("%v", err)
	}
	if n := s.RequestsTo(hubtest.ObjectPath(liteDev(t))); n != 0 {
		t.Errorf("%d downloads of a file over the limit", n)
	}
}

func TestParseRef(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want hub.Ref
		err  string
	}{
		{"SWE-bench/SWE-bench_Verified", hub.Ref{Name: "SWE-bench/SWE-bench_Verified"}, ""},
		{"princeton-nlp/SWE-bench_Lite:dev", hub.Ref{Name: "princeton-nlp/SWE-bench_Lite", Split: "dev"}, ""},
		{"SWE-bench/SWE-bench_Lite@6ec7bb89b9342f664a54a6e0a6ea6501d3437cc2:test", hub.Ref{Name: "SWE-bench/SWE-bench_Lite", Revision: "6ec7bb89b9342f664a54a6e0a6ea6501d3437cc2", Split: "test"}, ""},
		{"a/b@refs/convert/parquet", hub.Ref{Name: "a/b", Revision: "refs/convert/parquet"}, ""},
		{"lite", hub.Ref{Name: "SWE-bench/SWE-bench_Lite"}, ""},
		{"SWE-Bench:dev", hub.Ref{Name: "SWE-bench/SWE-bench", Split: "dev"}, ""},
		{"a/b:te st", hub.Ref{}, "is not a split name"},
		{"a/b@..x", hub.Ref{}, "is not a revision"},
		{"a/b/c", hub.Ref{}, "not a dataset name"},
		{"a--x/b", hub.Ref{}, "not a dataset name"},
		{"-a/b", hub.Ref{}, "not a dataset name"},
		{"nope", hub.Ref{}, "not a dataset name"},
	} {
		got, err := hub.ParseRef(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseRef(%q) = %v, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseRef(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}
