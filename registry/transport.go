package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/swebuild/swebuild/retry"
)

// The transport under go-containerregistry's auth transport, outermost
// first:
//
//	retryTransport  the one retry layer (Budget); a dead host fails fast
//	limitTransport  per registry host: request rate, requests awaiting an answer
//	answerTimer     an attempt waits at most the budget's AnswerTimeout for an answer
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
	resp, err := t.next.RoundTrip(req)
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
	budget retry.Budget
	logf   func(format string, args ...any)
	now    func() time.Time

	mu   sync.Mutex
	down map[string]*UnreachableError // host -> why it is skipped, until when
}

func newRetryTransport(next http.RoundTripper, b retry.Budget, logf func(string, ...any)) *retryTransport {
	return &retryTransport{next: next, budget: b.Or(DefaultBudget), logf: logf, now: time.Now, down: map[string]*UnreachableError{}}
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	host := req.URL.Host
	if err := t.hostDown(host); err != nil {
		closeBody(req)
		return nil, err
	}
	now := t.now()
	s := &tries{start: now, deadline: now.Add(t.budget.MaxElapsed), onlyDialErrors: true}
	// Every attempt's waits for an answer end with the budget
	// (answerTimer): a request is over within MaxElapsed.
	req = req.WithContext(context.WithValue(req.Context(), budgetDeadlineKey{}, s.deadline))
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		// The body cannot be read again: one attempt.
		return t.next.RoundTrip(req)
	}
	resp, err := t.loop(req, s)
	if err == nil && req.Method == http.MethodGet && resp.StatusCode == http.StatusOK && resp.Body != nil && resp.Body != http.NoBody {
		resp.Body = &resumeBody{t: t, req: req, s: s, rc: resp.Body, first: resp}
	}
	return resp, err
}

// tries is one request's use of its budget: attempts made, when it started
// and must end. A body cut mid-way resumes on the same budget.
type tries struct {
	n               int
	start, deadline time.Time
	onlyDialErrors  bool
}

// loop sends req until an answer is not worth another attempt or the
// budget is spent.
func (t *retryTransport) loop(req *http.Request, s *tries) (*http.Response, error) {
	ctx := req.Context()
	for {
		s.n++
		resp, err := t.attempt(req, s.n)
		if !t.retryable(ctx, resp, err) {
			return resp, err
		}
		s.onlyDialErrors = s.onlyDialErrors && err != nil && (dialError(err) || noAnswer(err))
		wait, giveUp := t.nextWait(s.n, s.deadline, resp)
		if giveUp {
			if err == nil {
				return resp, nil // the caller reads the registry's own error
			}
			gerr := &GaveUpError{Attempts: s.n, Elapsed: t.now().Sub(s.start), Err: err}
			if s.onlyDialErrors {
				t.markDown(req.URL.Host, gerr)
			}
			return nil, gerr
		}
		t.logRetry(req, s.n, wait, resp, err)
		if err := sleep(ctx, wait); err != nil {
			return nil, errors.Join(err, errOrStatus(resp, err))
		}
	}
}

func errOrStatus(resp *http.Response, err error) error {
	if err != nil || resp == nil {
		return err
	}
	return errors.New(resp.Status)
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// retryable reports whether an attempt's outcome is worth another one.
func (t *retryTransport) retryable(ctx context.Context, resp *http.Response, err error) bool {
	if err == nil {
		return t.budget.RetryStatus(resp.StatusCode)
	}
	var bodyErr *rereadError
	var dm *DigestMismatchError
	if errors.As(err, &dm) && dm.Fetches >= mismatchLimit {
		return false
	}
	return !errors.As(err, &bodyErr) && retryError(ctx, err)
}

// next_ returns the wait before the attempt after attempt, or giveUp when
// the budget has no room for it.
func (t *retryTransport) nextWait(attempt int, deadline time.Time, resp *http.Response) (time.Duration, bool) {
	if attempt >= t.budget.Attempts {
		return 0, true
	}
	wait := t.budget.Wait(attempt, resp, t.now())
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
// given; later ones a copy with a fresh body from GetBody.
//
// A blob commit (PUT ...?digest=) or a manifest PUT whose earlier attempt
// failed may have been carried out by the registry before its answer was
// lost: a later attempt first checks what landed (a HEAD of the blob, or of
// the manifest compared by digest) and answers for the registry when it is
// there, so nothing is committed twice. A blob upload PATCH is retried on a
// new upload session: the registry may have kept part of the failed
// attempt's body in the old one.
func (t *retryTransport) attempt(req *http.Request, n int) (*http.Response, error) {
	if n == 1 {
		return t.next.RoundTrip(req)
	}
	commit := req.Method == http.MethodPut && isUploadSession(req.URL) && req.URL.Query().Get("digest") != ""
	manifest := req.Method == http.MethodPut && isManifest(req.URL)
	if commit || manifest {
		resp, err, done := t.landed(req, commit)
		if done {
			return resp, err
		}
	}
	r := req.Clone(req.Context())
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, &rereadError{err: err}
		}
		r.Body = body
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

// landed checks with one HEAD whether an earlier attempt of req, a blob
// commit or a manifest PUT, was carried out. done reports that the attempt
// is over: the thing is there (resp is the 201 the registry would have
// sent) or the check itself failed in a way worth retrying (resp, err are
// that failure, for the budget to judge). When the check says it is not
// there, req is to be sent again.
func (t *retryTransport) landed(req *http.Request, commit bool) (resp *http.Response, err error, done bool) {
	u := *req.URL
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	var want string // the digest that must be there
	if commit {
		want = req.URL.Query().Get("digest")
		u.Path = u.Path[:strings.LastIndex(u.Path, "/blobs/uploads/")] + "/blobs/" + want
	} else {
		d, err := bodyDigest(req)
		if err != nil {
			return nil, nil, false // cannot tell: send it again
		}
		want = d
	}
	head, err := http.NewRequestWithContext(req.Context(), http.MethodHead, u.String(), nil)
	if err != nil {
		return nil, nil, false
	}
	for _, h := range []string{"Authorization", "User-Agent"} {
		if v := req.Header.Get(h); v != "" {
			head.Header.Set(h, v)
		}
	}
	if ct := req.Header.Get("Content-Type"); !commit && ct != "" {
		head.Header.Set("Accept", ct)
	}
	hresp, err := t.next.RoundTrip(head)
	if err != nil {
		return nil, fmt.Errorf("checking whether an earlier %s landed: %w", req.Method, err), retryError(req.Context(), err)
	}
	drain(hresp)
	switch {
	case hresp.StatusCode == http.StatusOK && (commit || hresp.Header.Get("Docker-Content-Digest") == want):
		hdr := http.Header{}
		hdr.Set("Docker-Content-Digest", want)
		hdr.Set("Location", u.Path)
		hdr.Set("Content-Length", "0")
		closeBody(req)
		return &http.Response{Status: "201 Created", StatusCode: http.StatusCreated, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: hdr, Body: http.NoBody, ContentLength: 0, Request: req}, nil, true
	case t.budget.RetryStatus(hresp.StatusCode):
		hresp.Body = http.NoBody
		return hresp, nil, true
	}
	return nil, nil, false
}

// bodyDigest is the sha256 digest of a manifest PUT's body, read again from
// GetBody (manifests are at most 4 MiB).
func bodyDigest(req *http.Request) (string, error) {
	if req.GetBody == nil {
		return "", errors.New("no body to read again")
	}
	body, err := req.GetBody()
	if err != nil {
		return "", err
	}
	defer body.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(body, 4<<20+1))
	if err != nil {
		return "", err
	}
	if n > 4<<20 {
		return "", errors.New("manifest over 4 MiB")
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// isManifest reports whether u is a manifest URL, /v2/<name>/manifests/<ref>.
func isManifest(u *url.URL) bool {
	i := strings.LastIndex(u.Path, "/manifests/")
	return strings.HasPrefix(u.Path, "/v2/") && i >= 0 && len(u.Path) > i+len("/manifests/")
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

// markDown makes requests to host fail at once for one budget's time: a
// host that refused every connection of a whole budget, or answered none of
// its attempts, is dead, and a run over thousands of images must not pay the
// budget again for each.
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

// resumeBody is the body of a GET answered 200. When it breaks off before
// its end (the connection cut or reset, or a stall), it is resumed on the
// request's budget: the GET is sent again with a Range from the first byte
// not yet read (or, when the registry ignores the Range or the body was
// decompressed in transit, whole, with the bytes already read skipped). The
// new answer must name the same content (Docker-Content-Digest, ETag) as the
// first. A caller reading a blob by digest (go-containerregistry) still
// checks the digest of all the bytes at the end.
type resumeBody struct {
	t     *retryTransport
	req   *http.Request
	s     *tries
	first *http.Response

	mu     sync.Mutex
	rc     io.ReadCloser
	read   int64
	closed bool
}

func (b *resumeBody) Read(p []byte) (int, error) {
	for {
		n, err := b.rc.Read(p)
		b.mu.Lock()
		b.read += int64(n)
		closed := b.closed
		b.mu.Unlock()
		if err == nil || errors.Is(err, io.EOF) || closed || !b.resumable(err) {
			return n, err
		}
		if rerr := b.resume(err); rerr != nil {
			return n, rerr
		}
		if n > 0 {
			return n, nil
		}
	}
}

func (b *resumeBody) resumable(err error) bool {
	ctx := b.req.Context()
	return ctx.Err() == nil && (errors.Is(err, io.ErrUnexpectedEOF) || retryError(ctx, err))
}

// resume replaces the broken body with the rest of a new answer.
func (b *resumeBody) resume(cause error) error {
	_ = b.rc.Close()
	t, ctx := b.t, b.req.Context()
	fail := func(err error) error {
		return &GaveUpError{Attempts: b.s.n, Elapsed: t.now().Sub(b.s.start), Err: fmt.Errorf("body of GET %s%s cut after %d bytes: %w", b.req.URL.Host, b.req.URL.Path, b.read, err)}
	}
	wait, giveUp := t.nextWait(b.s.n, b.s.deadline, nil)
	if giveUp {
		return fail(cause)
	}
	t.logRetry(b.req, b.s.n, wait, nil, fmt.Errorf("body cut after %d bytes: %w", b.read, cause))
	if err := sleep(ctx, wait); err != nil {
		return errors.Join(err, cause)
	}
	r := b.req.Clone(ctx)
	ranged := b.read > 0 && !b.first.Uncompressed
	if ranged {
		r.Header.Set("Range", fmt.Sprintf("bytes=%d-", b.read))
	}
	resp, err := t.loop(r, b.s)
	if err != nil {
		return err
	}
	for _, h := range []string{"Docker-Content-Digest", "ETag"} {
		if was, now := b.first.Header.Get(h), resp.Header.Get(h); was != "" && now != "" && was != now {
			drain(resp)
			return fail(fmt.Errorf("the content changed while it was read (%s %s, then %s)", h, was, now))
		}
	}
	switch {
	case resp.StatusCode == http.StatusPartialContent && ranged && strings.HasPrefix(resp.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-", b.read)):
	case resp.StatusCode == http.StatusOK:
		if _, err := io.CopyN(io.Discard, resp.Body, b.read); err != nil {
			_ = resp.Body.Close()
			return fail(fmt.Errorf("skipping the %d bytes already read: %w", b.read, err))
		}
	default:
		drain(resp)
		return fail(fmt.Errorf("resuming: %s", resp.Status))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		_ = resp.Body.Close()
		return errors.New("response body closed")
	}
	b.rc = resp.Body
	return nil
}

func (b *resumeBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return b.rc.Close()
}

// NoAnswerError is an attempt the registry did not answer (no status line)
// within the budget's AnswerTimeout after the request was sent.
type NoAnswerError struct {
	Host  string
	After time.Duration
}

func (e *NoAnswerError) Error() string {
	return fmt.Sprintf("registry host %s sent no answer within %s", e.Host, e.After)
}

func noAnswer(err error) bool {
	var na *NoAnswerError
	return errors.As(err, &na)
}

// budgetDeadlineKey is the context key of the time a request's budget ends
// (retryTransport sets it, answerTimer reads it).
type budgetDeadlineKey struct{}

// answerTimer bounds the two waits of an attempt on the registry: from the
// start until the request's headers are written (connecting, the TLS
// handshake), and from the end of its body until the answer's headers come;
// each AnswerTimeout at most, and never past the end of the request's
// budget (a blob upload's answer, CommitAnswerTimeout, excepted).
// Writing the body (a long upload) and reading the answer's body (a long
// download) are not timed here.
type answerTimer struct {
	next           http.RoundTripper
	answer, commit time.Duration // AnswerTimeout, CommitAnswerTimeout
}

func (a answerTimer) RoundTrip(req *http.Request) (*http.Response, error) {
	d := a.answer
	wait := d
	upload := (req.Method == http.MethodPut || req.Method == http.MethodPatch) && isUploadSession(req.URL)
	if upload {
		// The registry answers a blob upload's PATCH once the data is
		// stored, its commit once the blob is checked.
		wait = a.commit
	}
	if dl, ok := req.Context().Value(budgetDeadlineKey{}).(time.Time); ok {
		// No wait outlasts the request's budget (MaxElapsed), except a
		// blob upload's wait for the registry to store or check it.
		left := max(time.Until(dl), time.Millisecond)
		d = min(d, left)
		if !upload {
			wait = min(wait, left)
		}
	}
	start := time.Now()
	ctx, cancel := context.WithCancelCause(req.Context())
	var mu sync.Mutex
	done := false
	var timer *time.Timer
	arm := func(d time.Duration) {
		timer = time.AfterFunc(d, func() { cancel(&NoAnswerError{Host: req.URL.Host, After: d}) })
	}
	arm(d)
	trace := &httptrace.ClientTrace{
		WroteHeaders: func() {
			mu.Lock()
			defer mu.Unlock()
			if !done {
				timer.Stop()
			}
		},
		WroteRequest: func(httptrace.WroteRequestInfo) {
			mu.Lock()
			defer mu.Unlock()
			if !done {
				timer.Stop()
				arm(wait)
			}
		},
	}
	resp, err := a.next.RoundTrip(req.WithContext(httptrace.WithClientTrace(ctx, trace)))
	mu.Lock()
	done = true
	timer.Stop()
	mu.Unlock()
	if err != nil {
		cause := context.Cause(ctx)
		cancel(nil)
		if noAnswer(cause) {
			return nil, cause
		}
		var ne net.Error
		if req.Context().Err() == nil && errors.As(err, &ne) && ne.Timeout() && !dialError(err) {
			// net/http's own timeouts (the TLS handshake's): no answer either.
			return nil, fmt.Errorf("%w: %w", &NoAnswerError{Host: req.URL.Host, After: time.Since(start).Round(time.Millisecond)}, err)
		}
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelBody releases its request's context when closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}
