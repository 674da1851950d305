package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// limiter is a token bucket (rate, burst) plus a concurrency semaphore shared
// by every request of one Client.
type limiter struct {
	rps   float64 // <= 0: no rate limit
	burst float64
	sem   chan struct{}

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func newLimiter(rps float64, concurrency int) *limiter {
	l := &limiter{rps: rps, burst: math.Max(1, math.Min(rps, 10)), sem: make(chan struct{}, concurrency)}
	l.tokens = l.burst
	l.last = time.Now()
	return l
}

// wait blocks until a request may start, honouring ctx.
func (l *limiter) wait(ctx context.Context) error {
	if l.rps <= 0 {
		return nil
	}
	for {
		l.mu.Lock()
		now := time.Now()
		l.tokens = math.Min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rps)
		l.last = now
		if l.tokens >= 1 {
			l.tokens--
			l.mu.Unlock()
			return nil
		}
		need := time.Duration((1 - l.tokens) / l.rps * float64(time.Second))
		l.mu.Unlock()
		t := time.NewTimer(need)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (l *limiter) acquire(ctx context.Context) error {
	select {
	case l.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *limiter) release() { <-l.sem }

// limitedTransport applies the limiter to every single HTTP attempt (so
// retries are rate limited too) and logs method, host, path and status only.
type limitedTransport struct {
	base http.RoundTripper
	lim  *limiter
	logf func(format string, args ...any)
}

func (t *limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if err := t.lim.wait(ctx); err != nil {
		return nil, err
	}
	if err := t.lim.acquire(ctx); err != nil {
		return nil, err
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		t.lim.release()
		if t.logf != nil {
			t.logf("http %s %s://%s%s: %v", req.Method, req.URL.Scheme, req.URL.Host, req.URL.Path, err)
		}
		return nil, err
	}
	if t.logf != nil {
		t.logf("http %s %s%s -> %d", req.Method, req.URL.Host, req.URL.Path, resp.StatusCode)
	}
	resp.Body = &releaseBody{ReadCloser: resp.Body, release: t.lim.release}
	return resp, nil
}

// releaseBody frees the concurrency slot when the caller closes the body.
type releaseBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releaseBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

// retryTransport retries replayable requests (no body, or a body with
// GetBody) with go-retryablehttp: exponential backoff with full jitter,
// Retry-After honoured on 429 and 503, retries on connection errors, 429 and
// 5xx except 501. Requests with a streaming body (blob PATCH/PUT) get one
// attempt; buffering a whole layer in memory to replay it is not acceptable,
// so those are retried a level up (the blob upload is restarted after an
// existence check; see Client.UploadBlob).
type retryTransport struct {
	once   *http.Client // single attempt
	client *retryablehttp.Client
}

func newRetryTransport(inner http.RoundTripper, o Options) *retryTransport {
	rc := retryablehttp.NewClient()
	rc.HTTPClient = &http.Client{Transport: inner, CheckRedirect: noRedirectFollow}
	rc.Logger = nil
	rc.RetryMax = o.MaxRetries
	rc.RetryWaitMin = o.MinBackoff
	rc.RetryWaitMax = o.MaxBackoff
	rc.Backoff = backoff(o.MaxRetryAfter)
	rc.ErrorHandler = retryablehttp.PassthroughErrorHandler
	rc.CheckRetry = retryablehttp.DefaultRetryPolicy
	return &retryTransport{once: rc.HTTPClient, client: rc}
}

// noRedirectFollow leaves redirects to the caller (ggcr's transport follows
// blob redirects itself).
func noRedirectFollow(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return t.once.Transport.RoundTrip(req)
	}
	rreq, err := retryablehttp.FromRequest(req)
	if err != nil {
		return nil, fmt.Errorf("preparing retryable request: %w", err)
	}
	resp, err := t.client.Do(rreq)
	if err != nil {
		var uerr interface{ Unwrap() error }
		if errors.As(err, &uerr) {
			if inner := uerr.Unwrap(); inner != nil {
				return nil, inner
			}
		}
		return nil, err
	}
	return resp, nil
}

// backoff returns a retryablehttp.Backoff: on 429/503 with a Retry-After
// header (seconds or HTTP date) it waits that long (capped at maxRetryAfter);
// otherwise min*2^attempt capped at max, with full jitter.
func backoff(maxRetryAfter time.Duration) retryablehttp.Backoff {
	return func(min, max time.Duration, attempt int, resp *http.Response) time.Duration {
		if resp != nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
			if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
				if d > maxRetryAfter {
					d = maxRetryAfter
				}
				return d
			}
		}
		return jitter(min, max, attempt)
	}
}

// jitter is exponential backoff with full jitter in [min, min*2^attempt].
func jitter(min, max time.Duration, attempt int) time.Duration {
	if attempt > 30 {
		attempt = 30
	}
	ceil := float64(min) * math.Pow(2, float64(attempt))
	if ceil > float64(max) {
		ceil = float64(max)
	}
	if ceil <= float64(min) {
		return min
	}
	return min + time.Duration(rand.Int63n(int64(ceil)-int64(min)))
}

// parseRetryAfter reads a Retry-After value: delay-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		d := t.Sub(now)
		if d < 0 {
			d = 0
		}
		return d, true
	}
	return 0, false
}
