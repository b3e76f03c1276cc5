//go:build !unix

package client

import "net"

// canPeek is false: without a non-blocking peek a pooled connection the
// server closed while it was idle is found only by a request failing on
// it, which for a write in a session is an attempt the client counts.
// The default HTTP client leaves plain-HTTP requests to net/http's
// Transport here, whose reader goroutine notices the close.
const canPeek = false

// connUsable: without a non-blocking peek, a kept-alive connection is
// assumed usable; a request that finds it closed fails as in RoundTrip.
func connUsable(net.Conn) bool { return true }
