package regtest

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
)

// Proxy is a reverse proxy in front of a test registry that passes every
// answer through Modify: a registry that misbehaves in one chosen way (a
// tag list linking to itself, an index too large), everything else the
// real registry's.
type Proxy struct {
	Host string // 127.0.0.1:port

	mu   sync.Mutex
	reqs map[string]int
}

// StartProxy starts a proxy to the registry at upstream (host:port) on a
// free port of 127.0.0.1. modify, when not nil, may change each answer
// (headers, status, body) before it is sent; the request is resp.Request.
func StartProxy(tb testing.TB, upstream string, modify func(*http.Response) error) *Proxy {
	tb.Helper()
	u, err := url.Parse("http://" + upstream)
	if err != nil {
		tb.Fatalf("regtest: proxy: %v", err)
	}
	p := &Proxy{reqs: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = modify
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("regtest: proxy: %v", err)
	}
	p.Host = ln.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.reqs[r.Method+" "+r.URL.Path]++
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Close() })
	return p
}

// Requests returns how many requests the proxy passed per "METHOD PATH"
// since the last call, and starts counting again.
func (p *Proxy) Requests() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.reqs
	p.reqs = map[string]int{}
	return out
}
