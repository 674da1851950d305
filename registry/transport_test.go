package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"7", 7 * time.Second, true},
		{"-1", 0, false},
		{"soon", 0, false},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
	} {
		got, ok := parseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestBackoffHonoursRetryAfterOn429And503Only(t *testing.T) {
	b := backoff(30 * time.Second)
	for _, tc := range []struct {
		code       int
		header     string
		want       time.Duration // exact, or 0 for "jitter range"
		jitterOnly bool
	}{
		{429, "3", 3 * time.Second, false},
		{503, "4", 4 * time.Second, false},
		{429, "3600", 30 * time.Second, false}, // capped
		{500, "3", 0, true},
		{429, "", 0, true},
	} {
		resp := &http.Response{StatusCode: tc.code, Header: http.Header{}}
		if tc.header != "" {
			resp.Header.Set("Retry-After", tc.header)
		}
		got := b(100*time.Millisecond, time.Second, 2, resp)
		if !tc.jitterOnly && got != tc.want {
			t.Errorf("%d Retry-After %q: waited %v, want %v", tc.code, tc.header, got, tc.want)
		}
		if tc.jitterOnly && (got < 100*time.Millisecond || got > 400*time.Millisecond) {
			t.Errorf("%d Retry-After %q: waited %v, want jitter in [100ms, 400ms]", tc.code, tc.header, got)
		}
	}
}

func TestJitterBounds(t *testing.T) {
	for attempt := 0; attempt < 40; attempt++ {
		for i := 0; i < 20; i++ {
			d := jitter(10*time.Millisecond, time.Second, attempt)
			if d < 10*time.Millisecond || d > time.Second {
				t.Fatalf("attempt %d: %v out of bounds", attempt, d)
			}
		}
	}
}

// A server answering 429 (Retry-After: 1) then 503 then 200: the client's
// HEAD succeeds, the second attempt waits for Retry-After.
func TestClientRetriesAndWaitsRetryAfter(t *testing.T) {
	var mu sync.Mutex
	var times []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			w.WriteHeader(http.StatusOK)
			return
		}
		mu.Lock()
		times = append(times, time.Now())
		n := len(times)
		mu.Unlock()
		switch n {
		case 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		case 2:
			w.WriteHeader(http.StatusBadGateway)
		default:
			w.Header().Set("Docker-Content-Digest", "sha256:1111111111111111111111111111111111111111111111111111111111111111")
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			w.Header().Set("Content-Length", "42")
			w.WriteHeader(http.StatusOK)
		}
	}))
	defer srv.Close()
	c, err := New(Options{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Keychain: authn.NewMultiKeychain()})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := c.ParseReference(strings.TrimPrefix(srv.URL, "http://") + "/x/y:latest")
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Head(context.Background(), ref)
	if err != nil || d == nil || d.Size != 42 {
		t.Fatalf("Head = %+v, %v", d, err)
	}
	if len(times) != 3 {
		t.Fatalf("%d attempts, want 3", len(times))
	}
	if gap := times[1].Sub(times[0]); gap < 950*time.Millisecond {
		t.Errorf("retry after 429 came %v later, Retry-After said 1s", gap)
	}
}

func TestHeadNotFoundIsNilAndPermanentErrorsAreNotRetried(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			return
		}
		hits.Add(1)
		if strings.Contains(r.URL.Path, "missing") {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusForbidden)
	}))
	defer srv.Close()
	c, err := New(Options{MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, Keychain: authn.NewMultiKeychain()})
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	ref, _ := c.ParseReference(host + "/missing:latest")
	if d, err := c.Head(context.Background(), ref); err != nil || d != nil {
		t.Errorf("404: %+v, %v", d, err)
	}
	hits.Store(0)
	ref, _ = c.ParseReference(host + "/forbidden:latest")
	if _, err := c.Head(context.Background(), ref); err == nil {
		t.Error("403 not reported")
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("403 was tried %d times", n)
	}
}

// The concurrency limit holds across goroutines and the rate limit spaces
// requests out.
func TestLimiter(t *testing.T) {
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
		return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}}, nil
	})
	lt := &limitedTransport{base: base, lim: newLimiter(-1, 3)}
	var wg sync.WaitGroup
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
			resp, err := lt.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	if m := maxSeen.Load(); m > 3 || m < 2 {
		t.Errorf("max in flight %d, limit 3", m)
	}

	l := newLimiter(20, 100) // burst 10, then 20/s
	start := time.Now()
	for i := 0; i < 20; i++ {
		if err := l.wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if el := time.Since(start); el < 400*time.Millisecond {
		t.Errorf("20 requests at 20/s with burst 10 took %v, want >= 0.45s", el)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := newLimiter(0.001, 1).waitAfterBurst(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled wait: %v", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// waitAfterBurst drains the burst then waits once (test helper).
func (l *limiter) waitAfterBurst(ctx context.Context) error {
	for i := 0; i < int(l.burst); i++ {
		if err := l.wait(context.Background()); err != nil {
			return err
		}
	}
	return l.wait(ctx)
}

func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{context.Canceled, false},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), false},
		{&transport.Error{StatusCode: 429}, true},
		{&transport.Error{StatusCode: 408}, true},
		{&transport.Error{StatusCode: 500}, true},
		{&transport.Error{StatusCode: 503}, true},
		{&transport.Error{StatusCode: 501}, false},
		{&transport.Error{StatusCode: 401}, false},
		{&transport.Error{StatusCode: 404}, false},
		{errors.New("connection reset by peer"), true},
	} {
		if got := Transient(tc.err); got != tc.want {
			t.Errorf("Transient(%v) = %v, want %v", tc.err, got, tc.want)
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
