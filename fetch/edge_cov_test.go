package fetch

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/swebuild/swebuild/retry"
)

// TestBodyOverLimit: an answer larger than MaxBodyBytes is an error saying
// the limit, not retried and not cached; one at the limit is read.
func TestBodyOverLimit(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if r.URL.Path == "/o/r/abc/big.txt" {
			w.Write(make([]byte, 101))
			return
		}
		w.Write(make([]byte, 100))
	})
	dir := t.TempDir()
	c := newClient(t, s, Options{CacheDir: dir, MaxBodyBytes: 100})
	big := DefaultBaseURL + "/o/r/abc/big.txt"
	_, err := c.Get(context.Background(), big)
	if err == nil || err.Error() != "GET "+big+": body larger than 100 bytes" {
		t.Errorf("Get = %v", err)
	}
	if n := s.hits.Load(); n != 1 {
		t.Errorf("%d requests, want 1 (not retried)", n)
	}
	if _, err := os.Stat(filepath.Join(dir, cacheKey(big))); !os.IsNotExist(err) {
		t.Errorf("an over-limit body was cached: %v", err)
	}
	if b, err := c.Get(context.Background(), testURL); err != nil || len(b) != 100 {
		t.Errorf("at the limit: %d bytes, %v", len(b), err)
	}
}

// TestCacheUnusable: a cache entry that cannot be read, or a 404 marker
// that cannot be written, is an error naming the cache, not a silent miss.
func TestCacheUnusable(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) { http.NotFound(w, r) })
	dir := t.TempDir()
	c := newClient(t, s, Options{CacheDir: dir, Budget: retry.Budget{Attempts: 1}})

	// The entry is a directory.
	if err := os.Mkdir(filepath.Join(dir, cacheKey(testURL)), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(context.Background(), testURL); err == nil || !strings.HasPrefix(err.Error(), "fetch cache: ") {
		t.Errorf("unreadable entry: err = %v", err)
	}
	if n := s.hits.Load(); n != 0 {
		t.Errorf("%d requests for an unreadable entry", n)
	}

	// The 404 marker's place is taken by a directory.
	other := DefaultBaseURL + "/o/r/abc/environment.yml"
	if err := os.MkdirAll(filepath.Join(dir, cacheKey(other)+notFoundSuffix, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := c.Get(context.Background(), other)
	if err == nil || !strings.HasPrefix(err.Error(), "fetch cache: ") || errors.Is(err, ErrNotFound) {
		t.Errorf("unwritable 404 marker: err = %v", err)
	}

	// The cache directory is under a file.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	under := newClient(t, s, Options{CacheDir: filepath.Join(file, "http")})
	if _, err := under.Get(context.Background(), testURL); err == nil || !strings.HasPrefix(err.Error(), "fetch cache: ") {
		t.Errorf("cache under a file: err = %v", err)
	}
}

// TestFirstOfNoCandidates: no candidate URL is an error, not a request.
func TestFirstOfNoCandidates(t *testing.T) {
	c := newClient(t, nil, Options{})
	if _, _, err := c.FirstOf(context.Background(), nil); err == nil || err.Error() != "fetch: no candidate URLs" {
		t.Errorf("FirstOf(nil) = %v", err)
	}
}

// callerTransport counts the requests it carries to next.
type callerTransport struct {
	n    atomic.Int64
	next http.RoundTripper
}

func (c *callerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// TestOwnHTTPClient: requests go through the caller's client, whose
// Timeout is left as it was (the client's copy takes the budget's).
func TestOwnHTTPClient(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, n int) { io.WriteString(w, "pytest\n") })
	rt := &callerTransport{next: http.DefaultTransport}
	hc := &http.Client{Transport: rt, Timeout: time.Hour}
	c := newClient(t, s, Options{HTTPClient: hc, Budget: retry.Budget{AnswerTimeout: 3 * time.Second}})
	b, err := c.Get(context.Background(), testURL)
	if err != nil || string(b) != "pytest\n" {
		t.Fatalf("Get = %q, %v", b, err)
	}
	if rt.n.Load() != 1 {
		t.Errorf("%d requests through the caller's transport, want 1", rt.n.Load())
	}
	if hc.Timeout != time.Hour {
		t.Errorf("the caller's client Timeout became %v", hc.Timeout)
	}
	if c.http.Timeout != 3*time.Second {
		t.Errorf("the client's Timeout is %v, want the budget's 3s", c.http.Timeout)
	}
	if c.CacheDir() == "" {
		t.Error("no cache directory")
	}
}

func TestHostOf(t *testing.T) {
	for u, want := range map[string]string{
		"https://raw.githubusercontent.com/o/r/abc/requirements.txt": "raw.githubusercontent.com",
		"http://127.0.0.1:9/o/r":                                     "127.0.0.1:9",
		"https://example.org":                                        "example.org",
		"":                                                           "",
	} {
		if got := hostOf(u); got != want {
			t.Errorf("hostOf(%q) = %q, want %q", u, got, want)
		}
	}
}

// TestHTTPErrorText: a final answer says the URL, the status and, when
// retried, how many attempts; a cached one says so.
func TestHTTPErrorText(t *testing.T) {
	for _, tc := range []struct {
		e    HTTPError
		want string
	}{
		{HTTPError{URL: testURL, StatusCode: 404, Status: "404 Not Found"}, "GET " + testURL + ": 404 Not Found (cached answer)"},
		{HTTPError{URL: testURL, StatusCode: 500, Status: "500 Internal Server Error", Attempts: 1}, "GET " + testURL + ": 500 Internal Server Error"},
		{HTTPError{URL: testURL, StatusCode: 503, Status: "503 Service Unavailable", Attempts: 5}, "GET " + testURL + ": 503 Service Unavailable after 5 attempts"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
	if !errors.Is(&HTTPError{StatusCode: http.StatusGone}, ErrNotFound) || errors.Is(&HTTPError{StatusCode: 500}, ErrNotFound) {
		t.Error("410 must match ErrNotFound and 500 must not")
	}
}
