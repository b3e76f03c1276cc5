package cluster

import (
	"fmt"
	"net"
)

// FreePorts returns n distinct loopback ports that were free a moment ago:
// it listens on 127.0.0.1:0 n times, holding every listener until all are
// open, then closes them. Another process may take a port before the node
// binds it; Start then fails with the node's log, and the caller may retry.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", Host+":0")
		if err != nil {
			return nil, fmt.Errorf("cluster: pick a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// checkPortFree fails with ErrPortInUse when port cannot be bound on Host.
// what names the port's use in the message, e.g. "n1 http".
func checkPortFree(port int, what string) error {
	l, err := net.Listen("tcp", hostPort(port))
	if err != nil {
		return fmt.Errorf("%w: port %d (%s) on %s: %v", ErrPortInUse, port, what, Host, err)
	}
	return l.Close()
}
