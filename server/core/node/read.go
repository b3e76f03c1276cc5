package node

import (
	"context"
	"sync"

	"github.com/baton-dev/baton/fsm"
)

// ReadBarrier returns once a read of the local FSM state would be
// linearizable: this node has confirmed with a quorum that it still leads
// (after the call began), and it has applied everything committed before.
// Concurrent callers share one confirmation round, as etcd's ReadIndex does.
func (n *Node) ReadBarrier(ctx context.Context) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	if err := n.termBarrier(ctx); err != nil {
		return err
	}
	readIndex := n.raft.CommitIndex()
	if err := n.verifier.Verify(ctx); err != nil {
		return translate(err)
	}
	if err := n.FSM.WaitApplied(ctx, readIndex); err != nil {
		return err
	}
	return nil
}

// WriteBarrier returns once this leader has applied every entry of earlier
// terms, so that the checks a write makes before it is proposed (does the
// task exist, what is its queue) see at least every acknowledged write. It
// costs one entry per term and nothing after.
func (n *Node) WriteBarrier(ctx context.Context) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	return n.termBarrier(ctx)
}

// termBarrier makes sure a new leader has applied every entry of earlier
// terms before it serves reads: until an entry of its own term commits, its
// commit index may be behind what earlier leaders acknowledged. The entry is
// this leader's own member record (fsm.KindMemberSet), run once per term:
// it also publishes the leader's HTTP address before anything is forwarded
// to it.
func (n *Node) termBarrier(ctx context.Context) error {
	term := n.raft.CurrentTerm()
	if n.barrierTerm.Load() == term {
		return nil // the common case: no lock on the request path
	}
	n.barrierMu.Lock()
	defer n.barrierMu.Unlock()
	if n.barrierTerm.Load() == term {
		return nil
	}
	ctx, cancel := bounded(ctx, n.cfg.ApplyTimeout)
	defer cancel()
	me := &fsm.Member{ID: n.cfg.ID, RaftAddr: n.RaftAddr(), HTTPAddr: n.cfg.HTTPAddr}
	if _, err := n.Apply(ctx, fsm.NewCommand(fsm.KindMemberSet, n.now(), "", "", me)); err != nil {
		return err
	}
	if n.raft.CurrentTerm() == term {
		n.barrierTerm.Store(term)
	}
	return nil
}

// leadershipLoop commits the term barrier as soon as this node wins an
// election, so that reads and followers' readiness do not wait for it.
func (n *Node) leadershipLoop() {
	defer n.wg.Done()
	for {
		select {
		case <-n.done:
			return
		case isLeader := <-n.raft.LeaderCh():
			if !isLeader {
				continue
			}
			if err := n.termBarrier(n.ctx); err != nil {
				n.log.Warn("term barrier failed", "err", err)
			}
		}
	}
}

// verifier coalesces leadership confirmations: a caller joins the next round
// that starts after it arrived; rounds run back to back.
type verifier struct {
	verify func() error

	mu      sync.Mutex
	next    *round
	running bool
}

type round struct {
	done chan struct{}
	err  error
}

func (v *verifier) Verify(ctx context.Context) error {
	v.mu.Lock()
	if v.next == nil {
		v.next = &round{done: make(chan struct{})}
	}
	r := v.next
	if !v.running {
		v.running = true
		go v.loop()
	}
	v.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (v *verifier) loop() {
	for {
		v.mu.Lock()
		r := v.next
		v.next = nil
		if r == nil {
			v.running = false
			v.mu.Unlock()
			return
		}
		v.mu.Unlock()
		r.err = v.verify()
		close(r.done)
	}
}
