package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/swebuild/swebuild/internal/faultproxy"
	"github.com/swebuild/swebuild/retry"
)

// TestDefaultBudget: the numbers DefaultBudget's doc gives.
func TestDefaultBudget(t *testing.T) {
	if got := DefaultBudget.MaxWaits(); got != 11500*time.Millisecond {
		t.Errorf("DefaultBudget.MaxWaits() = %v; its doc says 11.5s", got)
	}
}

// TestRetryError: package retry's classification, and a refused plain-HTTP
// connection is never retried.
func TestRetryError(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{errors.New("read: connection reset by peer"), true},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{context.Canceled, false},
		{&InsecureError{Host: "10.0.0.1:5000"}, false},
		{fmt.Errorf("x: %w", &InsecureError{Host: "10.0.0.1:5000"}), false},
	} {
		if got := retryError(ctx, tc.err); got != tc.want {
			t.Errorf("retryError(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// testBudget is fast: 5 attempts, waits of 1-8 ms.
var testBudget = retry.Budget{Attempts: 5, MaxElapsed: 10 * time.Second, MinBackoff: time.Millisecond, MaxBackoff: 8 * time.Millisecond, MaxRetryAfter: 5 * time.Second}

func newTestClient(t *testing.T, b retry.Budget) *Client {
	t.Helper()
	c, err := New(Options{Budget: b, Keychain: authn.NewMultiKeychain()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func hostOf(srv *httptest.Server) string { return strings.TrimPrefix(srv.URL, "http://") }

// A registry stuck at 503 (no Retry-After) gets exactly Budget.Attempts
// tries of a HEAD (three retry layers made it 54), and the error is the
// registry's 503.
func TestStuck503GivesUpAfterTheBudget(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			return
		}
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	c := newTestClient(t, testBudget)
	ref, _ := c.ParseReference(hostOf(srv) + "/x/y:latest")
	_, err := c.Head(context.Background(), ref)
	var terr *transport.Error
	if !errors.As(err, &terr) || terr.StatusCode != 503 {
		t.Fatalf("Head = %v, want the 503", err)
	}
	if n := hits.Load(); n != int32(testBudget.Attempts) {
		t.Errorf("%d attempts, budget says %d", n, testBudget.Attempts)
	}
}

// 429 with Retry-After: 1 makes the next attempt wait a second; a
// Retry-After beyond what is left of the budget gives up at once instead of
// sleeping past it.
func TestRetryAfterIsWaitedOrGivesUpWithinTheBudget(t *testing.T) {
	var mu sync.Mutex
	var times []time.Time
	retryAfter := "1"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			return
		}
		mu.Lock()
		times = append(times, time.Now())
		n := len(times)
		mu.Unlock()
		if n == 1 || retryAfter != "1" {
			w.Header().Set("Retry-After", retryAfter)
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Header().Set("Docker-Content-Digest", "sha256:1111111111111111111111111111111111111111111111111111111111111111")
		w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
		w.Header().Set("Content-Length", "42")
	}))
	defer srv.Close()
	c := newTestClient(t, testBudget)
	ref, _ := c.ParseReference(hostOf(srv) + "/x/y:latest")
	d, err := c.Head(context.Background(), ref)
	if err != nil || d == nil || d.Size != 42 {
		t.Fatalf("Head = %+v, %v", d, err)
	}
	if len(times) != 2 {
		t.Fatalf("%d attempts, want 2", len(times))
	}
	if gap := times[1].Sub(times[0]); gap < 950*time.Millisecond {
		t.Errorf("retry came %v after the 429, Retry-After said 1s", gap)
	}

	// Retry-After: 30 with 10 s of budget: one attempt, no sleep.
	retryAfter = "30"
	times = nil
	b := testBudget
	b.MaxRetryAfter = time.Minute
	c = newTestClient(t, b)
	start := time.Now()
	_, err = c.Head(context.Background(), ref)
	var terr *transport.Error
	if !errors.As(err, &terr) || terr.StatusCode != 429 {
		t.Fatalf("Head = %v, want the 429", err)
	}
	if len(times) != 1 || time.Since(start) > 2*time.Second {
		t.Errorf("%d attempts in %v; a wait past the budget must not start", len(times), time.Since(start))
	}
}

// A port nobody listens on: the request gives up within the budget's waits,
// and the next request to that host fails at once.
func TestDeadRegistryGivesUpWithinTheBudget(t *testing.T) {
	host := faultproxy.Refused(t)
	b := retry.Budget{Attempts: 4, MaxElapsed: 30 * time.Second, MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
	c := newTestClient(t, b)
	ref, _ := c.ParseReference(host + "/x/y:latest")
	start := time.Now()
	_, err := c.Head(context.Background(), ref)
	el := time.Since(start)
	var gu *GaveUpError
	if !errors.As(err, &gu) || gu.Attempts != 4 {
		t.Fatalf("Head on a dead registry: %v", err)
	}
	// Waits of at most 100 + 200 + 200 ms (MaxWaits), plus the ping's
	// https/http race.
	if el > b.MaxWaits()+time.Second {
		t.Errorf("gave up after %v", el)
	}
	start = time.Now()
	_, err = c.Head(context.Background(), ref)
	var un *UnreachableError
	if !errors.As(err, &un) || time.Since(start) > 50*time.Millisecond {
		t.Errorf("second request: %v after %v, want an immediate UnreachableError", err, time.Since(start))
	}
}

func TestNotFoundIsNilAndPermanentErrorsAreNotRetried(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			return
		}
		hits.Add(1)
		switch {
		case strings.Contains(r.URL.Path, "missing"):
			w.WriteHeader(http.StatusNotFound)
		case strings.Contains(r.URL.Path, "notimpl"):
			w.WriteHeader(http.StatusNotImplemented)
		default:
			w.WriteHeader(http.StatusForbidden)
		}
	}))
	defer srv.Close()
	c := newTestClient(t, testBudget)
	ref, _ := c.ParseReference(hostOf(srv) + "/missing:latest")
	if d, err := c.Head(context.Background(), ref); err != nil || d != nil {
		t.Errorf("404: %+v, %v", d, err)
	}
	for _, repo := range []string{"forbidden", "notimpl"} {
		hits.Store(0)
		ref, _ = c.ParseReference(hostOf(srv) + "/" + repo + ":latest")
		if _, err := c.Head(context.Background(), ref); err == nil {
			t.Errorf("%s not reported", repo)
		}
		if n := hits.Load(); n != 1 {
			t.Errorf("%s was tried %d times", repo, n)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The concurrency limit holds per host, and a slot is freed when the
// answer's headers arrive: response bodies still being read (a blob being
// copied to another registry) hold none.
func TestLimitPerHostAndSlotsFreedAtHeaders(t *testing.T) {
	var inFlight, maxSeen atomic.Int32
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		n := inFlight.Add(1)
		for {
			m := maxSeen.Load()
			if n <= m || maxSeen.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		inFlight.Add(-1)
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("body")), Header: http.Header{}}, nil
	})
	lt := &limitTransport{next: base, limits: &hostLimits{rps: -1, concurrency: 3, hosts: map[string]*hostLimiter{}}}
	var wg sync.WaitGroup
	var open []io.Closer
	var mu sync.Mutex
	for i := 0; i < 30; i++ {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/", nil)
			resp, err := lt.RoundTrip(req)
			if err == nil {
				mu.Lock()
				open = append(open, resp.Body) // never read nor closed until the end
				mu.Unlock()
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("requests blocked behind unread response bodies")
	}
	for _, c := range open {
		c.Close()
	}
	if m := maxSeen.Load(); m != 3 {
		t.Errorf("max in flight %d, limit 3", m)
	}

	// Another host has its own slots and its own rate: 20 requests at 20/s
	// (burst 10) take about half a second.
	h := &hostLimits{rps: 20, concurrency: 100, hosts: map[string]*hostLimiter{}}
	start := time.Now()
	for i := 0; i < 20; i++ {
		if err := h.get("a.example:5000").rate.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if el := time.Since(start); el < 400*time.Millisecond {
		t.Errorf("20 requests at 20/s with burst 10 took %v", el)
	}
	if h.get("b.example:5000").rate.Tokens() < 9 {
		t.Error("hosts share a bucket")
	}
	if d := (&hostLimits{hosts: map[string]*hostLimiter{}}).get("127.0.0.1:5000"); d.rate != nil {
		t.Error("loopback registry rate limited by default")
	}
	if d := (&hostLimits{hosts: map[string]*hostLimiter{}}).get("ghcr.io"); d.rate == nil || float64(d.rate.Limit()) != DefaultMaxRPS {
		t.Error("remote registry not limited to DefaultMaxRPS by default")
	}
}

// Plain HTTP goes to loopback hosts and to registries named as insecure,
// never elsewhere, whatever go-containerregistry's scheme guess (it tries
// http for 10/8, 172.16/12 and 192.168/16 after https fails).
func TestPlainHTTPOnlyToLoopbackOrNamedInsecure(t *testing.T) {
	for _, tc := range []struct {
		insecure []string
		host     string
		wantHTTP bool
	}{
		{nil, "10.1.2.3:5000", false},
		{nil, "192.168.7.8", false},
		{nil, "172.20.0.1:443", false},
		{nil, "127.0.0.1:5000", true},
		{nil, "localhost:5000", true},
		{[]string{"10.1.2.3:5000"}, "10.1.2.3:5000", true},
		{[]string{"10.1.2.3:5000"}, "10.1.2.3:5001", false},
	} {
		var sawHTTP atomic.Bool
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Scheme == "http" {
				sawHTTP.Store(true)
				return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
			}
			return nil, errors.New("tls: handshake failure (test)")
		})
		c, err := New(Options{Budget: retry.Budget{Attempts: 1}, Keychain: authn.NewMultiKeychain(), InsecureRegistries: tc.insecure, Base: base})
		if err != nil {
			t.Fatal(err)
		}
		ref, err := c.ParseReference(tc.host + "/x/y:latest")
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Head(context.Background(), ref)
		if sawHTTP.Load() != tc.wantHTTP {
			t.Errorf("%s (insecure %v): plain HTTP sent = %v (err %v)", tc.host, tc.insecure, sawHTTP.Load(), err)
		}
		var ie *InsecureError
		if !tc.wantHTTP && !errors.As(err, &ie) {
			t.Errorf("%s: error %v does not say plain HTTP was refused", tc.host, err)
		}
	}
}

func TestIsLoopback(t *testing.T) {
	for h, want := range map[string]bool{"127.0.0.1:5000": true, "localhost:5000": true, "localhost": true, "[::1]:5000": true, "ghcr.io": false, "10.0.0.1:5000": false} {
		if IsLoopback(h) != want {
			t.Errorf("IsLoopback(%q) != %v", h, want)
		}
	}
}

func mustRepo(t *testing.T, c *Client, s string) name.Repository {
	t.Helper()
	r, err := c.ParseRepository(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
