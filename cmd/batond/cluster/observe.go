package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/baton-dev/baton/client"
)

// Raft states as /v1/cluster reports them.
const (
	StateLeader    = "Leader"
	StateFollower  = "Follower"
	StateCandidate = "Candidate"
)

// requestTimeout bounds one observation, so a paused or wedged node cannot
// stall a poll.
const requestTimeout = time.Second

// NodeStatus is a node's own view, GET /v1/cluster?consistency=stale: the
// SDK's type, decoded here with encoding/json (the harness still talks to
// the nodes over plain net/http, never through the SDK's client).
type NodeStatus = client.ClusterStatus

// Status asks node i for its own view of the cluster, without forwarding to
// the leader.
func (c *Cluster) Status(ctx context.Context, i int) (*NodeStatus, error) {
	if i < 0 || i >= c.Size() {
		return nil, fmt.Errorf("%w: index %d", ErrNoSuchNode, i)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	code, body, err := c.get(ctx, i, "/v1/cluster?consistency=stale", true)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("cluster: %s: GET /v1/cluster: %d %s", NodeID(i), code, snippet(body))
	}
	var st NodeStatus
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, fmt.Errorf("cluster: %s: decode /v1/cluster: %w", NodeID(i), err)
	}
	return &st, nil
}

// get requests path on node i and returns the status code and at most 1 MiB
// of the body.
func (c *Cluster) get(ctx context.Context, i int, path string, admin bool) (int, []byte, error) {
	return c.do(ctx, i, http.MethodGet, path, nil, admin)
}

// AdminCall sends one request with the admin token to node i, bounded by a
// second, and returns at most 1 MiB of the answer's body; an answer other
// than 2xx is an error carrying its status and the start of its body.
func (c *Cluster) AdminCall(ctx context.Context, i int, method, path string, body []byte) ([]byte, error) {
	if i < 0 || i >= c.Size() {
		return nil, fmt.Errorf("%w: index %d", ErrNoSuchNode, i)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	code, out, err := c.do(ctx, i, method, path, body, true)
	if err != nil {
		return nil, err
	}
	if code/100 != 2 {
		return nil, fmt.Errorf("cluster: %s: %s %s: %d %s", NodeID(i), method, path, code, snippet(out))
	}
	return out, nil
}

func (c *Cluster) do(ctx context.Context, i int, method, path string, body []byte, admin bool) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.URL(i)+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if admin {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("cluster: %s: %w", NodeID(i), err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("cluster: %s: read %s: %w", NodeID(i), path, err)
	}
	return resp.StatusCode, out, nil
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// observation is one node's answer in a poll round.
type observation struct {
	node int
	st   *NodeStatus
	err  error
}

func (o observation) String() string {
	if o.err != nil {
		return fmt.Sprintf("%s: %v", NodeID(o.node), o.err)
	}
	return fmt.Sprintf("%s: %s leader=%q term=%d commit=%d applied=%d digest=%s",
		NodeID(o.node), o.st.State, o.st.Leader.ID, o.st.Term, o.st.CommitIndex, o.st.AppliedIndex, o.st.StateDigest)
}

func describe(obs []observation) string {
	parts := make([]string, len(obs))
	for i, o := range obs {
		parts[i] = o.String()
	}
	return strings.Join(parts, "; ")
}

// observe asks the given nodes for their status in parallel.
func (c *Cluster) observe(ctx context.Context, nodes []int) []observation {
	obs := make([]observation, len(nodes))
	var wg sync.WaitGroup
	for k, i := range nodes {
		wg.Go(func() {
			st, err := c.Status(ctx, i)
			obs[k] = observation{node: i, st: st, err: err}
		})
	}
	wg.Wait()
	return obs
}

// poll calls check every PollInterval until it is done, fails, or ctx ends
// (after DefaultWaitTimeout when ctx has no deadline). why says what was
// last missing; it ends up in the timeout error.
func poll(ctx context.Context, what string, check func(ctx context.Context) (done bool, why string, err error)) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultWaitTimeout)
		defer cancel()
	}
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	why := ""
	for {
		done, w, err := check(ctx)
		if err != nil || done {
			return err
		}
		// A round cut short by the deadline saw only the deadline: keep
		// the previous round's reason, which says what was missing.
		if ctx.Err() == nil || why == "" {
			why = w
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: %s: %w; last seen: %s", what, ctx.Err(), why)
		case <-tick.C:
		}
	}
}

// nodesOrLive returns nodes, or the live nodes when nodes is empty.
func (c *Cluster) nodesOrLive(nodes []int) []int {
	if len(nodes) > 0 {
		return nodes
	}
	return c.LiveNodes()
}

// WaitLeader waits until exactly one of the nodes claims to be Leader and
// every other one names it as leader, and returns its index. With no nodes
// given it considers the live ones (running, not paused) at each poll.
func (c *Cluster) WaitLeader(ctx context.Context, among ...int) (int, error) {
	leader := -1
	err := poll(ctx, "wait for a leader", func(ctx context.Context) (bool, string, error) {
		nodes := c.nodesOrLive(among)
		if len(nodes) == 0 {
			return false, "no live node", nil
		}
		obs := c.observe(ctx, nodes)
		l, why := agreedLeader(obs)
		leader = l
		return l >= 0, why, nil
	})
	if err != nil {
		return -1, err
	}
	return leader, nil
}

// agreedLeader returns the index of the single leader every observation
// agrees on, or -1 and the reason there is none.
func agreedLeader(obs []observation) (int, string) {
	leader := -1
	for _, o := range obs {
		if o.err != nil {
			return -1, describe(obs)
		}
		if o.st.State != StateLeader {
			continue
		}
		if leader >= 0 {
			return -1, "two leaders: " + describe(obs)
		}
		leader = o.node
	}
	if leader < 0 {
		return -1, "no node is Leader: " + describe(obs)
	}
	want := NodeID(leader)
	for _, o := range obs {
		if o.st.Leader.ID != want || (o.node == leader && o.st.NodeID != want) {
			return -1, "not all agree on " + want + ": " + describe(obs)
		}
	}
	return leader, ""
}

// WaitReady waits until node i answers 200 on /readyz: it knows a leader
// and has applied what it heard was committed.
func (c *Cluster) WaitReady(ctx context.Context, i int) error {
	if i < 0 || i >= c.Size() {
		return fmt.Errorf("%w: index %d", ErrNoSuchNode, i)
	}
	return poll(ctx, NodeID(i)+" ready", func(ctx context.Context) (bool, string, error) {
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		code, body, err := c.get(rctx, i, "/readyz", false)
		if err != nil {
			return false, err.Error(), nil
		}
		return code == http.StatusOK, fmt.Sprintf("/readyz %d %s", code, snippet(body)), nil
	})
}

// WaitConverged waits until the nodes (the live ones when none are given)
// report the same applied_index and state_digest, and returns that index.
// Two nodes at the same index with different digests fail at once with
// ErrDiverged.
func (c *Cluster) WaitConverged(ctx context.Context, nodes ...int) (uint64, error) {
	var index uint64
	err := poll(ctx, "wait for convergence", func(ctx context.Context) (bool, string, error) {
		ns := c.nodesOrLive(nodes)
		if len(ns) == 0 {
			return false, "no live node", nil
		}
		obs := c.observe(ctx, ns)
		idx, why, err := converged(obs)
		index = idx
		return why == "" && err == nil, why, err
	})
	if err != nil {
		return 0, err
	}
	return index, nil
}

// converged returns the common applied index of obs, once every node knows
// a leader and has applied the commit index it knows; otherwise why tells
// what differs, and err is ErrDiverged when equal indexes carry different
// digests.
func converged(obs []observation) (uint64, string, error) {
	digestAt := map[uint64]observation{}
	for _, o := range obs {
		if o.err != nil {
			return 0, describe(obs), nil
		}
		if prev, ok := digestAt[o.st.AppliedIndex]; ok && prev.st.StateDigest != o.st.StateDigest {
			return 0, "", fmt.Errorf("%w: %s and %s at applied_index %d: %s", ErrDiverged,
				NodeID(prev.node), NodeID(o.node), o.st.AppliedIndex, describe(obs))
		}
		digestAt[o.st.AppliedIndex] = o
	}
	if len(digestAt) != 1 {
		return 0, "applied indexes differ: " + describe(obs), nil
	}
	// Equal is not enough: nodes just restarted all agree at index 0, before
	// they learn the commit index from a leader and replay their logs.
	for _, o := range obs {
		if o.st.Leader.ID == "" || o.st.AppliedIndex < o.st.CommitIndex {
			return 0, "not caught up with a leader yet: " + describe(obs), nil
		}
	}
	return obs[0].st.AppliedIndex, "", nil
}

// waitHealthy waits until node i's process p serves /healthz, failing with
// the tail of its log if it exits first.
func (c *Cluster) waitHealthy(ctx context.Context, i int, p *process) error {
	return poll(ctx, NodeID(i)+" healthy", func(ctx context.Context) (bool, string, error) {
		if p.exited() {
			return false, "", c.exitError(i, p)
		}
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		code, _, err := c.get(rctx, i, "/healthz", false)
		if err != nil {
			return false, err.Error(), nil
		}
		return code == http.StatusOK, fmt.Sprintf("/healthz %d", code), nil
	})
}

// exitError describes a process that exited during start.
func (c *Cluster) exitError(i int, p *process) error {
	path := c.LogPath(i)
	return fmt.Errorf("%w: %s (%s, %s) exited before serving /healthz (%s); last lines of %s:\n%s",
		ErrExited, NodeID(i), c.HTTPAddr(i), c.RaftAddr(i), exitText(p.err), path, tailLines(path, 20))
}
