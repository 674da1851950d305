package registry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Budget is the one retry policy of every registry request swebuild makes.
// It is applied in exactly one place, the client's transport (see
// retryTransport); go-containerregistry's own retries are switched off and
// nothing above the transport retries again.
//
// A request is attempted at most Attempts times (the first try included)
// and for at most MaxElapsed in total, waits included. Between attempts it
// waits for the registry's Retry-After (429 and 503; capped at
// MaxRetryAfter) or else an exponential backoff with full jitter in
// [MinBackoff, MinBackoff*2^(attempt-1)], capped at MaxBackoff. A wait that
// would end after MaxElapsed is not started: the request gives up at once
// with the last answer.
//
// Retried: connection errors (refused, reset, EOF, timeouts) and the
// statuses in RetryStatuses. Never retried: other 4xx, 501, TLS and
// certificate errors, a cancelled context.
//
// An attempt waits at most AnswerTimeout to connect and send its headers,
// and again for the registry's answer (its status line and headers) once
// the request is sent, neither wait past the request's MaxElapsed; a blob
// upload's PATCH and commit (PUT ...?digest=, which the registry answers
// after storing or checking the data) wait at most CommitAnswerTimeout for
// their answer. A host that never answered any attempt of a
// whole request (connections refused, or accepted and left silent) is
// marked down: requests to it fail at once for MaxElapsed.
//
// A request whose body cannot be re-read (no GetBody) gets one attempt. A
// blob upload PATCH is retried on a fresh upload session with its body
// fetched again from GetBody (for a layer copied from another registry, a
// new GET of the blob): bodies are streamed, never buffered for replay.
type Budget struct {
	Attempts      int
	MaxElapsed    time.Duration
	MinBackoff    time.Duration
	MaxBackoff    time.Duration
	MaxRetryAfter time.Duration
	// AnswerTimeout and CommitAnswerTimeout bound one attempt's wait for
	// an answer after the request was sent.
	AnswerTimeout       time.Duration
	CommitAnswerTimeout time.Duration
}

// DefaultBudget is the budget of `swebuild publish` and every other command
// talking to registries: 8 attempts within 60 s. A registry that refuses
// connections fails a request after 7 waits of at most 0.5 + 1 + 2 + 2 + 2
// + 2 + 2 s (MaxWaits: 11.5 s); one that accepts connections and never
// answers, after 3 attempts of at most 20 s, the last one cut at the 60 s
// of MaxElapsed. With 20% of
// requests failing at random, a request fails all 8 attempts once in about
// 400,000 (0.2^8).
var DefaultBudget = Budget{
	Attempts:            8,
	MaxElapsed:          60 * time.Second,
	MinBackoff:          250 * time.Millisecond,
	MaxBackoff:          2 * time.Second,
	MaxRetryAfter:       30 * time.Second,
	AnswerTimeout:       20 * time.Second,
	CommitAnswerTimeout: 2 * time.Minute,
}

// MaxWaits is the longest a request can spend waiting between attempts when
// the registry sends no Retry-After (a dead registry): the sum of the
// backoff ceilings, capped at MaxElapsed.
func (b Budget) MaxWaits() time.Duration {
	b = b.withDefaults()
	var sum time.Duration
	for n := 1; n < b.Attempts; n++ {
		ceil := b.MinBackoff
		for i := 0; i < n && ceil < b.MaxBackoff; i++ {
			ceil *= 2
		}
		sum += min(ceil, b.MaxBackoff)
	}
	return min(sum, b.MaxElapsed)
}

// RetryStatuses are the HTTP statuses a request is retried on.
var RetryStatuses = []int{
	http.StatusRequestTimeout,      // 408
	http.StatusTooManyRequests,     // 429
	http.StatusInternalServerError, // 500
	http.StatusBadGateway,          // 502
	http.StatusServiceUnavailable,  // 503
	http.StatusGatewayTimeout,      // 504
}

// withDefaults fills zero fields from DefaultBudget.
func (b Budget) withDefaults() Budget {
	d := DefaultBudget
	if b.Attempts <= 0 {
		b.Attempts = d.Attempts
	}
	if b.MaxElapsed <= 0 {
		b.MaxElapsed = d.MaxElapsed
	}
	if b.MinBackoff <= 0 {
		b.MinBackoff = d.MinBackoff
	}
	if b.MaxBackoff <= 0 {
		b.MaxBackoff = d.MaxBackoff
	}
	if b.MaxBackoff < b.MinBackoff {
		b.MaxBackoff = b.MinBackoff
	}
	if b.MaxRetryAfter <= 0 {
		b.MaxRetryAfter = d.MaxRetryAfter
	}
	if b.AnswerTimeout <= 0 {
		b.AnswerTimeout = d.AnswerTimeout
	}
	if b.CommitAnswerTimeout <= 0 {
		b.CommitAnswerTimeout = max(d.CommitAnswerTimeout, b.AnswerTimeout)
	}
	return b
}

// retryStatus reports whether a response status is worth another attempt.
func retryStatus(code int) bool {
	for _, c := range RetryStatuses {
		if c == code {
			return true
		}
	}
	return false
}

// retryError reports whether a transport error is worth another attempt.
func retryError(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var (
		rh   tls.RecordHeaderError
		cv   *tls.CertificateVerificationError
		ua   x509.UnknownAuthorityError
		hn   x509.HostnameError
		ci   x509.CertificateInvalidError
		insc *InsecureError
	)
	if errors.As(err, &rh) || errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci) || errors.As(err, &insc) {
		return false
	}
	// net/http turns a TLS handshake answered in plain HTTP into an
	// untyped error.
	return !strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")
}

// wait returns how long to wait before attempt number next (2, 3, ...)
// after resp (nil after a connection error).
func (b Budget) wait(next int, resp *http.Response, now time.Time) time.Duration {
	if resp != nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), now); ok {
			return min(d, b.MaxRetryAfter)
		}
	}
	return jitter(b.MinBackoff, b.MaxBackoff, next-1)
}

// jitter is exponential backoff with full jitter in
// [lo, min(lo*2^n, hi)].
func jitter(lo, hi time.Duration, n int) time.Duration {
	ceil := lo
	for i := 0; i < n && ceil < hi; i++ {
		ceil *= 2
	}
	ceil = min(ceil, hi)
	if ceil <= lo {
		return lo
	}
	return lo + rand.N(ceil-lo+1)
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
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// dialError reports whether err is a failure to connect at all (as opposed
// to a connection that broke): what a dead registry gives.
func dialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
