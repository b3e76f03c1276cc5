package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"
)

// Network and clock faults, through the failpoints of nodes started with
// --failpoints (put it in Config.ExtraArgs). A node's failpoints live in its
// memory: a restarted node has none.
//
// A cut is made by the node that dials: node i with node j's Raft address
// in its cut list neither opens nor keeps Raft connections to j. Every Raft
// RPC travels on a connection its sender opened, so Cut(i, j) is one-way
// (i no longer reaches j; j still reaches i) and CutBoth is a partition of
// the pair.

// Failpoints is the body of GET and PUT /v1/internal/failpoints.
type Failpoints struct {
	CutRaftTo     []string `json:"cut_raft_to"`
	ClockOffsetMs int64    `json:"clock_offset_ms"`
}

// GetFailpoints returns node i's failpoints.
func (c *Cluster) GetFailpoints(ctx context.Context, i int) (*Failpoints, error) {
	if i < 0 || i >= c.Size() {
		return nil, fmt.Errorf("%w: index %d", ErrNoSuchNode, i)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	code, body, err := c.get(ctx, i, "/v1/internal/failpoints", true)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("cluster: %s: GET failpoints: %d %s (started without --failpoints?)", NodeID(i), code, snippet(body))
	}
	var fp Failpoints
	if err := json.Unmarshal(body, &fp); err != nil {
		return nil, fmt.Errorf("cluster: %s: decode failpoints: %w", NodeID(i), err)
	}
	return &fp, nil
}

// SetFailpoints replaces node i's failpoints.
func (c *Cluster) SetFailpoints(ctx context.Context, i int, fp Failpoints) error {
	if i < 0 || i >= c.Size() {
		return fmt.Errorf("%w: index %d", ErrNoSuchNode, i)
	}
	if fp.CutRaftTo == nil {
		fp.CutRaftTo = []string{}
	}
	body, _ := json.Marshal(fp)
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.URL(i)+"/v1/internal/failpoints", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("cluster: %s: set failpoints: %w", NodeID(i), err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cluster: %s: PUT failpoints: %d %s (started without --failpoints?)", NodeID(i), resp.StatusCode, snippet(msg))
	}
	return nil
}

// updateFailpoints reads node i's failpoints, applies change and writes
// them back.
func (c *Cluster) updateFailpoints(ctx context.Context, i int, change func(*Failpoints)) error {
	fp, err := c.GetFailpoints(ctx, i)
	if err != nil {
		return err
	}
	change(fp)
	return c.SetFailpoints(ctx, i, *fp)
}

// Cut makes node from stop reaching node to over Raft: a one-way cut.
func (c *Cluster) Cut(ctx context.Context, from, to int) error {
	if to < 0 || to >= c.Size() {
		return fmt.Errorf("%w: index %d", ErrNoSuchNode, to)
	}
	addr := c.RaftAddr(to)
	return c.updateFailpoints(ctx, from, func(fp *Failpoints) {
		if !slices.Contains(fp.CutRaftTo, addr) {
			fp.CutRaftTo = append(fp.CutRaftTo, addr)
		}
	})
}

// CutBoth partitions nodes i and j from each other.
func (c *Cluster) CutBoth(ctx context.Context, i, j int) error {
	if err := c.Cut(ctx, i, j); err != nil {
		return err
	}
	return c.Cut(ctx, j, i)
}

// Partition cuts every pair of nodes that are in different groups, both
// ways. Nodes in no group are left alone.
func (c *Cluster) Partition(ctx context.Context, groups ...[]int) error {
	for gi, g := range groups {
		for _, i := range g {
			for gj, h := range groups {
				if gi == gj {
					continue
				}
				for _, j := range h {
					if err := c.Cut(ctx, i, j); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// Isolate cuts node i from every other node, both ways.
func (c *Cluster) Isolate(ctx context.Context, i int) error {
	var rest []int
	for j := range c.Size() {
		if j != i {
			rest = append(rest, j)
		}
	}
	return c.Partition(ctx, []int{i}, rest)
}

// SetClockOffset skews the time node i stamps into commands when it leads.
func (c *Cluster) SetClockOffset(ctx context.Context, i int, d time.Duration) error {
	return c.updateFailpoints(ctx, i, func(fp *Failpoints) { fp.ClockOffsetMs = d.Milliseconds() })
}

// Heal clears every cut and clock offset on the live nodes (running and not
// paused) and returns the first error; it tries every node.
func (c *Cluster) Heal(ctx context.Context) error {
	var first error
	for _, i := range c.LiveNodes() {
		if err := c.SetFailpoints(ctx, i, Failpoints{}); err != nil && first == nil {
			first = err
		}
	}
	return first
}
