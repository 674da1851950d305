package faultproxy

import (
	"io"
	"net"
	"sync"
	"testing"
)

// The two hosts a client meets when a registry or download endpoint is
// down, without a proxy: one that refuses connections and one that takes
// them and never answers.

// Refused returns a loopback host:port nothing listens on (it was free a
// moment ago): connecting to it is refused.
func Refused(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("faultproxy: listening on loopback: %v", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		tb.Fatalf("faultproxy: closing %s: %v", addr, err)
	}
	return addr
}

// Silent returns the loopback host:port of a listener that accepts every
// connection, reads whatever is sent and never answers. The listener and its
// connections are closed when the test ends.
func Silent(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("faultproxy: listening on loopback: %v", err)
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
			go func() { _, _ = io.Copy(io.Discard, c) }() // read, never answer
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}
