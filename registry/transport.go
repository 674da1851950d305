package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// The transport under go-containerregistry's auth transport, outermost
// first:
//
//	retryTransport  the one retry layer (Budget); a dead host fails fast
//	limitTransport  per registry host: request rate, requests awaiting an answer
//	schemeGuard     plain HTTP only to loopback hosts and named insecure registries
//	net/http        (Options.Base)

// InsecureError is a plain-HTTP request refused because its host is neither
// a loopback address nor a registry named as insecure. Credentials never
// travel in clear text to such a host.
type InsecureError struct {
	Host string
}

func (e *InsecureError) Error() string {
	return fmt.Sprintf("plain HTTP to %s refused: not a loopback address and not named as an insecure registry", e.Host)
}

// schemeGuard refuses plain HTTP to hosts allowHTTP does not accept. It sits
// under every other layer, so pings, token requests, redirects and blob
// uploads are all covered.
type schemeGuard struct {
	next      http.RoundTripper
	allowHTTP func(host string) bool
}

func (g schemeGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" && !g.allowHTTP(req.URL.Host) {
		closeBody(req)
		return nil, &InsecureError{Host: req.URL.Host}
	}
	return g.next.RoundTrip(req)
}

// hostLimits holds one limiter per registry host: a token bucket (every
// attempt counted, so retries are rate limited too) and a cap on requests
// awaiting an answer. A slot is held until the response headers arrive, not
// while a response body is read: a blob copied between registries is read
// from the source's response while the destination's PATCH holds its own
// slot, and holding both would let N downloads waiting for N uploads take
// every slot (the publish that stalled after 7 uploads).
type hostLimits struct {
	rps         float64 // > 0: every host; 0: DefaultMaxRPS except loopback; < 0: none
	concurrency int

	mu    sync.Mutex
	hosts map[string]*hostLimiter
}

type hostLimiter struct {
	rate *rate.Limiter // nil: no rate limit
	sem  chan struct{}
}

func (h *hostLimits) get(host string) *hostLimiter {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l, ok := h.hosts[host]; ok {
		return l
	}
	l := &hostLimiter{sem: make(chan struct{}, h.concurrency)}
	rps := h.rps
	if rps == 0 {
		rps = DefaultMaxRPS
		if IsLoopback(host) {
			rps = -1
		}
	}
	if rps > 0 {
		l.rate = rate.NewLimiter(rate.Limit(rps), int(max(1, min(rps, 10))))
	}
	h.hosts[host] = l
	return l
}

type limitTransport struct {
	next   http.RoundTripper
	limits *hostLimits
	logf   func(format string, args ...any)
	stall  time.Duration // a response body silent this long is cut
	answer time.Duration // Budget.AnswerTimeout
}

// answerByKey is the context key of the time a bodiless request's budget
// ends (retryTransport sets it; limitTransport bounds the wait for an
// answer by it).
type answerByKey struct{}

// NoAnswerError is a request whose host accepted (or never completed) the
// connection and sent no answer in time.
type NoAnswerError struct {
	Host  string
	After time.Duration
}

func (e *NoAnswerError) Error() string {
	return fmt.Sprintf("registry host %s sent no answer in %s", e.Host, e.After.Round(time.Millisecond))
}

var errNoAnswer = errors.New("no answer")

// cancelOnClose cancels a request's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

// roundTripAnswered sends req and waits for its answer's headers at most
// until the request's budget ends or t.answer passes, whichever is first
// (bodiless requests only: those retryTransport marks with answerByKey).
// The timer starts once the request holds its host's slot, so time spent
// queued behind the concurrency limit does not count.
func (t *limitTransport) roundTripAnswered(req *http.Request) (*http.Response, error) {
	by, ok := req.Context().Value(answerByKey{}).(time.Time)
	if !ok || t.answer <= 0 {
		return t.next.RoundTrip(req)
	}
	d := min(t.answer, time.Until(by))
	if d <= 0 {
		return nil, &NoAnswerError{Host: req.URL.Host, After: 0}
	}
	actx, cancel := context.WithCancelCause(req.Context())
	timer := time.AfterFunc(d, func() { cancel(errNoAnswer) })
	resp, err := t.next.RoundTrip(req.WithContext(actx))
	fired := !timer.Stop()
	if fired && req.Context().Err() == nil && errors.Is(context.Cause(actx), errNoAnswer) {
		if err == nil {
			resp.Body.Close()
		}
		cancel(nil)
		return nil, &NoAnswerError{Host: req.URL.Host, After: d}
	}
	if err != nil {
		cancel(nil)
		return nil, err
	}
	resp.Body = cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	l := t.limits.get(req.URL.Host)
	if l.rate != nil {
		if err := l.rate.Wait(ctx); err != nil {
			closeBody(req)
			return nil, err
		}
	}
	select {
	case l.sem <- struct{}{}:
	case <-ctx.Done():
		closeBody(req)
		return nil, ctx.Err()
	}
	start := time.Now()
	resp, err := t.roundTripAnswered(req)
	<-l.sem
	if err == nil && t.stall > 0 {
		resp.Body = newStallBody(resp.Body, t.stall)
	}
	if t.logf != nil {
		if err != nil {
			t.logf("http %s %s%s: %v", req.Method, req.URL.Host, req.URL.Path, err)
		} else {
			t.logf("http %s %s%s -> %d (%s)", req.Method, req.URL.Host, req.URL.Path, resp.StatusCode, time.Since(start).Round(time.Millisecond))
		}
	}
	return resp, err
}

// StalledError is a response body that sent nothing for a while: its
// connection is closed so the read fails instead of waiting for ever (the
// request a blob is copied into then fails and is retried).
type StalledError struct{ After time.Duration }

func (e *StalledError) Error() string {
	return fmt.Sprintf("response body stalled: no data for %s", e.After)
}

// stallBody closes its body when no Read returned data for d.
type stallBody struct {
	rc      io.ReadCloser
	d       time.Duration
	timer   *time.Timer
	stalled atomic.Bool
}

func newStallBody(rc io.ReadCloser, d time.Duration) *stallBody {
	b := &stallBody{rc: rc, d: d}
	b.timer = time.AfterFunc(d, func() {
		b.stalled.Store(true)
		_ = rc.Close()
	})
	return b
}

func (b *stallBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.timer.Reset(b.d)
	}
	if err != nil && !errors.Is(err, io.EOF) && b.stalled.Load() {
		return n, &StalledError{After: b.d}
	}
	return n, err
}

func (b *stallBody) Close() error {
	b.timer.Stop()
	return b.rc.Close()
}

// GaveUpError is a request that failed on every attempt its budget allowed.
type GaveUpError struct {
	Attempts int
	Elapsed  time.Duration
	Err      error
}

func (e *GaveUpError) Error() string {
	return fmt.Sprintf("gave up after %d attempt(s) in %s: %v", e.Attempts, e.Elapsed.Round(10*time.Millisecond), e.Err)
}

func (e *GaveUpError) Unwrap() error { return e.Err }

// UnreachableError is a request not sent because its host refused every
// connection of an earlier request's whole budget a short while ago.
type UnreachableError struct {
	Host  string
	Until time.Time
	Err   error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("registry host %s unreachable (not retried before %s): %v", e.Host, e.Until.Format(time.TimeOnly), e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// retryTransport is the one retry layer (see Budget).
type retryTransport struct {
	next   http.RoundTripper
	budget Budget
	logf   func(format string, args ...any)
	now    func() time.Time

	mu   sync.Mutex
	down map[string]*UnreachableError // host -> why it is skipped, until when
}

func newRetryTransport(next http.RoundTripper, b Budget, logf func(string, ...any)) *retryTransport {
	return &retryTransport{next: next, budget: b.withDefaults(), logf: logf, now: time.Now, down: map[string]*UnreachableError{}}
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	host := req.URL.Host
	if err := t.hostDown(host); err != nil {
		closeBody(req)
		return nil, err
	}
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		// The body cannot be read again: one attempt.
		return t.next.RoundTrip(req)
	}
	start := t.now()
	deadline := start.Add(t.budget.MaxElapsed)
	if req.Body == nil || req.Body == http.NoBody {
		req = req.WithContext(context.WithValue(ctx, answerByKey{}, deadline))
	}
	onlyDialErrors := true
	for attempt := 1; ; attempt++ {
		resp, err := t.attempt(req, attempt)
		if !t.retryable(ctx, resp, err) {
			return resp, err
		}
		onlyDialErrors = onlyDialErrors && err != nil && (dialError(err) || noAnswer(err))
		wait, giveUp := t.nextWait(attempt, deadline, resp)
		if giveUp {
			if err == nil {
				return resp, nil // the caller reads the registry's own error
			}
			gerr := &GaveUpError{Attempts: attempt, Elapsed: t.now().Sub(start), Err: err}
			if onlyDialErrors {
				t.markDown(host, gerr)
			}
			return nil, gerr
		}
		t.logRetry(req, attempt, wait, resp, err)
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, errors.Join(ctx.Err(), err)
		case <-timer.C:
		}
	}
}

// retryable reports whether an attempt's outcome is worth another one.
func (t *retryTransport) retryable(ctx context.Context, resp *http.Response, err error) bool {
	if err == nil {
		return retryStatus(resp.StatusCode)
	}
	var bodyErr *rereadError
	return !errors.As(err, &bodyErr) && retryError(ctx, err)
}

// next_ returns the wait before the attempt after attempt, or giveUp when
// the budget has no room for it.
func (t *retryTransport) nextWait(attempt int, deadline time.Time, resp *http.Response) (time.Duration, bool) {
	if attempt >= t.budget.Attempts {
		return 0, true
	}
	wait := t.budget.wait(attempt+1, resp, t.now())
	return wait, t.now().Add(wait).After(deadline)
}

// logRetry logs a retry and drains the failed answer.
func (t *retryTransport) logRetry(req *http.Request, attempt int, wait time.Duration, resp *http.Response, err error) {
	why := ""
	if err != nil {
		why = err.Error()
	} else {
		why = resp.Status
		drain(resp)
	}
	if t.logf != nil {
		t.logf("retry %s %s%s in %s (attempt %d of %d): %s", req.Method, req.URL.Host, req.URL.Path, wait.Round(time.Millisecond), attempt+1, t.budget.Attempts, why)
	}
}

// attempt sends attempt number n of req. The first attempt sends req as
// given; later ones a copy with a fresh body from GetBody. A blob upload
// PATCH is retried on a new upload session: the registry may have kept part
// of the failed attempt's body in the old one.
func (t *retryTransport) attempt(req *http.Request, n int) (*http.Response, error) {
	if n == 1 {
		return t.next.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, &rereadError{err: err}
		}
		r.Body = body
	}
	if req.Method == http.MethodPut && isUploadSession(req.URL) && req.URL.Query().Get("digest") != "" {
		return t.retryCommit(req, r)
	}
	if req.Method != http.MethodPatch || !isUploadSession(req.URL) {
		return t.next.RoundTrip(r)
	}
	loc, resp, err := t.newUploadSession(req)
	if err != nil || resp != nil {
		closeBody(r)
		return resp, err
	}
	r.URL = loc
	r.Host = ""
	return t.next.RoundTrip(r)
}

// retryCommit sends r, a blob upload's commit (PUT ...?digest=) again. When
// the registry refuses it as a client error, the earlier attempt may have
// committed the blob before its answer was lost (the session is then gone):
// if the repository has the blob, the commit is answered as done.
func (t *retryTransport) retryCommit(req, r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil || resp.StatusCode < 400 || resp.StatusCode >= 500 {
		return resp, err
	}
	dg := req.URL.Query().Get("digest")
	u := *req.URL
	u.Path = u.Path[:strings.LastIndex(u.Path, "/blobs/uploads/")] + "/blobs/" + dg
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	head, herr := http.NewRequestWithContext(req.Context(), http.MethodHead, u.String(), nil)
	if herr != nil {
		return resp, nil
	}
	for _, h := range []string{"Authorization", "User-Agent"} {
		if v := req.Header.Get(h); v != "" {
			head.Header.Set(h, v)
		}
	}
	hresp, herr := t.next.RoundTrip(head)
	if herr != nil {
		return resp, nil
	}
	drain(hresp)
	if hresp.StatusCode != http.StatusOK {
		return resp, nil
	}
	drain(resp)
	hdr := http.Header{}
	hdr.Set("Docker-Content-Digest", dg)
	hdr.Set("Location", u.Path)
	return &http.Response{Status: "201 Created", StatusCode: http.StatusCreated, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: hdr, Body: http.NoBody, Request: r}, nil
}

// rereadError is a failure to get a request body again (for a blob, to
// fetch it again from its source): the source's own requests have had their
// budget already, so it is not retried here.
type rereadError struct{ err error }

func (e *rereadError) Error() string { return "reading the request body again: " + e.err.Error() }
func (e *rereadError) Unwrap() error { return e.err }

// isUploadSession reports whether u is a blob upload session URL,
// /v2/<name>/blobs/uploads/<id>.
func isUploadSession(u *url.URL) bool {
	i := strings.LastIndex(u.Path, "/blobs/uploads/")
	return strings.HasPrefix(u.Path, "/v2/") && i >= 0 && len(u.Path) > i+len("/blobs/uploads/")
}

// newUploadSession starts a new blob upload in the repository of the upload
// session req was sent to and returns its location. When the registry does
// not answer 202, that answer is returned as resp for the caller to judge.
func (t *retryTransport) newUploadSession(req *http.Request) (*url.URL, *http.Response, error) {
	u := *req.URL
	u.Path = u.Path[:strings.LastIndex(u.Path, "/blobs/uploads/")+len("/blobs/uploads/")]
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	post, err := http.NewRequestWithContext(req.Context(), http.MethodPost, u.String(), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("starting a new upload session: %w", err)
	}
	for _, h := range []string{"Authorization", "User-Agent"} {
		if v := req.Header.Get(h); v != "" {
			post.Header.Set(h, v)
		}
	}
	resp, err := t.next.RoundTrip(post)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusAccepted {
		return nil, resp, nil
	}
	defer drain(resp)
	loc, err := u.Parse(resp.Header.Get("Location"))
	if err != nil || resp.Header.Get("Location") == "" {
		return nil, nil, &rereadError{err: fmt.Errorf("new upload session: bad Location %q", resp.Header.Get("Location"))}
	}
	if loc.Host != req.URL.Host || loc.Scheme != req.URL.Scheme {
		return nil, nil, &rereadError{err: fmt.Errorf("new upload session moved to %s://%s; not followed", loc.Scheme, loc.Host)}
	}
	return loc, nil, nil
}

func (t *retryTransport) hostDown(host string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.down[host]
	if !ok {
		return nil
	}
	if t.now().After(e.Until) {
		delete(t.down, host)
		return nil
	}
	return e
}

// noAnswer reports whether err is a host that sent no answer in time.
func noAnswer(err error) bool {
	var na *NoAnswerError
	return errors.As(err, &na)
}

// markDown makes requests to host fail at once for one budget's time: a
// host that refused every connection (or answered none) of a whole budget
// is dead, and a run over thousands of images must not pay the budget again
// for each.
func (t *retryTransport) markDown(host string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.down[host] = &UnreachableError{Host: host, Until: t.now().Add(t.budget.MaxElapsed), Err: err}
}

// drain reads a little of a response body (so the connection can be
// reused) and closes it.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}

// closeBody closes a request body a RoundTripper will not send, as the
// RoundTripper contract requires.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
