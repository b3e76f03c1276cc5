package faults

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-dev/baton/chaos/netns"
	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/cmd/batond/cluster"
)

// Injector applies faults to a running cluster whose nodes were started
// with --failpoints.
type Injector struct {
	C *cluster.Cluster
	// Admin is a client with the admin token over every node, for
	// membership changes and leadership transfers.
	Admin *client.Client
	// Network, when set, holds the nodes' network namespaces: partitions
	// and cuts are then made in the network (iptables) rather than by
	// failpoints, and the kinds of NetOnly can be injected.
	Network *netns.Net
}

// partitioner makes the cuts of IsolateLeader, CutPair, OneWay and Split:
// Net (failpoints) or a netns.Net.
type partitioner interface {
	Cut(ctx context.Context, from, to int) error
	Partition(ctx context.Context, groups ...[]int) error
	Isolate(ctx context.Context, i int) error
	Heal(ctx context.Context) error
}

// Heal undoes one injected fault and returns a note on what happened
// while it was active (empty for most kinds). It is called once.
type Heal func(ctx context.Context) (string, error)

// quiet adapts a heal that has nothing to report.
func quiet(f func(ctx context.Context) error) Heal {
	return func(ctx context.Context) (string, error) { return "", f(ctx) }
}

// Inject applies f and returns a description of what it did (which nodes)
// and the function that heals it.
func (in *Injector) Inject(ctx context.Context, f Fault) (string, Heal, error) {
	c := in.C
	var net partitioner = Net{C: c}
	if in.Network != nil {
		net = in.Network
	} else if NetOnly(f.Kind) {
		return "", nil, fmt.Errorf("faults: %s needs the nodes in network namespaces (chaos/netns)", f.Kind)
	}
	n := c.Size()
	leader := in.leader(ctx)
	target := leader
	if !f.OnLeader || leader < 0 {
		target = in.follower(leader, f.Pick)
	}
	id := c.ID
	switch f.Kind {
	case Kill:
		if err := c.Kill(target); err != nil {
			return "", nil, err
		}
		return "SIGKILL " + id(target) + role(target, leader), quiet(func(ctx context.Context) error { return c.Restart(ctx, target) }), nil
	case Pause:
		if err := c.Pause(target); err != nil {
			return "", nil, err
		}
		return "SIGSTOP " + id(target) + role(target, leader), quiet(func(context.Context) error { return c.Resume(target) }), nil
	case IsolateLeader:
		if err := net.Isolate(ctx, target); err != nil {
			return "", nil, err
		}
		return "isolate " + id(target) + role(target, leader), quiet(net.Heal), nil
	case CutPair:
		other := in.follower(target, f.Pick+1)
		if other == target {
			other = (target + 1) % n
		}
		if err := net.Partition(ctx, []int{target}, []int{other}); err != nil {
			return "", nil, err
		}
		return fmt.Sprintf("cut %s%s <-> %s%s", id(target), role(target, leader), id(other), role(other, leader)), quiet(net.Heal), nil
	case OneWay:
		from, to := target, in.follower(leader, f.Pick)
		if !f.OnLeader || leader < 0 {
			from, to = target, leader
			if to < 0 || to == from {
				to = (from + 1) % n
			}
		}
		if err := net.Cut(ctx, from, to); err != nil {
			return "", nil, err
		}
		return fmt.Sprintf("one-way cut: %s%s cannot reach %s%s", id(from), role(from, leader), id(to), role(to, leader)), quiet(net.Heal), nil
	case Split:
		minority, majority := in.split(leader, f)
		if err := net.Partition(ctx, minority, majority); err != nil {
			return "", nil, err
		}
		return fmt.Sprintf("split %v | %v (leader %s)", ids(c, majority), ids(c, minority), idOrNone(c, leader)), quiet(net.Heal), nil
	case Loss:
		// One way between the leader and a follower: the leader's
		// messages lost (OnLeader), or the follower's answers.
		from, to := target, leader
		if f.OnLeader || leader < 0 {
			from, to = target, in.follower(target, f.Pick)
		}
		if err := in.Network.Loss(ctx, from, to, f.LossPct); err != nil {
			return "", nil, err
		}
		return fmt.Sprintf("loss %d%%: %s%s -> %s%s", f.LossPct, id(from), role(from, leader), id(to), role(to, leader)), quiet(in.Network.Heal), nil
	case Delay:
		how, err := in.Network.Delay(ctx, target, f.Delay)
		if err != nil {
			return "", nil, err
		}
		return fmt.Sprintf("delay %s%s's packets by %v (%s)", id(target), role(target, leader), f.Delay, how), quiet(in.Network.Heal), nil
	case Flap:
		if err := in.Network.Flap(ctx, target, f.FlapPeriod); err != nil {
			return "", nil, err
		}
		return fmt.Sprintf("flap %s%s's link every %v", id(target), role(target, leader), f.FlapPeriod), quiet(in.Network.Heal), nil
	case ClockSkew:
		return in.skew(ctx, f, leader)
	case WipeRejoin:
		return in.wipe(ctx, target, leader)
	}
	return "", nil, fmt.Errorf("faults: unknown kind %q", f.Kind)
}

// leader is the index of the leader the live nodes agree on, or -1.
func (in *Injector) leader(ctx context.Context) int {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := in.C.WaitLeader(ctx)
	if err != nil {
		return -1
	}
	return l
}

// follower picks a node other than leader.
func (in *Injector) follower(leader, pick int) int {
	var cands []int
	for i := range in.C.Size() {
		if i != leader {
			cands = append(cands, i)
		}
	}
	return cands[pick%len(cands)]
}

// split returns a minority and a majority; the leader is in the minority
// when f.OnLeader.
func (in *Injector) split(leader int, f Fault) (minority, majority []int) {
	n := in.C.Size()
	size := n / 2 // minority size: 1 of 3, 2 of 5
	order := make([]int, 0, n)
	if f.OnLeader && leader >= 0 {
		order = append(order, leader)
	}
	for k := range n {
		i := (f.Pick + k) % n
		if i != leader {
			order = append(order, i)
		}
	}
	if !f.OnLeader && leader >= 0 {
		order = append(order, leader)
	}
	return order[:size], order[size:]
}

func (in *Injector) skew(ctx context.Context, f Fault, leader int) (string, Heal, error) {
	c := in.C
	net := Net{C: c}
	if leader < 0 {
		leader = 0
	}
	other := in.follower(leader, f.Pick)
	if err := net.SetClockOffset(ctx, leader, f.Skew); err != nil {
		return "", nil, err
	}
	if err := net.SetClockOffset(ctx, other, -f.Skew); err != nil {
		return "", nil, err
	}
	desc := fmt.Sprintf("clock %s (leader) %+v, %s %+v", c.ID(leader), f.Skew, c.ID(other), -f.Skew)
	// Half-way, hand the leadership to the node whose clock runs the other
	// way, so leases stamped by one clock are judged by the other.
	stop := make(chan struct{})
	done := make(chan string, 1)
	go func() {
		t := time.NewTimer(f.Hold / 2)
		defer t.Stop()
		select {
		case <-stop:
			done <- ""
			return
		case <-t.C:
		}
		tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if err := in.Admin.TransferLeadership(tctx, c.ID(other)); err != nil {
			done <- "; transfer to " + c.ID(other) + " failed: " + err.Error()
			return
		}
		done <- "; leadership moved to " + c.ID(other)
	}()
	heal := func(ctx context.Context) (string, error) {
		close(stop)
		note := <-done
		return note, net.Heal(ctx)
	}
	return desc, heal, nil
}

// wipe kills target, deletes its data and removes it from the membership;
// healing makes it join again as a new member. A wiped node must not come
// back under its old membership: it would have forgotten its votes and
// its log, which Raft's safety needs.
func (in *Injector) wipe(ctx context.Context, target, leader int) (string, Heal, error) {
	c := in.C
	if err := c.Wipe(target); err != nil {
		return "", nil, err
	}
	removed := in.remove(ctx, target) == nil
	heal := func(ctx context.Context) (string, error) {
		if !removed {
			if err := in.remove(ctx, target); err != nil {
				return "", fmt.Errorf("faults: remove wiped %s: %w", c.ID(target), err)
			}
		}
		return in.join(ctx, target)
	}
	return fmt.Sprintf("wipe %s%s and remove it from the membership", c.ID(target), role(target, leader)), heal, nil
}

// join starts the wiped node i with --join through a live node.
func (in *Injector) join(ctx context.Context, i int) (string, error) {
	via := in.leader(ctx)
	if via < 0 || via == i {
		via = in.follower(i, 0)
	}
	return "; rejoined through " + in.C.ID(via), in.C.StartJoin(ctx, i, in.C.URL(via))
}

// Rejoin brings back a node whose data was wiped and that is not running:
// it is removed from the membership (if it still is a member) and joins
// again as a new member. It never restarts such a node under its old
// membership.
func (in *Injector) Rejoin(ctx context.Context, i int) error {
	if err := in.remove(ctx, i); err != nil {
		return fmt.Errorf("faults: remove wiped %s: %w", in.C.ID(i), err)
	}
	_, err := in.join(ctx, i)
	return err
}

// remove removes node i from the membership, retrying for up to 20s.
func (in *Injector) remove(ctx context.Context, i int) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		err := in.Admin.RemoveMember(ctx, in.C.ID(i))
		if err == nil || errors.Is(err, client.ErrNotFound) {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func role(i, leader int) string {
	if i == leader {
		return "(leader)"
	}
	return ""
}

func idOrNone(c *cluster.Cluster, i int) string {
	if i < 0 {
		return "none"
	}
	return c.ID(i)
}

func ids(c *cluster.Cluster, nodes []int) []string {
	out := make([]string, len(nodes))
	for k, i := range nodes {
		out[k] = c.ID(i)
	}
	return out
}
