// Package faultproxy is a test reverse proxy that sits in front of a registry
// on 127.0.0.1 and injects faults. Faults decided before the request is
// forwarded (the registry never sees it): 429 with Retry-After, 500/502/503,
// connection resets (in the middle of a request body when there is one) and
// slow responses. Faults after the registry acted: the request is forwarded
// whole and the registry's answer is lost, replaced by a 5xx (lost) or by a
// connection reset (lost-reset), or its body is cut half-way (cut-body: the
// status and headers arrive, then part of the body, then the connection
// closes). Faults are decided by a seeded RNG.
//
// The proxy counts requests per kind (blob HEAD, upload POST/PATCH/PUT,
// manifest PUT, ...), request body bytes sent upstream for blob uploads, per
// digest the blob commits forwarded to the registry (PUT ...?digest=) and those
// it answered 201. It stops by itself when the test that started it ends.
package faultproxy

import (
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Kind classifies a registry API request.
type Kind string

// Request kinds counted by the proxy.
const (
	KindPing         Kind = "ping"          // GET /v2/
	KindBlobHead     Kind = "blob-head"     // HEAD /v2/<name>/blobs/<digest>
	KindBlobGet      Kind = "blob-get"      // GET /v2/<name>/blobs/<digest>
	KindUploadPost   Kind = "upload-post"   // POST /v2/<name>/blobs/uploads/ (no mount)
	KindMountPost    Kind = "mount-post"    // POST /v2/<name>/blobs/uploads/?mount=
	KindUploadPatch  Kind = "upload-patch"  // PATCH /v2/<name>/blobs/uploads/<uuid>
	KindUploadPut    Kind = "upload-put"    // PUT /v2/<name>/blobs/uploads/<uuid>?digest=
	KindManifestHead Kind = "manifest-head" // HEAD /v2/<name>/manifests/<ref>
	KindManifestGet  Kind = "manifest-get"  // GET /v2/<name>/manifests/<ref>
	KindManifestPut  Kind = "manifest-put"  // PUT /v2/<name>/manifests/<ref>
	KindOther        Kind = "other"
)

// Classify returns the kind of a registry request.
func Classify(method string, u *url.URL) Kind {
	p := u.Path
	switch {
	case p == "/v2/" || p == "/v2":
		return KindPing
	case strings.Contains(p, "/blobs/uploads"):
		switch method {
		case http.MethodPost:
			if u.Query().Get("mount") != "" {
				return KindMountPost
			}
			return KindUploadPost
		case http.MethodPatch:
			return KindUploadPatch
		case http.MethodPut:
			return KindUploadPut
		}
	case strings.Contains(p, "/blobs/"):
		switch method {
		case http.MethodHead:
			return KindBlobHead
		case http.MethodGet:
			return KindBlobGet
		}
	case strings.Contains(p, "/manifests/"):
		switch method {
		case http.MethodHead:
			return KindManifestHead
		case http.MethodGet:
			return KindManifestGet
		case http.MethodPut:
			return KindManifestPut
		}
	}
	return KindOther
}

// Config sets the probability of each fault per request (0..1). The rates are
// checked in the order listed; their sum should stay <= 1.
type Config struct {
	Seed       int64
	Rate429    float64 // 429 Too Many Requests with Retry-After
	Rate500    float64
	Rate502    float64
	Rate503    float64 // 503 with Retry-After
	RateReset  float64 // connection reset; mid-body when the request has one
	RateSlow   float64 // delay SlowDelay, then forward normally
	SlowDelay  time.Duration
	RetryAfter string // Retry-After header value for 429/503; default "1"
	// After the registry acted on the whole request:
	RateLost      float64 // its answer replaced by a 500, 502 or 503 (no Retry-After)
	RateLostReset float64 // its answer replaced by a connection reset
	RateCutBody   float64 // its answer's body cut half-way (the connection closed); no body: a reset
	// FlipBlob, when set, is a blob digest whose every GET answer has one
	// byte flipped (wrong bytes from a broken source), counted in
	// Stats.FlippedGets.
	FlipBlob string
	// Challenge, when set, answers every request that carries no
	// Authorization header 401 with WWW-Authenticate: Basic realm=Challenge,
	// as a registry with a login does: a client that would send some
	// credential to any host that asks, sends it here.
	Challenge string
}

// Uniform returns a Config spreading total evenly over all six fault kinds.
func Uniform(seed int64, total float64) Config {
	r := total / 6
	return Config{Seed: seed, Rate429: r, Rate500: r, Rate502: r, Rate503: r, RateReset: r, RateSlow: r, SlowDelay: 150 * time.Millisecond}
}

// AllKinds returns a Config spreading total evenly over all nine fault kinds:
// the six of Uniform and the three after the registry acted (lost answer,
// lost by a reset, body cut).
func AllKinds(seed int64, total float64) Config {
	r := total / 9
	c := Uniform(seed, 0)
	c.Rate429, c.Rate500, c.Rate502, c.Rate503, c.RateReset, c.RateSlow = r, r, r, r, r, r
	c.RateLost, c.RateLostReset, c.RateCutBody = r, r, r
	return c
}

// Stats is a snapshot of the proxy counters.
type Stats struct {
	Requests         map[Kind]int   // requests received, by kind (faulted or not)
	Forwarded        map[Kind]int   // requests forwarded upstream, by kind
	Faults           map[string]int // faults injected, by fault name
	UploadBodyBytes  int64          // request body bytes forwarded upstream for PATCH/PUT uploads
	CompletedUploads map[string]int // digest -> upload PUTs answered 201 by the registry
	CommitPuts       map[string]int // digest -> upload PUTs forwarded to the registry (whatever it answered)
	FlippedGets      int            // GETs of Config.FlipBlob answered with a byte flipped
	Authorization    int            // requests that carried an Authorization header
}

// Total returns the sum of all request counts.
func (s Stats) Total() int {
	n := 0
	for _, v := range s.Requests {
		n += v
	}
	return n
}

// String renders the counters in a stable order.
func (s Stats) String() string {
	var keys []string
	for k, v := range s.Requests {
		keys = append(keys, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(keys)
	var faults []string
	for k, v := range s.Faults {
		faults = append(faults, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(faults)
	return fmt.Sprintf("requests[%s] faults[%s] upload-bytes=%d authorization=%d", strings.Join(keys, " "), strings.Join(faults, " "), s.UploadBodyBytes, s.Authorization)
}

// Proxy is a running fault-injecting proxy.
type Proxy struct {
	// Host is host:port of the proxy on 127.0.0.1, usable as a registry host.
	Host string

	srv      *httptest.Server
	upstream *url.URL
	rp       *httputil.ReverseProxy

	mu    sync.Mutex
	cfg   Config
	rng   *rand.Rand
	stats Stats
}

// Start starts a proxy in front of upstream (host:port on 127.0.0.1, plain
// HTTP). It is closed when tb ends.
func Start(tb testing.TB, upstream string, cfg Config) *Proxy {
	tb.Helper()
	u, err := url.Parse("http://" + upstream)
	if err != nil {
		tb.Fatalf("faultproxy: parsing upstream %q: %v", upstream, err)
	}
	if h := u.Hostname(); h != "127.0.0.1" && h != "localhost" {
		tb.Fatalf("faultproxy: upstream %q is not on 127.0.0.1", upstream)
	}
	p := &Proxy{upstream: u}
	p.SetConfig(cfg)
	p.resetStatsLocked()
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			// Keep the client's Host so the registry builds upload
			// Location URLs that point back at the proxy.
			r.Out.Host = r.In.Host
		},
		ModifyResponse: p.observe,
		ErrorLog:       nil,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("faultproxy: listen: %v", err)
	}
	p.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second}}
	p.srv.Start()
	p.Host = ln.Addr().String()
	tb.Cleanup(p.Close)
	return p
}

// Close stops the proxy.
func (p *Proxy) Close() {
	p.srv.CloseClientConnections()
	p.srv.Close()
}

// SetConfig replaces the fault configuration and reseeds the RNG.
func (p *Proxy) SetConfig(cfg Config) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cfg.RetryAfter == "" {
		cfg.RetryAfter = "1"
	}
	if cfg.SlowDelay == 0 {
		cfg.SlowDelay = 150 * time.Millisecond
	}
	p.cfg = cfg
	p.rng = rand.New(rand.NewSource(cfg.Seed))
}

// Stats returns a copy of the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := Stats{Requests: map[Kind]int{}, Forwarded: map[Kind]int{}, Faults: map[string]int{}, CompletedUploads: map[string]int{}, UploadBodyBytes: p.stats.UploadBodyBytes, Authorization: p.stats.Authorization}
	for k, v := range p.stats.Requests {
		out.Requests[k] = v
	}
	for k, v := range p.stats.Forwarded {
		out.Forwarded[k] = v
	}
	for k, v := range p.stats.Faults {
		out.Faults[k] = v
	}
	for k, v := range p.stats.CompletedUploads {
		out.CompletedUploads[k] = v
	}
	out.FlippedGets = p.stats.FlippedGets
	out.CommitPuts = make(map[string]int, len(p.stats.CommitPuts))
	for k, v := range p.stats.CommitPuts {
		out.CommitPuts[k] = v
	}
	return out
}

// ResetStats zeroes the counters.
func (p *Proxy) ResetStats() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resetStatsLocked()
}

func (p *Proxy) resetStatsLocked() {
	p.stats = Stats{Requests: map[Kind]int{}, Forwarded: map[Kind]int{}, Faults: map[string]int{}, CompletedUploads: map[string]int{}, CommitPuts: map[string]int{}}
}

const (
	fault429   = "429"
	fault500   = "500"
	fault502   = "502"
	fault503   = "503"
	faultReset = "reset"
	faultSlow  = "slow"

	faultLost      = "lost"
	faultLostReset = "lost-reset"
	faultCutBody   = "cut-body"
)

// decide picks a fault (or "") for one request and counts it.
func (p *Proxy) decide(kind Kind) (string, Config, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Requests[kind]++
	c := p.cfg
	x := p.rng.Float64()
	cut := int64(p.rng.Intn(4096) + 1)
	fault := ""
	for _, f := range []struct {
		name string
		rate float64
	}{{fault429, c.Rate429}, {fault500, c.Rate500}, {fault502, c.Rate502}, {fault503, c.Rate503}, {faultReset, c.RateReset}, {faultSlow, c.RateSlow},
		{faultLost, c.RateLost}, {faultLostReset, c.RateLostReset}, {faultCutBody, c.RateCutBody}} {
		if x < f.rate {
			fault = f.name
			break
		}
		x -= f.rate
	}
	if fault != "" {
		p.stats.Faults[fault]++
	}
	return fault, c, cut
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	kind := Classify(r.Method, r.URL)
	fault, cfg, cut := p.decide(kind)
	if r.Header.Get("Authorization") != "" {
		p.mu.Lock()
		p.stats.Authorization++
		p.mu.Unlock()
	} else if cfg.Challenge != "" {
		w.Header().Set("WWW-Authenticate", `Basic realm="`+cfg.Challenge+`"`)
		http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
		return
	}
	switch fault {
	case fault429, fault503:
		w.Header().Set("Retry-After", cfg.RetryAfter)
		code := http.StatusTooManyRequests
		if fault == fault503 {
			code = http.StatusServiceUnavailable
		}
		w.Header().Set("Connection", "close")
		http.Error(w, `{"errors":[{"code":"TOOMANYREQUESTS","message":"injected"}]}`, code)
		return
	case fault500, fault502:
		code := http.StatusInternalServerError
		if fault == fault502 {
			code = http.StatusBadGateway
		}
		w.Header().Set("Connection", "close")
		http.Error(w, "injected fault", code)
		return
	case faultReset:
		if r.Body != nil {
			// Read part of the body so the reset lands mid-upload.
			_, _ = io.CopyN(io.Discard, r.Body, cut)
		}
		hj, ok := w.(http.Hijacker)
		if !ok {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		conn, _, err := hj.Hijack()
		if err != nil {
			return
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST instead of FIN
		}
		_ = conn.Close()
		return
	case faultSlow:
		select {
		case <-time.After(cfg.SlowDelay):
		case <-r.Context().Done():
			return
		}
	}
	if r.Body != nil && (kind == KindUploadPatch || kind == KindUploadPut) {
		r.Body = &countingBody{rc: r.Body, p: p}
	}
	p.mu.Lock()
	p.stats.Forwarded[kind]++
	if kind == KindUploadPut {
		p.stats.CommitPuts[r.URL.Query().Get("digest")]++
	}
	p.mu.Unlock()
	switch fault {
	case faultLost, faultLostReset:
		// The registry acts on the whole request; its answer is dropped.
		p.rp.ServeHTTP(&discardWriter{h: http.Header{}}, r)
		if fault == faultLostReset {
			resetConn(w)
			return
		}
		code := []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable}[cut%3]
		w.Header().Set("Connection", "close")
		http.Error(w, "injected: answer lost after the registry acted", code)
	case faultCutBody:
		cw := &cutWriter{ResponseWriter: w}
		p.rp.ServeHTTP(cw, r)
		if !cw.wrote {
			// Nothing of the body went out: the answer is lost whole.
			resetConn(w)
			return
		}
		// Flush what was written, then close: the client has the status,
		// the headers (Content-Length) and part of the body.
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
			}
		}
	default:
		if cfg.FlipBlob != "" && kind == KindBlobGet && strings.HasSuffix(r.URL.Path, "/blobs/"+cfg.FlipBlob) {
			p.mu.Lock()
			p.stats.FlippedGets++
			p.mu.Unlock()
			w = &flipWriter{ResponseWriter: w}
		}
		p.rp.ServeHTTP(w, r)
	}
}

// flipWriter flips the first byte of the body it passes on.
type flipWriter struct {
	http.ResponseWriter
	done bool
}

func (f *flipWriter) Write(b []byte) (int, error) {
	if !f.done && len(b) > 0 {
		f.done = true
		c := append([]byte(nil), b...)
		c[0] ^= 0xff
		return f.ResponseWriter.Write(c)
	}
	return f.ResponseWriter.Write(b)
}

func (f *flipWriter) Flush() {
	if fl, ok := f.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

// resetConn closes the client's connection with a reset, nothing answered.
func resetConn(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// discardWriter takes the registry's answer and drops it.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Flush()                      {}

// cutWriter passes the registry's status and headers through and the first
// half of its body (by Content-Length; at most 32 KiB), then drops the rest.
type cutWriter struct {
	http.ResponseWriter
	code  int
	left  int64
	wrote bool // some body bytes went to the client
}

func (c *cutWriter) WriteHeader(code int) {
	c.code = code
	n, _ := strconv.ParseInt(c.Header().Get("Content-Length"), 10, 64)
	c.left = min(n/2, 32<<10)
	if c.left > 0 {
		c.ResponseWriter.WriteHeader(code)
	}
}

func (c *cutWriter) Write(b []byte) (int, error) {
	if c.code == 0 {
		c.WriteHeader(http.StatusOK)
	}
	if c.left <= 0 {
		return len(b), nil
	}
	k := min(int64(len(b)), c.left)
	n, err := c.ResponseWriter.Write(b[:k])
	c.left -= int64(n)
	if n > 0 {
		c.wrote = true
	}
	if err != nil {
		return n, err
	}
	return len(b), nil
}

// Flush is not passed on: the reverse proxy flushes, which would write the
// headers of an answer that is to be lost.
func (c *cutWriter) Flush() {}

// observe records completed blob uploads.
func (p *Proxy) observe(resp *http.Response) error {
	req := resp.Request
	if Classify(req.Method, req.URL) == KindUploadPut && resp.StatusCode == http.StatusCreated {
		d := req.URL.Query().Get("digest")
		p.mu.Lock()
		p.stats.CompletedUploads[d]++
		p.mu.Unlock()
	}
	return nil
}

type countingBody struct {
	rc io.ReadCloser
	p  *Proxy
}

func (c *countingBody) Read(b []byte) (int, error) {
	n, err := c.rc.Read(b)
	if n > 0 {
		c.p.mu.Lock()
		c.p.stats.UploadBodyBytes += int64(n)
		c.p.mu.Unlock()
	}
	return n, err
}

func (c *countingBody) Close() error { return c.rc.Close() }
