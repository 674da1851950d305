// Package retry is swebuild's one retry budget: how many attempts one
// request of any client (the registry client, fetch's downloads, the
// dataset hub, publish's manifest PUTs) may make, how long each may wait
// for an answer, how long the whole request may take, which answers are
// worth another attempt and how long to wait before it. Each client has its
// own defaults (a Budget value); the decisions are written here once, and
// Do is the attempt loop of the clients that need no more than it.
//
// A request is attempted at most Attempts times (the first try included)
// and for at most MaxElapsed in total, waits included. Between attempts it
// waits for the server's Retry-After (429 and 503; capped at MaxRetryAfter)
// or else an exponential backoff with full jitter: after n failed attempts,
// a wait drawn from [MinBackoff, min(MinBackoff*2^n, MaxBackoff)]. A wait
// that would end after MaxElapsed is not started: the request gives up at
// once with the last answer.
//
// Retried: connection errors (refused, reset, EOF, timeouts), the statuses
// in Statuses, and errors marked Again. Never retried: other statuses, TLS
// and certificate errors, a cancelled context, errors marked Stop.
package retry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Budget bounds the attempts and time of one request. Zero fields take the
// client's defaults (Or).
type Budget struct {
	// Attempts is the most attempts, the first included.
	Attempts int
	// MaxElapsed is the most time the whole request may take, waits
	// included.
	MaxElapsed time.Duration
	// AnswerTimeout is how long one attempt waits for an answer (connected,
	// the status line and headers received).
	AnswerTimeout time.Duration
	// MinBackoff and MaxBackoff bound the backoff between attempts.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// MaxRetryAfter caps the wait a Retry-After asks for.
	MaxRetryAfter time.Duration
	// Statuses are the HTTP statuses worth another attempt; nil means
	// Statuses.
	Statuses []int
}

// Statuses are the HTTP statuses retried by default: a timeout, rate
// limiting and the server errors that are about the moment, not the
// request (not 501 Not Implemented, 505, 507 ...).
var Statuses = []int{
	http.StatusRequestTimeout,      // 408
	http.StatusTooManyRequests,     // 429
	http.StatusInternalServerError, // 500
	http.StatusBadGateway,          // 502
	http.StatusServiceUnavailable,  // 503
	http.StatusGatewayTimeout,      // 504
}

// IsZero reports whether b sets nothing (a caller's "use my defaults").
func (b Budget) IsZero() bool {
	return b.Attempts == 0 && b.MaxElapsed == 0 && b.AnswerTimeout == 0 && b.MinBackoff == 0 &&
		b.MaxBackoff == 0 && b.MaxRetryAfter == 0 && b.Statuses == nil
}

// Or fills b's zero fields from d (a client's defaults); a MaxBackoff
// below MinBackoff becomes MinBackoff.
func (b Budget) Or(d Budget) Budget {
	if b.Attempts <= 0 {
		b.Attempts = d.Attempts
	}
	if b.Attempts <= 0 {
		b.Attempts = 1
	}
	set := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&b.MaxElapsed, d.MaxElapsed)
	set(&b.AnswerTimeout, d.AnswerTimeout)
	set(&b.MinBackoff, d.MinBackoff)
	set(&b.MaxBackoff, d.MaxBackoff)
	set(&b.MaxRetryAfter, d.MaxRetryAfter)
	if b.MaxBackoff < b.MinBackoff {
		b.MaxBackoff = b.MinBackoff
	}
	if b.Statuses == nil {
		b.Statuses = d.Statuses
	}
	return b
}

// RetryStatus reports whether an answer with status code is worth another
// attempt.
func (b Budget) RetryStatus(code int) bool {
	if b.Statuses == nil {
		return slices.Contains(Statuses, code)
	}
	return slices.Contains(b.Statuses, code)
}

// Retryable reports whether an attempt's outcome is worth another one: an
// answer (resp, err nil or an error made of it) by its status, an error
// without an answer by Error.
func (b Budget) Retryable(ctx context.Context, resp *http.Response, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var st stop
	if errors.As(err, &st) {
		return false
	}
	var ag again
	if errors.As(err, &ag) {
		return true
	}
	if resp != nil {
		return b.RetryStatus(resp.StatusCode)
	}
	return Error(ctx, err)
}

// Wait is how long to wait after n failed attempts (n >= 1) whose last
// answer was resp (nil: none): the Retry-After of a 429 or 503, capped at
// MaxRetryAfter, or a backoff with full jitter in
// [MinBackoff, min(MinBackoff*2^n, MaxBackoff)].
func (b Budget) Wait(n int, resp *http.Response, now time.Time) time.Duration {
	if resp != nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		if d, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), now); ok {
			return min(d, b.MaxRetryAfter)
		}
	}
	lo, ceil := b.MinBackoff, b.ceiling(n)
	if ceil <= lo {
		return lo
	}
	return lo + rand.N(ceil-lo+1)
}

// ceiling is min(MinBackoff*2^n, MaxBackoff).
func (b Budget) ceiling(n int) time.Duration {
	ceil := b.MinBackoff
	for i := 0; i < n && ceil < b.MaxBackoff; i++ {
		ceil *= 2
	}
	return min(ceil, b.MaxBackoff)
}

// MaxWaits is the longest a request can spend waiting between attempts when
// the server sends no Retry-After (a dead server): the sum of the backoff
// ceilings, capped at MaxElapsed.
func (b Budget) MaxWaits() time.Duration {
	var sum time.Duration
	for n := 1; n < b.Attempts; n++ {
		sum += b.ceiling(n)
	}
	if b.MaxElapsed > 0 {
		sum = min(sum, b.MaxElapsed)
	}
	return sum
}

// ParseRetryAfter reads a Retry-After value: delay-seconds or an HTTP date
// (a date past is no wait).
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		if s > int64(time.Duration(1<<62)/time.Second) {
			return time.Duration(1 << 62), true
		}
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// Error reports whether an error with no answer is worth another attempt:
// yes for connection errors (refused, reset, EOF, an attempt's timeout),
// no for a cancelled or expired context, TLS and certificate errors and a
// TLS handshake answered in plain HTTP.
func Error(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	// An expired deadline is final, unless it is an attempt's own time
	// limit (a dial or http.Client timeout: a net.Error that says so).
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &ne) && ne.Timeout() && ne != context.DeadlineExceeded) {
		return false
	}
	var (
		rh tls.RecordHeaderError
		cv *tls.CertificateVerificationError
		ua x509.UnknownAuthorityError
		hn x509.HostnameError
		ci x509.CertificateInvalidError
		st stop
	)
	if errors.As(err, &rh) || errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci) || errors.As(err, &st) {
		return false
	}
	// net/http turns a TLS handshake answered in plain HTTP into an
	// untyped error.
	return !strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")
}

// again marks an error worth another attempt although it carries no
// retried status or connection error (a body cut short or corrupted).
type again struct{ err error }

func (e again) Error() string { return e.err.Error() }
func (e again) Unwrap() error { return e.err }

// Again marks err as worth another attempt (nil stays nil).
func Again(err error) error {
	if err == nil {
		return nil
	}
	return again{err}
}

// stop marks an error no attempt will mend.
type stop struct{ err error }

func (e stop) Error() string { return e.err.Error() }
func (e stop) Unwrap() error { return e.err }

// Stop marks err as final: it is not retried whatever it wraps (nil stays
// nil).
func Stop(err error) error {
	if err == nil {
		return nil
	}
	return stop{err}
}

// Do makes the attempts of one request within b: attempt gets the
// attempt's number (from 1) and returns its answer (nil when there was
// none; its body read or closed: Do only looks at the status and headers)
// and its error (nil: done). Do stops at the first success, at an outcome
// b.Retryable refuses, after b.Attempts attempts, or when the next wait
// would end after b.MaxElapsed from the start (an attempt itself is not
// cut: a caller bounds it, e.g. with AnswerTimeout). onRetry, if set, hears
// of each retry before its wait. Do returns the number of attempts made and
// the last attempt's error; a wait cut by ctx returns ctx's error joined
// with it.
func (b Budget) Do(ctx context.Context, attempt func(ctx context.Context, n int) (*http.Response, error), onRetry func(n int, wait time.Duration, err error)) (int, error) {
	start := time.Now()
	for n := 1; ; n++ {
		resp, err := attempt(ctx, n)
		if err == nil {
			return n, nil
		}
		if n >= b.Attempts || !b.Retryable(ctx, resp, err) {
			return n, err
		}
		wait := b.Wait(n, resp, time.Now())
		if b.MaxElapsed > 0 && time.Since(start)+wait > b.MaxElapsed {
			return n, err
		}
		if onRetry != nil {
			onRetry(n, wait, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return n, fmt.Errorf("%w (waiting to retry after: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}
