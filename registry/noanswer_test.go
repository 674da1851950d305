package registry

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

// silentListener accepts connections, reads what is sent and never
// answers: a registry host that is up but hung.
func silentListener(t *testing.T) (string, func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() { _, _ = c.Read(make([]byte, 64<<10)) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String(), func() int { mu.Lock(); defer mu.Unlock(); return len(conns) }
}

// A registry that accepts connections and never answers gives up within
// the budget (MaxElapsed, not the transport's two-minute header timeout per
// attempt) and is then marked down: the next request fails at once.
func TestSilentRegistryMarkedDownWithinBudget(t *testing.T) {
	host, conns := silentListener(t)
	budget := Budget{MaxElapsed: 2 * time.Second}
	c, err := New(Options{Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(host+"/x/y:latest", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	start := time.Now()
	_, err = c.Head(ctx, ref)
	elapsed := time.Since(start)
	if err == nil {
		t.Fatal("no error from a registry that never answers")
	}
	if ctx.Err() != nil || elapsed > budget.MaxElapsed+time.Second {
		t.Fatalf("gave up after %s (budget %s): %v", elapsed.Round(time.Millisecond), budget.MaxElapsed, err)
	}
	t.Logf("first request: %s, %d connection(s): %v", elapsed.Round(time.Millisecond), conns(), err)
	start = time.Now()
	_, err = c.Head(ctx, ref)
	var down *UnreachableError
	if !errors.As(err, &down) || time.Since(start) > 100*time.Millisecond {
		t.Errorf("second request after %s: %v; want it refused at once as unreachable", time.Since(start), err)
	}
}
