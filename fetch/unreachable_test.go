package fetch

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swebuild/swebuild/internal/faultproxy"
	"github.com/swebuild/swebuild/retry"
)

// countingTransport counts the requests per URL path that reach the wire.
type countingTransport struct {
	mu   sync.Mutex
	n    map[string]int
	next http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n[r.URL.Path]++
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

func (c *countingTransport) count(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[path]
}

// TestUnreachableHostAskedOnce: with an endpoint on loopback that refuses
// connections, or that accepts them and never answers, each URL is tried
// once (with its retries) per run, later Gets of it make no request, and
// other URLs on the same host fail at once with ErrUnreachable; Unreachable
// names them all and the log shows the retries (and, when silent, that the
// download is still waiting).
func TestUnreachableHostAskedOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		addr    func(testing.TB) string
		waiting bool // the log says a download is still waiting
	}{
		{"refused", faultproxy.Refused, false},
		{"silent", faultproxy.Silent, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct := &countingTransport{n: map[string]int{}, next: http.DefaultTransport.(*http.Transport).Clone()}
			var log bytes.Buffer
			var logMu sync.Mutex
			c, err := New(Options{
				CacheDir: t.TempDir(), BaseURL: "http://" + tc.addr(t),
				HTTPClient: &http.Client{Transport: ct},
				Budget:     retry.Budget{AnswerTimeout: 150 * time.Millisecond, Attempts: 3, MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond},
				Log:        lockedWriter{&logMu, &log}, ProgressAfter: 100 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			urlA := DefaultBaseURL + "/o/r/abc/requirements.txt"
			urlB := DefaultBaseURL + "/o/r/abc/requirements/dev.txt"
			urlC := DefaultBaseURL + "/p/q/def/environment.yml"
			start := time.Now()
			_, errA := c.Get(context.Background(), urlA)
			if errA == nil || !errors.Is(errA, ErrUnreachable) || !strings.Contains(errA.Error(), urlA) {
				t.Fatalf("first Get: %v, want an ErrUnreachable naming %s", errA, urlA)
			}
			if n := ct.count("/o/r/abc/requirements.txt"); n != 3 {
				t.Errorf("%s: %d requests, want 3 (1 + 2 retries)", urlA, n)
			}
			_, errA2 := c.Get(context.Background(), urlA)
			_, _, errB := c.Fetch(context.Background(), urlB)
			_, _, errC := c.FirstOf(context.Background(), []string{urlC, urlA})
			for _, e := range []error{errA2, errB, errC} {
				if !errors.Is(e, ErrUnreachable) {
					t.Errorf("later Get: %v, want ErrUnreachable", e)
				}
			}
			if errB == nil || !strings.Contains(errB.Error(), urlB) || !strings.Contains(errB.Error(), "raw.githubusercontent.com gave no answer earlier in this run") {
				t.Errorf("other URL on the host: %v", errB)
			}
			for _, p := range []string{"/o/r/abc/requirements.txt", "/o/r/abc/requirements/dev.txt", "/p/q/def/environment.yml"} {
				want := 0
				if p == "/o/r/abc/requirements.txt" {
					want = 3
				}
				if n := ct.count(p); n != want {
					t.Errorf("%s: %d requests in all, want %d", p, n, want)
				}
			}
			if got, want := c.Unreachable(), []string{urlA, urlB, urlC}; !slices.Equal(got, want) {
				t.Errorf("Unreachable() = %q, want %q", got, want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
			logMu.Lock()
			out := log.String()
			logMu.Unlock()
			if !strings.Contains(out, "retry 2 of 2") {
				t.Errorf("log %q lacks the retries", out)
			}
			if tc.waiting != strings.Contains(out, urlA+": still waiting after") {
				t.Errorf("log %q: still waiting reported = %v, want %v", out, !tc.waiting, tc.waiting)
			}
		})
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
