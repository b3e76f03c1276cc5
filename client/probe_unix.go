//go:build unix

package client

import (
	"errors"
	"net"
	"syscall"
)

// canPeek: connUsable looks at a pooled connection without blocking, so
// the default HTTP client sends plain-HTTP requests itself
// (directTransport).
const canPeek = true

// connUsable reports whether a kept-alive connection may carry another
// request: nothing has arrived on it while it was idle, neither the
// server's close (a restarted node, an idle timeout) nor unasked-for
// bytes. One non-blocking peek at the socket; net/http's Transport learns
// the same from the reader goroutine it keeps on every connection.
func connUsable(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	usable := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, perr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// Nothing to read is the one good answer: 0 bytes is the
		// server's close, more is something no request asked for.
		usable = errors.Is(perr, syscall.EAGAIN) || errors.Is(perr, syscall.EWOULDBLOCK)
		return true
	})
	return err == nil && usable
}
