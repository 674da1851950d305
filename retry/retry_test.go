package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
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
		{" 7 ", 7 * time.Second, true},
		{"-1", 0, false},
		{"soon", 0, false},
		{"99999999999999999", time.Duration(1 << 62), true},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
	} {
		got, ok := ParseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestWaitHonoursRetryAfterOn429And503Only(t *testing.T) {
	b := Budget{MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second, MaxRetryAfter: 30 * time.Second}
	for _, tc := range []struct {
		code   int
		header string
		want   time.Duration // exact; 0 means a jitter after 2 failed attempts
	}{
		{429, "3", 3 * time.Second},
		{503, "4", 4 * time.Second},
		{429, "3600", 30 * time.Second}, // capped
		{500, "3", 0},
		{429, "", 0},
	} {
		resp := &http.Response{StatusCode: tc.code, Header: http.Header{}}
		if tc.header != "" {
			resp.Header.Set("Retry-After", tc.header)
		}
		got := b.Wait(2, resp, time.Now())
		if tc.want != 0 && got != tc.want {
			t.Errorf("%d Retry-After %q: waits %v, want %v", tc.code, tc.header, got, tc.want)
		}
		if tc.want == 0 && (got < 100*time.Millisecond || got > 400*time.Millisecond) {
			t.Errorf("%d Retry-After %q: waits %v, want a jitter in [100ms, 400ms]", tc.code, tc.header, got)
		}
	}
}

func TestWaitBounds(t *testing.T) {
	b := Budget{MinBackoff: 10 * time.Millisecond, MaxBackoff: time.Second}
	for n := 1; n < 70; n++ {
		ceil := min(10*time.Millisecond<<min(n, 20), time.Second)
		for i := 0; i < 20; i++ {
			if d := b.Wait(n, nil, time.Now()); d < 10*time.Millisecond || d > ceil {
				t.Fatalf("after %d failed attempts: %v out of [10ms, %v]", n, d, ceil)
			}
		}
	}
}

func TestMaxWaits(t *testing.T) {
	if got := (Budget{Attempts: 4, MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}).MaxWaits(); got != 500*time.Millisecond {
		t.Errorf("MaxWaits = %v, want 100+200+200 ms", got)
	}
	if got := (Budget{Attempts: 4, MinBackoff: time.Second, MaxBackoff: 10 * time.Second, MaxElapsed: 3 * time.Second}).MaxWaits(); got != 3*time.Second {
		t.Errorf("MaxWaits = %v, want MaxElapsed's 3s", got)
	}
}

func TestOr(t *testing.T) {
	d := Budget{Attempts: 5, MaxElapsed: time.Minute, AnswerTimeout: time.Second, MinBackoff: time.Second, MaxBackoff: 8 * time.Second, MaxRetryAfter: time.Minute}
	got := Budget{Attempts: 2, MinBackoff: 20 * time.Second}.Or(d)
	want := Budget{Attempts: 2, MaxElapsed: time.Minute, AnswerTimeout: time.Second, MinBackoff: 20 * time.Second, MaxBackoff: 20 * time.Second, MaxRetryAfter: time.Minute}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Or = %+v, want %+v", got, want)
	}
	if got := (Budget{}).Or(Budget{}); got.Attempts != 1 {
		t.Errorf("no attempts anywhere: %d attempts, want 1", got.Attempts)
	}
}

func TestRetryable(t *testing.T) {
	ctx := context.Background()
	var b Budget
	for _, code := range []int{408, 429, 500, 502, 503, 504} {
		if !b.RetryStatus(code) || !b.Retryable(ctx, &http.Response{StatusCode: code}, errors.New(http.StatusText(code))) {
			t.Errorf("status %d not retried", code)
		}
	}
	for _, code := range []int{200, 201, 400, 401, 403, 404, 409, 501, 505, 507} {
		if b.RetryStatus(code) {
			t.Errorf("status %d retried", code)
		}
	}
	if !(Budget{Statuses: []int{418}}).RetryStatus(418) || (Budget{Statuses: []int{418}}).RetryStatus(503) {
		t.Error("a budget's own statuses are not the ones retried")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for _, tc := range []struct {
		ctx  context.Context
		err  error
		want bool
	}{
		{ctx, errors.New("read: connection reset by peer"), true},
		{ctx, io.ErrUnexpectedEOF, true},
		{ctx, &net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{ctx, context.Canceled, false},
		{ctx, fmt.Errorf("x: %w", context.DeadlineExceeded), false},
		{ctx, &url.Error{Op: "Get", URL: "http://x/", Err: timeoutErr{}}, true}, // http.Client's Timeout
		{cancelled, errors.New("read: connection reset by peer"), false},
		{ctx, errors.New("http: server gave HTTP response to HTTPS client"), false},
		{ctx, fmt.Errorf("get: %w", Stop(errors.New("stopped after 10 redirects"))), false},
		{ctx, fmt.Errorf("get: %w", Again(errors.New("truncated"))), true},
	} {
		if got := b.Retryable(tc.ctx, nil, tc.err); got != tc.want {
			t.Errorf("Retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if Again(nil) != nil || Stop(nil) != nil {
		t.Error("a marked nil is not nil")
	}
}

// timeoutErr is an attempt's time limit as net/http reports it: a
// net.Error that times out and matches context.DeadlineExceeded.
type timeoutErr struct{}

func (timeoutErr) Error() string {
	return "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
}
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }
func (timeoutErr) Is(err error) bool {
	return err == context.DeadlineExceeded
}

func TestDo(t *testing.T) {
	ctx := context.Background()
	b := Budget{Attempts: 4, MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, MaxElapsed: 10 * time.Second}
	answer := func(code int) (*http.Response, error) {
		return &http.Response{StatusCode: code, Status: http.StatusText(code), Header: http.Header{}}, errors.New(http.StatusText(code))
	}
	// Two 503s, then done: three attempts, two retries heard of.
	var retries []int
	n, err := b.Do(ctx, func(_ context.Context, n int) (*http.Response, error) {
		if n <= 2 {
			return answer(503)
		}
		return nil, nil
	}, func(n int, wait time.Duration, err error) { retries = append(retries, n) })
	if n != 3 || err != nil || fmt.Sprint(retries) != "[1 2]" {
		t.Errorf("503, 503, ok: %d attempts, %v, retries %v", n, err, retries)
	}
	// Always 502: all four attempts, the last error.
	n, err = b.Do(ctx, func(context.Context, int) (*http.Response, error) { return answer(502) }, nil)
	if n != 4 || err == nil || err.Error() != "Bad Gateway" {
		t.Errorf("always 502: %d attempts, %v", n, err)
	}
	// A 404 is an answer: one attempt.
	if n, _ := b.Do(ctx, func(context.Context, int) (*http.Response, error) { return answer(404) }, nil); n != 1 {
		t.Errorf("404: %d attempts", n)
	}
	// A Retry-After longer than what is left of MaxElapsed: no wait, give
	// up at once with the answer.
	short := b
	short.MaxElapsed, short.MaxRetryAfter = 200*time.Millisecond, time.Minute
	start := time.Now()
	n, err = short.Do(ctx, func(context.Context, int) (*http.Response, error) {
		resp, err := answer(429)
		resp.Header.Set("Retry-After", "30")
		return resp, err
	}, nil)
	if n != 1 || err == nil || time.Since(start) > 150*time.Millisecond {
		t.Errorf("429 Retry-After 30 s in a 200 ms budget: %d attempts in %v, %v", n, time.Since(start), err)
	}
	// A context cancelled while waiting: its error, joined with the last
	// attempt's.
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	slow := Budget{Attempts: 3, MinBackoff: time.Hour, MaxBackoff: time.Hour}
	_, err = slow.Do(cctx, func(context.Context, int) (*http.Response, error) { return answer(500) }, nil)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "Internal Server Error") {
		t.Errorf("cancelled while waiting: %v", err)
	}
}
