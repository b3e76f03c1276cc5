//go:build !unix

package client

import "net"

// connUsable: without a non-blocking peek, a kept-alive connection is
// assumed usable; a request that finds it closed fails as in RoundTrip.
func connUsable(net.Conn) bool { return true }
