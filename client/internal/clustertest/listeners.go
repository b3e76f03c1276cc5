package clustertest

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// ClosedEndpoint is the URL of a port nothing listens on any more, so
// connecting to it is refused.
func ClosedEndpoint(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	return "http://" + ln.Addr().String()
}

// HangupEndpoint accepts connections and closes them at once (EOF before
// any answer). It returns the URL and a counter of accepted connections.
func HangupEndpoint(t testing.TB) (string, *atomic.Int64) {
	return listen(t, func(c net.Conn) { c.Close() })
}

// StallEndpoint accepts connections and never answers on them, until the
// client closes them or the test ends. It returns the URL and a counter
// of accepted connections.
func StallEndpoint(t testing.TB) (string, *atomic.Int64) {
	return listen(t, func(c net.Conn) {
		defer c.Close()
		var b [512]byte
		for {
			if _, err := c.Read(b[:]); err != nil {
				return
			}
		}
	})
}

func listen(t testing.TB, handle func(net.Conn)) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { handle(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "http://" + ln.Addr().String(), &n
}
