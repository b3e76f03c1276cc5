package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// Exit reports a node process that exited without the harness asking.
type Exit struct {
	Node    int    // index
	ID      string // "n1"
	Err     error  // cmd.Wait's result: nil for exit status 0
	LogPath string
}

func (e Exit) String() string {
	return fmt.Sprintf("%s exited unexpectedly (%s); log: %s", e.ID, exitText(e.Err), e.LogPath)
}

// node is the harness's record of one member. Its fields are guarded by
// Cluster.mu.
type node struct {
	id       string
	dir      string
	dataDir  string
	logPath  string
	httpPort int
	raftPort int
	joinURL  string // set by StartJoin: later restarts join again
	proc     *process
	out      *lineWriter
}

// Cluster is a set of batond processes. Its methods may be called from
// several goroutines.
type Cluster struct {
	cfg    Config
	token  string
	client *http.Client
	exits  chan Exit

	mu     sync.Mutex
	nodes  []*node
	closed bool

	closeOnce sync.Once
	closeErr  error
}

// New validates cfg and builds a Cluster. It does no I/O: nothing runs until
// Start.
func New(cfg Config) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Cluster{
		cfg:    cfg,
		token:  cfg.AdminToken,
		client: &http.Client{Transport: &http.Transport{DisableCompression: true}},
		exits:  make(chan Exit, 64),
	}
	if c.token == "" {
		c.token = NewToken()
	}
	if cfg.TLS {
		c.client.Transport.(*http.Transport).TLSClientConfig = c.ClientTLS()
	}
	var outMu sync.Mutex
	for i := range cfg.Nodes {
		id := NodeID(i)
		dir := filepath.Join(cfg.BaseDir, id)
		n := &node{id: id, dir: dir, dataDir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "batond.log")}
		if cfg.HTTPPorts != nil {
			n.httpPort = cfg.HTTPPorts[i]
		}
		if cfg.RaftPorts != nil {
			n.raftPort = cfg.RaftPorts[i]
		}
		if cfg.Output != nil {
			n.out = &lineWriter{mu: &outMu, w: cfg.Output, prefix: id + "| "}
		}
		c.nodes = append(c.nodes, n)
	}
	return c, nil
}

// NewToken returns 32 random bytes in hex.
func NewToken() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	return hex.EncodeToString(b)
}

// Start launches every node with --peers naming all of them, and returns
// once each serves /healthz. On failure it stops whatever it started.
// Start may be called again after Stop: nodes with data resume from it.
//
// Start records the node count and ports in BaseDir/cluster.json. When
// BaseDir already holds node data and such a record, nodes without
// configured ports take the recorded ones, and a Config that contradicts it
// fails with ErrLayout: Raft knows its peers by address.
//
// A fresh cluster whose ports were picked here (none configured, no layout
// recorded) is started again on newly picked ports, up to three times in
// all, when it fails to start: between picking a free port and the node
// binding it, another process on the machine can take it.
func (c *Cluster) Start(ctx context.Context) error {
	fresh := len(c.cfg.HTTPPorts) == 0 && len(c.cfg.RaftPorts) == 0 && !c.hasLayout()
	err := c.startOnce(ctx)
	for try := 1; err != nil && fresh && try < 3 && ctx.Err() == nil; try++ {
		c.resetFresh()
		err = c.startOnce(ctx)
	}
	return err
}

func (c *Cluster) hasLayout() bool {
	l, err := readLayout(c.cfg.BaseDir)
	return err == nil && l != nil
}

// resetFresh forgets the picked ports and any data of a failed first start.
func (c *Cluster) resetFresh() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		n.httpPort, n.raftPort = 0, 0
		os.RemoveAll(n.dataDir)
	}
}

func (c *Cluster) startOnce(ctx context.Context) error {
	procs, err := c.launchAll()
	if err != nil {
		_ = c.Stop()
		return err
	}
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { errs[i] = c.waitHealthy(ctx, i, p) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = c.Stop()
		return err
	}
	c.mu.Lock()
	l := c.layout()
	c.mu.Unlock()
	return writeLayout(c.cfg.BaseDir, l)
}

// launchAll assigns ports, checks they are free and starts every node.
func (c *Cluster) launchAll() ([]*process, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	for _, n := range c.nodes {
		if n.running() {
			return nil, fmt.Errorf("%w: %s", ErrRunning, n.id)
		}
	}
	if err := c.adoptLayout(); err != nil {
		return nil, err
	}
	if err := c.assignPorts(); err != nil {
		return nil, err
	}
	if err := c.ensureCerts(); err != nil {
		return nil, err
	}
	for _, n := range c.nodes {
		if c.cfg.Hosts != nil {
			break // not this process's addresses: nothing to probe
		}
		if err := checkPortFree(n.httpPort, n.id+" http"); err != nil {
			return nil, err
		}
		if err := checkPortFree(n.raftPort, n.id+" raft"); err != nil {
			return nil, err
		}
	}
	procs := make([]*process, len(c.nodes))
	for i, n := range c.nodes {
		n.joinURL = ""
		p, err := c.launch(i)
		if err != nil {
			return nil, err
		}
		procs[i] = p
	}
	return procs, nil
}

// assignPorts picks free ports for the nodes that have none. Called with
// c.mu held.
func (c *Cluster) assignPorts() error {
	if c.cfg.Hosts != nil {
		return nil // Validate made sure every node has its ports
	}
	// One call for every node: ports picked in separate calls can repeat,
	// since each listener is closed before the next call.
	ports, err := FreePorts(2 * len(c.nodes))
	if err != nil {
		return err
	}
	for i, n := range c.nodes {
		if n.httpPort == 0 {
			n.httpPort = ports[2*i]
		}
		if n.raftPort == 0 {
			n.raftPort = ports[2*i+1]
		}
	}
	return nil
}

// launch starts node i's process with its current mode (bootstrap or join).
// Called with c.mu held.
func (c *Cluster) launch(i int) (*process, error) {
	n := c.nodes[i]
	if err := os.MkdirAll(n.dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("cluster: %s: %w", n.id, err)
	}
	raftPorts := make([]int, len(c.nodes))
	for j, m := range c.nodes {
		raftPorts[j] = m.raftPort
	}
	args := nodeArgs(c.cfg, n.id, n.dataDir, n.httpPort, n.raftPort, peersFlag(c.cfg.Hosts, raftPorts), n.joinURL)
	bin := c.cfg.Binary
	if c.cfg.Launch != nil {
		bin, args = c.cfg.Launch(i, bin, args)
	}
	p, err := startProcess(bin, args, c.env(), n.logPath, n.out, func(p *process) { c.exited(i, p) })
	if err != nil {
		return nil, fmt.Errorf("cluster: %s: %w", n.id, err)
	}
	n.proc = p
	return p, nil
}

// env is the nodes' environment: the harness's own, the admin token,
// GOMAXPROCS by Config.Procs, and Config.Env. With ProcsShare a node gets
// MemberProcs unless the harness's environment or Config.Env sets
// GOMAXPROCS; with ProcsRuntime it gets no GOMAXPROCS at all.
func (c *Cluster) env() []string {
	var env []string
	procsSet := false
	for _, kv := range append(os.Environ(), c.cfg.Env...) {
		procsSet = procsSet || (strings.HasPrefix(kv, "GOMAXPROCS=") && kv != "GOMAXPROCS=")
	}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "BATON_ADMIN_TOKEN=") {
			continue
		}
		if c.cfg.Procs == ProcsRuntime && strings.HasPrefix(kv, "GOMAXPROCS=") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "BATON_ADMIN_TOKEN="+c.token)
	if c.cfg.Procs == ProcsShare && !procsSet {
		env = append(env, "GOMAXPROCS="+strconv.Itoa(MemberProcs(c.cfg.Nodes)))
	}
	return append(env, c.cfg.Env...)
}

// MemberProcs is the GOMAXPROCS of each of n cluster members that share
// this machine: its share of the processors this process may use
// (runtime.GOMAXPROCS, which follows the machine's or the container's CPU
// limit), at least 1. It is what Go picks by itself for a process in a
// container limited to that share. When members outnumber the cores, a
// member left at every core keeps waking idle processors of its own on
// the other cores (a spinning thread, a cross-core wake-up, a VM exit
// for each) for work one processor would have run next. On a 2-core VM,
// three members at 1 answered the bench's lone cas client in 0.60 ms at
// the median where the default (2) took 0.70 ms, with throughput at 64
// clients unchanged within the run-to-run noise (bench/baton's workloads,
// runs alternating between the two).
func MemberProcs(n int) int {
	return max(1, runtime.GOMAXPROCS(0)/max(n, 1))
}

// exited runs on a process's waiting goroutine and reports unexpected exits.
func (c *Cluster) exited(i int, p *process) {
	if p.wasExpected() {
		return
	}
	select {
	case c.exits <- Exit{Node: i, ID: NodeID(i), Err: p.err, LogPath: c.nodes[i].logPath}:
	default: // nobody reads Exits: drop rather than block the reaper
	}
}

// Exits delivers one Exit for every node process that exits without the
// harness asking (a crash, a fatal error, a self-shutdown). The channel
// holds 64 events; further ones are dropped while it is full.
func (c *Cluster) Exits() <-chan Exit { return c.exits }

func (n *node) running() bool { return n.proc != nil && !n.proc.exited() }

// Stop stops every running node with SIGTERM, in parallel, and waits; a node
// still running after Config.StopTimeout gets SIGKILL. The cluster may be
// started again.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	var procs []*process
	for _, n := range c.nodes {
		if n.running() {
			procs = append(procs, n.proc)
		}
	}
	c.mu.Unlock()
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { errs[i] = p.terminate(c.cfg.StopTimeout) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// CloseIdleConnections closes the kept-alive connections of the harness's
// own HTTP client (Status, WaitReady and the like), for a test that counts
// the connections a node holds.
func (c *Cluster) CloseIdleConnections() { c.client.CloseIdleConnections() }

// Close stops every node (as Stop) and releases the harness's resources.
// It is idempotent; later calls return the first result. The data and logs
// stay in BaseDir.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		c.closeErr = c.Stop()
		c.client.CloseIdleConnections()
	})
	return c.closeErr
}
