package cluster

import (
	"context"
	"fmt"
	"os"
)

// Per-node operations. Node i is "n<i+1>". The error-returning methods
// answer ErrNoSuchNode for an index out of range; the accessors panic, like
// a slice index.

// lookup returns node i, with c.mu held by the caller.
func (c *Cluster) lookup(i int) (*node, error) {
	if c.closed {
		return nil, ErrClosed
	}
	if i < 0 || i >= len(c.nodes) {
		return nil, fmt.Errorf("%w: index %d, cluster has %d", ErrNoSuchNode, i, len(c.nodes))
	}
	return c.nodes[i], nil
}

// runningProc returns node i's live process or ErrNotRunning.
func (c *Cluster) runningProc(i int) (*process, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.lookup(i)
	if err != nil {
		return nil, err
	}
	if !n.running() {
		return nil, fmt.Errorf("%w: %s", ErrNotRunning, n.id)
	}
	return n.proc, nil
}

// Kill crashes node i with SIGKILL and returns once the process is reaped.
func (c *Cluster) Kill(i int) error {
	p, err := c.runningProc(i)
	if err != nil {
		return err
	}
	return p.kill()
}

// StopNode shuts node i down cleanly with SIGTERM, as Stop does for all.
func (c *Cluster) StopNode(i int) error {
	p, err := c.runningProc(i)
	if err != nil {
		return err
	}
	return p.terminate(c.cfg.StopTimeout)
}

// Pause freezes node i with SIGSTOP; it keeps its sockets but answers
// nothing until Resume.
func (c *Cluster) Pause(i int) error {
	p, err := c.runningProc(i)
	if err != nil {
		return err
	}
	return p.pause()
}

// Resume continues a paused node i with SIGCONT.
func (c *Cluster) Resume(i int) error {
	p, err := c.runningProc(i)
	if err != nil {
		return err
	}
	return p.resume()
}

// Restart starts the stopped node i again with the same arguments, ports
// and data directory, and returns once it serves /healthz. A node last
// started by StartJoin is started with the same --join again.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	return c.relaunch(ctx, i, func(*node) error { return nil })
}

// StartJoin discards the stopped node i's data and starts it with --join
// joinURL instead of --peers, so it asks the running cluster to add it.
// It returns once the node serves /healthz.
func (c *Cluster) StartJoin(ctx context.Context, i int, joinURL string) error {
	return c.relaunch(ctx, i, func(n *node) error {
		if err := os.RemoveAll(n.dataDir); err != nil {
			return fmt.Errorf("cluster: %s: wipe data: %w", n.id, err)
		}
		n.joinURL = joinURL
		return nil
	})
}

// relaunch starts the stopped node i after prepare, then waits for health.
func (c *Cluster) relaunch(ctx context.Context, i int, prepare func(*node) error) error {
	c.mu.Lock()
	n, err := c.lookup(i)
	if err == nil && n.running() {
		err = fmt.Errorf("%w: %s", ErrRunning, n.id)
	}
	if err == nil && (n.httpPort == 0 || n.raftPort == 0) {
		err = fmt.Errorf("%w: %s was never started (call Start first)", ErrNotRunning, n.id)
	}
	if err == nil {
		err = prepare(n)
	}
	var p *process
	if err == nil {
		p, err = c.launch(i)
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return c.waitHealthy(ctx, i, p)
}

// Wipe kills node i if it runs and deletes its data directory; its log
// stays. Restart then bootstraps it from --peers, StartJoin joins it.
func (c *Cluster) Wipe(i int) error {
	if err := c.Kill(i); err != nil && !isNotRunning(err) {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.lookup(i)
	if err != nil {
		return err
	}
	if n.running() { // restarted by another goroutine meanwhile
		return fmt.Errorf("%w: %s", ErrRunning, n.id)
	}
	if err := os.RemoveAll(n.dataDir); err != nil {
		return fmt.Errorf("cluster: %s: wipe data: %w", n.id, err)
	}
	return nil
}

// node returns node i for the accessors, panicking when out of range.
func (c *Cluster) node(i int) *node {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i < 0 || i >= len(c.nodes) {
		panic(fmt.Sprintf("cluster: node index %d out of range [0, %d)", i, len(c.nodes)))
	}
	return c.nodes[i]
}

// Size is the number of nodes.
func (c *Cluster) Size() int { return len(c.nodes) }

// ID is node i's id, "n<i+1>".
func (c *Cluster) ID(i int) string { return c.node(i).id }

// AdminToken is the token the nodes accept as admin.
func (c *Cluster) AdminToken() string { return c.token }

// HTTPAddr is node i's "127.0.0.1:port" (its Config.Hosts address when
// set). Ports picked by Start are known
// only once Start has run; before, the port is 0.
func (c *Cluster) HTTPAddr(i int) string {
	n := c.node(i)
	c.mu.Lock()
	defer c.mu.Unlock()
	return joinHostPort(hostAt(c.cfg.Hosts, i), n.httpPort)
}

// RaftAddr is node i's Raft "127.0.0.1:port" (see HTTPAddr).
func (c *Cluster) RaftAddr(i int) string {
	n := c.node(i)
	c.mu.Lock()
	defer c.mu.Unlock()
	return joinHostPort(hostAt(c.cfg.Hosts, i), n.raftPort)
}

// URL is node i's base URL, "http://127.0.0.1:port" ("https://..." with
// Config.TLS).
func (c *Cluster) URL(i int) string { return c.Scheme() + "://" + c.HTTPAddr(i) }

// Endpoints are the URLs of all nodes, in node order.
func (c *Cluster) Endpoints() []string {
	urls := make([]string, c.Size())
	for i := range urls {
		urls[i] = c.URL(i)
	}
	return urls
}

// LogPath is node i's log file, BaseDir/n<i+1>/batond.log.
func (c *Cluster) LogPath(i int) string { return c.node(i).logPath }

// DataDir is node i's data directory, BaseDir/n<i+1>/data.
func (c *Cluster) DataDir(i int) string { return c.node(i).dataDir }

// LogTail returns at most the last n lines of node i's log.
func (c *Cluster) LogTail(i, n int) string { return tailLines(c.LogPath(i), n) }

// Running reports whether node i's process is alive (paused counts).
func (c *Cluster) Running(i int) bool {
	n := c.node(i)
	c.mu.Lock()
	defer c.mu.Unlock()
	return n.running()
}

// Live reports whether node i runs and is not paused: it can answer.
func (c *Cluster) Live(i int) bool {
	n := c.node(i)
	c.mu.Lock()
	defer c.mu.Unlock()
	return n.running() && !n.proc.isPaused()
}

// LiveNodes are the indexes of the live nodes.
func (c *Cluster) LiveNodes() []int {
	var live []int
	for i := range c.Size() {
		if c.Live(i) {
			live = append(live, i)
		}
	}
	return live
}

// PID is node i's process id, or 0 when it does not run.
func (c *Cluster) PID(i int) int {
	n := c.node(i)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !n.running() {
		return 0
	}
	return n.proc.cmd.Process.Pid
}
