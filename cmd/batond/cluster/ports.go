package cluster

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// FreePorts returns n distinct loopback ports that were free a moment ago,
// all below the kernel's ephemeral range (ip_local_port_range), and holds
// none of them.
//
// Why below the range: a node's ports must stay free while the node is down.
// A chaos run SIGKILLs a node and restarts it on the same ports; in between,
// any outgoing connection on the machine (another test's clients, raft
// peers) could be given the port as its ephemeral source port if it were in
// the ephemeral range, and the restart would fail with "address already in
// use". Ports below the range are never handed out that way, so only another
// FreePorts caller's probe or a process that asks for the port by number can
// take it.
//
// Each port is probed by listening on it, and every listener is held until
// all n are open, so the n ports are distinct. A port this process was given
// before is not given again (until half the range has been given), so that
// concurrent tests of one package never share one. When the space below the
// range is too small (under 1,024 ports), or no free port was found in 100
// tries per port, it falls back to ports the kernel picks, which may repeat
// an earlier call's.
func FreePorts(n int) ([]int, error) {
	lo, hi := pickRange()
	givenMu.Lock()
	defer givenMu.Unlock()
	if len(given) > (hi-lo)/2 {
		clear(given)
	}
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		addr := Host + ":0"
		if hi > lo && tries < 100*n {
			p := lo + rand.IntN(hi-lo)
			if given[p] {
				continue
			}
			addr = hostPort(p)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if addr != Host+":0" {
				continue // taken: try another
			}
			return nil, fmt.Errorf("cluster: pick a free port: %w", err)
		}
		listeners = append(listeners, l)
		port := l.Addr().(*net.TCPAddr).Port
		ports = append(ports, port)
		given[port] = true
	}
	return ports, nil
}

// given is the ports FreePorts has returned in this process.
var (
	givenMu sync.Mutex
	given   = map[int]bool{}
)

// pickRange is the port range FreePorts draws from: [10000, the first
// ephemeral port), or an empty range when that holds under 1,024 ports.
func pickRange() (lo, hi int) {
	lo, hi = 10000, ephemeralLow()
	if hi-lo < 1024 {
		return 0, 0
	}
	return lo, hi
}

// ephemeralLow is the first port of Linux's ephemeral range, read from
// /proc/sys/net/ipv4/ip_local_port_range, or Linux's default 32768 when the
// file cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low <= 0 {
		return 32768
	}
	return low
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
