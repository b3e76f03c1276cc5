package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/baton-dev/baton/cmd/batond/cluster"
	"github.com/baton-dev/baton/fsm/wire"
)

// Network and clock faults, through the failpoints of nodes started with
// --failpoints (put it in cluster.Config.ExtraArgs). A node's failpoints
// live in its memory: a restarted node has none.
//
// A cut is made by the node that dials: node i with node j's Raft address
// in its cut list neither opens nor keeps Raft connections to j. Every Raft
// RPC travels on a connection its sender opened, so Cut(i, j) is one-way
// (i no longer reaches j; j still reaches i) and CutBoth is a partition of
// the pair.

// Net sets the failpoints of C's nodes. It is the chaos suite's own: the
// launcher in cmd/batond/cluster starts and stops processes and knows
// nothing of failpoints.
type Net struct{ C *cluster.Cluster }

// Failpoints is the body of GET and PUT /v1/internal/failpoints.
type Failpoints = wire.Failpoints

// GetFailpoints returns node i's failpoints.
func (n Net) GetFailpoints(ctx context.Context, i int) (*Failpoints, error) {
	body, err := n.C.AdminCall(ctx, i, http.MethodGet, "/v1/internal/failpoints", nil)
	if err != nil {
		return nil, fmt.Errorf("%w (started without --failpoints?)", err)
	}
	var fp Failpoints
	if err := json.Unmarshal(body, &fp); err != nil {
		return nil, fmt.Errorf("faults: %s: decode failpoints: %w", cluster.NodeID(i), err)
	}
	return &fp, nil
}

// SetFailpoints replaces node i's failpoints.
func (n Net) SetFailpoints(ctx context.Context, i int, fp Failpoints) error {
	if fp.CutRaftTo == nil {
		fp.CutRaftTo = []string{}
	}
	body, _ := json.Marshal(fp)
	if _, err := n.C.AdminCall(ctx, i, http.MethodPut, "/v1/internal/failpoints", body); err != nil {
		return fmt.Errorf("%w (started without --failpoints?)", err)
	}
	return nil
}

// updateFailpoints reads node i's failpoints, applies change and writes
// them back.
func (n Net) updateFailpoints(ctx context.Context, i int, change func(*Failpoints)) error {
	fp, err := n.GetFailpoints(ctx, i)
	if err != nil {
		return err
	}
	change(fp)
	return n.SetFailpoints(ctx, i, *fp)
}

// Cut makes node from stop reaching node to over Raft: a one-way cut.
func (n Net) Cut(ctx context.Context, from, to int) error {
	if to < 0 || to >= n.C.Size() {
		return fmt.Errorf("%w: index %d", cluster.ErrNoSuchNode, to)
	}
	addr := n.C.RaftAddr(to)
	return n.updateFailpoints(ctx, from, func(fp *Failpoints) {
		if !slices.Contains(fp.CutRaftTo, addr) {
			fp.CutRaftTo = append(fp.CutRaftTo, addr)
		}
	})
}

// CutBoth partitions nodes i and j from each other.
func (n Net) CutBoth(ctx context.Context, i, j int) error {
	if err := n.Cut(ctx, i, j); err != nil {
		return err
	}
	return n.Cut(ctx, j, i)
}

// Partition cuts every pair of nodes that are in different groups, both
// ways. Nodes in no group are left alone.
func (n Net) Partition(ctx context.Context, groups ...[]int) error {
	for gi, g := range groups {
		for _, i := range g {
			for gj, h := range groups {
				if gi == gj {
					continue
				}
				for _, j := range h {
					if err := n.Cut(ctx, i, j); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// Isolate cuts node i from every other node, both ways.
func (n Net) Isolate(ctx context.Context, i int) error {
	var rest []int
	for j := range n.C.Size() {
		if j != i {
			rest = append(rest, j)
		}
	}
	return n.Partition(ctx, []int{i}, rest)
}

// SetClockOffset skews the time node i stamps into commands when it leads.
func (n Net) SetClockOffset(ctx context.Context, i int, d time.Duration) error {
	return n.updateFailpoints(ctx, i, func(fp *Failpoints) { fp.ClockOffsetMs = d.Milliseconds() })
}

// Heal clears every cut and clock offset on the live nodes (running and not
// paused) and returns the first error; it tries every node.
func (n Net) Heal(ctx context.Context) error {
	var first error
	for _, i := range n.C.LiveNodes() {
		if err := n.SetFailpoints(ctx, i, Failpoints{}); err != nil && first == nil {
			first = err
		}
	}
	return first
}
