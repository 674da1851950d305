package faultproxy

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestRefused: connecting to the address is refused.
func TestRefused(t *testing.T) {
	addr := Refused(t)
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err == nil {
		c.Close()
		t.Fatalf("dialling %s succeeded", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dialling %s: %v, want connection refused", addr, err)
	}
}

// TestSilent: the connection is accepted and takes a request, no answer
// comes, and the connection is closed when the test that made the listener
// ends.
func TestSilent(t *testing.T) {
	var c net.Conn
	t.Run("listening", func(t *testing.T) {
		addr := Silent(t)
		var err error
		if c, err = net.DialTimeout("tcp", addr, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("GET /v2/ HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		if err := c.SetReadDeadline(time.Now().Add(300 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		n, err := c.Read(make([]byte, 1))
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("read %d bytes, %v; want no answer (deadline exceeded)", n, err)
		}
	})
	if c == nil {
		t.FailNow()
	}
	defer c.Close()
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("after the test: read %d bytes, %v; want the connection closed", n, err)
	}
}
