package cluster

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Limits and defaults of a Config.
const (
	DefaultNodes       = 3
	MaxNodes           = 9
	DefaultStopTimeout = 10 * time.Second
	// DefaultWaitTimeout bounds a wait whose context has no deadline.
	DefaultWaitTimeout = 30 * time.Second
	// PollInterval is the pause between two polls of a wait.
	PollInterval = 25 * time.Millisecond
	// Host is the only interface nodes listen on.
	Host = "127.0.0.1"
)

// fastArgs are the Raft timings used with Config.Fast.
var fastArgs = []string{
	"--heartbeat-timeout=300ms",
	"--election-timeout=300ms",
	"--leader-lease-timeout=150ms",
	"--commit-timeout=20ms",
}

// Config describes a cluster. The zero value of every field but Binary and
// BaseDir is usable.
type Config struct {
	// Binary is the path of the batond executable. Required.
	Binary string
	// Nodes is the number of nodes, 1 to MaxNodes; 0 means DefaultNodes.
	Nodes int
	// BaseDir holds one directory per node (n1, n2, ...). Required.
	BaseDir string
	// AdminToken is handed to every node as BATON_ADMIN_TOKEN and used by
	// the observers. Empty means a random token chosen by New.
	AdminToken string
	// HTTPPorts and RaftPorts are the nodes' loopback ports, in node order.
	// Each is either nil (free ports are picked by Start) or holds exactly
	// Nodes distinct ports.
	HTTPPorts []int
	RaftPorts []int
	// Fast selects short Raft timings for tests (heartbeat and election
	// 300ms, leader lease 150ms, commit 20ms).
	Fast bool
	// ExtraArgs are appended to every node's command line, after the
	// harness's own flags, so they override them.
	ExtraArgs []string
	// Env is added to every node's environment.
	Env []string
	// Procs chooses every node's GOMAXPROCS: ProcsShare (the zero value,
	// what `batond local` and the chaos harness use) or ProcsRuntime.
	Procs ProcsRule
	// Output, when set, also receives every line the nodes write, each
	// prefixed with the node id. The per-node log files are always written.
	Output io.Writer
	// TLS runs the cluster with TLS everywhere: Start makes a CA and node
	// certificates in BaseDir/tls (kept across restarts), and every node
	// serves its API over TLS and talks to its peers (Raft, node-to-node
	// HTTP) over mutual TLS. URLs are https; clients need CAFile (or
	// ClientTLS).
	TLS bool
	// StopTimeout bounds how long Stop waits after SIGTERM before SIGQUIT
	// (the stacks of a Go program, in its log) and SIGKILL;
	// 0 means DefaultStopTimeout.
	StopTimeout time.Duration
	// Hosts, when set, holds one address per node, in node order, that the
	// node listens on and its peers and clients reach it by, instead of
	// Host: nodes in network namespaces of their own (chaos/netns). Such
	// addresses are not this process's, so the harness probes no port:
	// HTTPPorts and RaftPorts are then required.
	Hosts []string
	// Launch, when set, wraps node i's command line: it returns the program
	// and arguments that run binary with args in the node's environment
	// (such as "ip netns exec NS binary args..."). The wrapper must exec
	// the binary in its own process, so that signals reach the node.
	Launch func(i int, binary string, args []string) (string, []string)
}

// ProcsRule is how the harness sets its nodes' GOMAXPROCS.
type ProcsRule int

const (
	// ProcsShare gives every node its share of the cores,
	// MemberProcs(Nodes), unless the harness's environment or Config.Env
	// sets GOMAXPROCS (then that value).
	ProcsShare ProcsRule = iota
	// ProcsRuntime leaves GOMAXPROCS to each node's Go runtime, as a
	// user's process that does not pin it: the variable is removed from
	// the environment the nodes inherit, and Config.Env may not set it.
	ProcsRuntime
)

func (r ProcsRule) String() string {
	switch r {
	case ProcsShare:
		return "share"
	case ProcsRuntime:
		return "runtime"
	}
	return "ProcsRule(" + strconv.Itoa(int(r)) + ")"
}

// withDefaults returns a copy of c with zero values replaced by defaults.
func (c Config) withDefaults() Config {
	if c.Nodes == 0 {
		c.Nodes = DefaultNodes
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = DefaultStopTimeout
	}
	return c
}

// Validate reports the first problem of c, after defaults are applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Binary == "":
		return errors.New("cluster: Config.Binary is required")
	case c.BaseDir == "":
		return errors.New("cluster: Config.BaseDir is required")
	case c.Nodes < 1 || c.Nodes > MaxNodes:
		return fmt.Errorf("cluster: Config.Nodes is %d, want 1 to %d", c.Nodes, MaxNodes)
	case c.StopTimeout < 0:
		return fmt.Errorf("cluster: Config.StopTimeout is %v, want >= 0", c.StopTimeout)
	case strings.ContainsAny(c.AdminToken, " \t\r\n"):
		return errors.New("cluster: Config.AdminToken contains white space")
	case c.Procs != ProcsShare && c.Procs != ProcsRuntime:
		return fmt.Errorf("cluster: Config.Procs is %v, want ProcsShare or ProcsRuntime", c.Procs)
	}
	if c.Procs == ProcsRuntime {
		for _, kv := range c.Env {
			if strings.HasPrefix(kv, "GOMAXPROCS=") {
				return fmt.Errorf("cluster: Config.Env sets %s with Procs ProcsRuntime, which leaves it to the runtime", kv)
			}
		}
	}
	if c.Hosts != nil {
		if len(c.Hosts) != c.Nodes {
			return fmt.Errorf("cluster: Config.Hosts has %d addresses, want %d (one per node)", len(c.Hosts), c.Nodes)
		}
		if c.HTTPPorts == nil || c.RaftPorts == nil {
			return errors.New("cluster: Config.Hosts needs HTTPPorts and RaftPorts")
		}
		for _, h := range c.Hosts {
			if h == "" || strings.ContainsAny(h, ":/ ") {
				return fmt.Errorf("cluster: Config.Hosts: %q is not a host name or IPv4 address", h)
			}
		}
	}
	if err := validatePorts("HTTPPorts", c.HTTPPorts, c.Nodes); err != nil {
		return err
	}
	if err := validatePorts("RaftPorts", c.RaftPorts, c.Nodes); err != nil {
		return err
	}
	if c.HTTPPorts != nil && c.RaftPorts != nil {
		seen := map[int]bool{}
		for _, p := range c.HTTPPorts {
			seen[p] = true
		}
		for _, p := range c.RaftPorts {
			if seen[p] {
				return fmt.Errorf("cluster: port %d is in both HTTPPorts and RaftPorts", p)
			}
		}
	}
	return nil
}

func validatePorts(field string, ports []int, n int) error {
	if ports == nil {
		return nil
	}
	if len(ports) != n {
		return fmt.Errorf("cluster: Config.%s has %d ports, want %d (one per node)", field, len(ports), n)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p < 1 || p > 65535 {
			return fmt.Errorf("cluster: Config.%s: port %d out of range 1-65535", field, p)
		}
		if seen[p] {
			return fmt.Errorf("cluster: Config.%s: port %d appears twice", field, p)
		}
		seen[p] = true
	}
	return nil
}

// SequentialPorts returns n ports base, base+1, ..., base+n-1.
func SequentialPorts(base, n int) []int {
	ports := make([]int, n)
	for i := range ports {
		ports[i] = base + i
	}
	return ports
}

// NodeID is the id of node index i: "n1" for 0.
func NodeID(i int) string { return "n" + strconv.Itoa(i+1) }

// hostPort joins Host and port.
func hostPort(port int) string { return Host + ":" + strconv.Itoa(port) }

// PeersFlag builds the value of --peers: "n1=127.0.0.1:8001,n2=...".
func PeersFlag(raftPorts []int) string { return peersFlag(nil, raftPorts) }

// peersFlag is PeersFlag with node i at hosts[i] (Host when hosts is nil).
func peersFlag(hosts []string, raftPorts []int) string {
	parts := make([]string, len(raftPorts))
	for i, p := range raftPorts {
		parts[i] = NodeID(i) + "=" + joinHostPort(hostAt(hosts, i), p)
	}
	return strings.Join(parts, ",")
}

// hostAt is node i's address: hosts[i], or Host when hosts is nil.
func hostAt(hosts []string, i int) string {
	if hosts == nil {
		return Host
	}
	return hosts[i]
}

func joinHostPort(host string, port int) string { return host + ":" + strconv.Itoa(port) }

// nodeArgs builds the command line of one node. With joinURL empty the node
// bootstraps from peers; otherwise it joins through joinURL and gets no
// --peers.
func nodeArgs(c Config, id, dataDir string, httpPort, raftPort int, peers, joinURL string) []string {
	host := Host
	for i := range c.Hosts {
		if NodeID(i) == id {
			host = c.Hosts[i]
		}
	}
	args := []string{
		"--id=" + id,
		"--data-dir=" + dataDir,
		"--http-addr=" + joinHostPort(host, httpPort),
		"--raft-addr=" + joinHostPort(host, raftPort),
	}
	if joinURL == "" {
		args = append(args, "--peers="+peers)
	} else {
		args = append(args, "--join="+joinURL)
	}
	if c.Fast {
		args = append(args, fastArgs...)
	}
	args = append(args, tlsArgs(c, id)...)
	return append(args, c.ExtraArgs...)
}
