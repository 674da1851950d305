package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/swebuild/swebuild/envfile"
	"github.com/swebuild/swebuild/retry"
)

// server is an httptest server whose answers a test scripts per path; it
// counts requests.
type server struct {
	*httptest.Server
	hits    atomic.Int64
	mu      sync.Mutex
	perPath map[string]int
	handle  func(w http.ResponseWriter, r *http.Request, n int) // n: 1-based request count for the path
}

func newServer(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, n int)) *server {
	s := &server{perPath: map[string]int{}, handle: handle}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		s.perPath[r.URL.Path]++
		n := s.perPath[r.URL.Path]
		s.mu.Unlock()
		s.handle(w, r, n)
	}))
	t.Cleanup(s.Close)
	return s
}

// newClient makes a client for s with tiny backoffs and a fresh cache.
func newClient(t *testing.T, s *server, opts Options) *Client {
	t.Helper()
	if opts.CacheDir == "" {
		opts.CacheDir = t.TempDir()
	}
	if s != nil {
		opts.BaseURL = s.URL
	}
	if opts.Budget.MinBackoff == 0 {
		opts.Budget.MinBackoff, opts.Budget.MaxBackoff = time.Millisecond, 2*time.Millisecond
	}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const testURL = DefaultBaseURL + "/o/r/abc/requirements.txt"

func TestGetCachesAndCacheHitMakesNoRequest(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if r.URL.Path != "/o/r/abc/requirements.txt" {
			t.Errorf("path %q", r.URL.Path)
		}
		io.WriteString(w, "pytest\n")
	})
	dir := t.TempDir()
	c := newClient(t, s, Options{CacheDir: dir})
	for i := 0; i < 3; i++ {
		b, err := c.Get(context.Background(), testURL)
		if err != nil || string(b) != "pytest\n" {
			t.Fatalf("Get = %q, %v", b, err)
		}
	}
	if got := s.hits.Load(); got != 1 {
		t.Errorf("%d requests, want 1", got)
	}
	// A new client on the same cache, even online, makes no request.
	c2 := newClient(t, s, Options{CacheDir: dir})
	if b, err := c2.Get(context.Background(), testURL); err != nil || string(b) != "pytest\n" {
		t.Fatalf("Get = %q, %v", b, err)
	}
	if got := s.hits.Load(); got != 1 {
		t.Errorf("%d requests after a cache hit, want 1", got)
	}
	// The cache file is named by sha256(url) and no temporary file is left.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != cacheKey(testURL) {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("cache dir holds %v, want only %s", names, cacheKey(testURL))
	}
}

func TestOffline(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if strings.HasSuffix(r.URL.Path, "/missing.txt") {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, "body")
	})
	dir := t.TempDir()
	cached := DefaultBaseURL + "/o/r/abc/cached.txt"
	missing := DefaultBaseURL + "/o/r/abc/missing.txt"
	online := newClient(t, s, Options{CacheDir: dir})
	if _, err := online.Get(context.Background(), cached); err != nil {
		t.Fatal(err)
	}
	if _, err := online.Get(context.Background(), missing); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	before := s.hits.Load()

	off := newClient(t, s, Options{CacheDir: dir, Offline: true})
	if b, err := off.Get(context.Background(), cached); err != nil || string(b) != "body" {
		t.Fatalf("offline cached Get = %q, %v", b, err)
	}
	// A 404 seen online is a 404 offline too.
	if _, err := off.Get(context.Background(), missing); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), missing) {
		t.Errorf("offline cached 404: %v", err)
	}
	never := DefaultBaseURL + "/o/r/abc/py3.txt"
	_, err := off.Get(context.Background(), never)
	want := fmt.Sprintf("offline: %s is not in the cache (%s); run once without --offline", never, dir)
	if !errors.Is(err, ErrOffline) || err == nil || err.Error() != want {
		t.Errorf("offline miss:\n got %v\nwant %s", err, want)
	}
	if s.hits.Load() != before {
		t.Errorf("offline client made %d requests", s.hits.Load()-before)
	}
}

func TestRetryOn500ThenSuccess(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n <= 2 {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "ok")
	})
	c := newClient(t, s, Options{})
	b, err := c.Get(context.Background(), testURL)
	if err != nil || string(b) != "ok" {
		t.Fatalf("Get = %q, %v", b, err)
	}
	if got := s.hits.Load(); got != 3 {
		t.Errorf("%d requests, want 3", got)
	}
}

func TestRetriesExhausted(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		http.Error(w, "down", http.StatusBadGateway)
	})
	c := newClient(t, s, Options{Budget: retry.Budget{Attempts: 3}})
	_, err := c.Get(context.Background(), testURL)
	var he *HTTPError
	if !errors.As(err, &he) || he.StatusCode != 502 || he.Attempts != 3 {
		t.Fatalf("err = %v (%+v)", err, he)
	}
	if want := "GET " + testURL + ": 502 Bad Gateway after 3 attempts"; err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}
	if s.hits.Load() != 3 {
		t.Errorf("%d requests, want 3", s.hits.Load())
	}
	// The failure is remembered for the rest of the run (this client): no
	// request, the same error.
	if _, err2 := c.Get(context.Background(), testURL); s.hits.Load() != 3 || err2 == nil || err2.Error() != err.Error() {
		t.Errorf("second Get: %d requests, err %v; want 3 and the first error", s.hits.Load(), err2)
	}
	// Nothing is cached on disk for a failure: the next run asks again.
	c2 := newClient(t, s, Options{Budget: retry.Budget{Attempts: 3}, CacheDir: c.CacheDir()})
	c2.Get(context.Background(), testURL)
	if s.hits.Load() != 6 {
		t.Errorf("%d requests, want 6", s.hits.Load())
	}
}

func TestNotFoundIsNotRetried(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) { http.NotFound(w, r) })
	c := newClient(t, s, Options{})
	_, err := c.Get(context.Background(), testURL)
	if !errors.Is(err, ErrNotFound) || err.Error() != "GET "+testURL+": 404 Not Found" {
		t.Fatalf("err = %v", err)
	}
	if s.hits.Load() != 1 {
		t.Errorf("%d requests, want 1", s.hits.Load())
	}
}

func TestFirstOfFallsBackOn404(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		switch r.URL.Path {
		case "/o/r/abc/second.txt":
			io.WriteString(w, "second")
		case "/o/r/abc/third.txt":
			io.WriteString(w, "third")
		default:
			http.NotFound(w, r)
		}
	})
	dir := t.TempDir()
	urls := envfile.Candidates("o/r", "abc", []string{"first.txt", "second.txt", "third.txt"})
	c := newClient(t, s, Options{CacheDir: dir})
	u, b, err := c.FirstOf(context.Background(), urls)
	if err != nil || u != urls[1] || string(b) != "second" {
		t.Fatalf("FirstOf = %q, %q, %v", u, b, err)
	}
	if s.hits.Load() != 2 {
		t.Errorf("%d requests, want 2 (third never asked)", s.hits.Load())
	}
	// Offline, the cached 404 sends FirstOf to the same candidate.
	off := newClient(t, s, Options{CacheDir: dir, Offline: true})
	u, b, err = off.FirstOf(context.Background(), urls)
	if err != nil || u != urls[1] || string(b) != "second" {
		t.Fatalf("offline FirstOf = %q, %q, %v", u, b, err)
	}
	// All missing: the error lists them and matches ErrNotFound.
	none := envfile.Candidates("o/r", "abc", []string{"x.txt", "y.txt"})
	_, _, err = c.FirstOf(context.Background(), none)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), none[0]+", "+none[1]) {
		t.Errorf("all missing: %v", err)
	}
	// A server error stops FirstOf instead of falling through.
	s2 := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if strings.HasSuffix(r.URL.Path, "/first.txt") {
			http.Error(w, "x", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "second")
	})
	c2 := newClient(t, s2, Options{Budget: retry.Budget{Attempts: 1}})
	if _, _, err := c2.FirstOf(context.Background(), urls); err == nil || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "503") {
		t.Errorf("503: %v", err)
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			w.Header().Set("Retry-After", "1") // the backoff without it is 1-2 ms
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		io.WriteString(w, "ok")
	})
	c := newClient(t, s, Options{})
	start := time.Now()
	b, err := c.Get(context.Background(), testURL)
	if err != nil || string(b) != "ok" {
		t.Fatalf("Get = %q, %v", b, err)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("waited %v, want at least the 1 s Retry-After asked for", d)
	}
	if s.hits.Load() != 2 {
		t.Errorf("%d requests, want 2", s.hits.Load())
	}
}

func TestConcurrentGetsShareOneRequest(t *testing.T) {
	release := make(chan struct{})
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		<-release
		io.WriteString(w, "shared body")
	})
	c := newClient(t, s, Options{})
	const n = 16
	var wg sync.WaitGroup
	results := make([][]byte, n)
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i], errs[i] = c.Get(context.Background(), testURL)
		}(i)
	}
	time.Sleep(20 * time.Millisecond) // let the goroutines pile up on the request
	close(release)
	wg.Wait()
	for i := range results {
		if errs[i] != nil || string(results[i]) != "shared body" {
			t.Fatalf("Get %d = %q, %v", i, results[i], errs[i])
		}
	}
	results[0][0] = 'X' // callers own their slices
	if string(results[1]) != "shared body" {
		t.Error("callers share one slice")
	}
	if got := s.hits.Load(); got != 1 {
		t.Errorf("%d requests, want 1", got)
	}
}

func TestConcurrentClientsOnOneCache(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		io.WriteString(w, strings.Repeat("line\n", 10000))
	})
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, _ := New(Options{CacheDir: dir, BaseURL: s.URL})
			for j := 0; j < 5; j++ {
				u := fmt.Sprintf("%s/o/r/abc/f%d.txt", DefaultBaseURL, j)
				b, err := c.Get(context.Background(), u)
				if err != nil || len(b) != 50000 {
					t.Errorf("Get %s: %d bytes, %v", u, len(b), err)
				}
			}
		}()
	}
	wg.Wait()
	entries, _ := os.ReadDir(dir)
	if len(entries) != 5 {
		t.Errorf("%d cache entries, want 5", len(entries))
	}
}

func TestPerRequestTimeout(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
	})
	c := newClient(t, s, Options{Budget: retry.Budget{AnswerTimeout: 50 * time.Millisecond, Attempts: 2}})
	start := time.Now()
	_, err := c.Get(context.Background(), testURL)
	if err == nil || !strings.Contains(err.Error(), testURL) || !strings.Contains(err.Error(), "after 2 attempts") {
		t.Errorf("err = %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %v", d)
	}
}

func TestContextCancelled(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		http.Error(w, "x", http.StatusServiceUnavailable)
	})
	c := newClient(t, s, Options{Budget: retry.Budget{MinBackoff: time.Hour, MaxBackoff: time.Hour, MaxElapsed: 3 * time.Hour}})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.Get(ctx, testURL)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want deadline exceeded", err)
	}
}

// TestNoLoggingToStderr checks retryablehttp's default stderr logger is off.
func TestNoLoggingToStderr(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			http.Error(w, "x", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "ok")
	})
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = w
	c := newClient(t, s, Options{})
	_, getErr := c.Get(context.Background(), testURL)
	os.Stderr = saved
	w.Close()
	out, _ := io.ReadAll(r)
	if getErr != nil || len(out) != 0 {
		t.Errorf("Get err %v; stderr %q", getErr, out)
	}
}

func TestTargetRewrite(t *testing.T) {
	c := newClient(t, nil, Options{BaseURL: "http://127.0.0.1:9/"})
	if got := c.target(testURL); got != "http://127.0.0.1:9/o/r/abc/requirements.txt" {
		t.Errorf("target = %q", got)
	}
	if got := c.target("https://example.org/x"); got != "https://example.org/x" {
		t.Errorf("target of another host = %q", got)
	}
}

func TestNoCacheDir(t *testing.T) {
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), "no cache directory") {
		t.Errorf("New without a cache directory: %v", err)
	}
}

// TestCachedBodyOverLimit: a cache file larger than MaxBodyBytes (not one
// this client wrote) is an error naming the file and the limit, not read
// whole, and no request is made.
func TestCachedBodyOverLimit(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) { io.WriteString(w, "x") })
	dir := t.TempDir()
	path := filepath.Join(dir, cacheKey(testURL))
	if err := os.WriteFile(path, make([]byte, 101), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, s, Options{CacheDir: dir, MaxBodyBytes: 100})
	_, err := c.Get(context.Background(), testURL)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "limit of 100 bytes") {
		t.Errorf("Get = %v, want an error naming %s and the limit", err, path)
	}
	if s.hits.Load() != 0 {
		t.Errorf("%d requests", s.hits.Load())
	}
	// At the limit, it is read.
	os.WriteFile(path, make([]byte, 100), 0o644)
	if b, err := c.Get(context.Background(), testURL); err != nil || len(b) != 100 {
		t.Errorf("at the limit: %d bytes, %v", len(b), err)
	}
}

func TestFetch(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		switch r.URL.Path {
		case "/o/r/abc/ok.txt":
			w.Write([]byte("caf\xe9\n")) // invalid UTF-8 becomes U+FFFD, as requests' .text
		case "/o/r/abc/down.txt":
			http.Error(w, "x", http.StatusInternalServerError)
		default:
			http.NotFound(w, r)
		}
	})
	c := newClient(t, s, Options{Budget: retry.Budget{Attempts: 1}})
	ctx := context.Background()
	if body, found, err := c.Fetch(ctx, DefaultBaseURL+"/o/r/abc/ok.txt"); body != "caf\uFFFD\n" || !found || err != nil {
		t.Errorf("ok: %q %v %v", body, found, err)
	}
	if body, found, err := c.Fetch(ctx, DefaultBaseURL+"/o/r/abc/nope.txt"); body != "" || found || err != nil {
		t.Errorf("404: %q %v %v", body, found, err)
	}
	if _, found, err := c.Fetch(ctx, DefaultBaseURL+"/o/r/abc/down.txt"); found || err == nil {
		t.Errorf("500: %v %v", found, err)
	}
}
