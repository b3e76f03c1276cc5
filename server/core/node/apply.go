package node

import (
	"context"
	"fmt"
	"sync"
	"time"

	metrics "github.com/hashicorp/go-metrics/compat"

	"github.com/baton-dev/baton/fsm"
)

// proposal is one command waiting to be committed.
type proposal struct {
	cmd   *fsm.Command
	done  chan proposalResult // buffered, 1
	start time.Time
}

type proposalResult struct {
	res *fsm.Result
	err error
}

// Apply proposes cmd and waits until it is applied, ctx ends or the node
// closes. Concurrent calls are coalesced into one log entry (group commit,
// see groupCommit). When an entry slot is free, the calling goroutine
// proposes and waits on Raft itself, with no hand-off to another goroutine
// on the way in or out; such a caller stays until its entry's outcome is
// known (at most ApplyTimeout), even if ctx ends meanwhile, because the
// results of the proposals that share its entry are delivered by it.
func (n *Node) Apply(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error) {
	if !n.IsLeader() {
		return nil, ErrNotLeader
	}
	p := &proposal{cmd: cmd, done: make(chan proposalResult, 1), start: time.Now()}
	select { // a place among the proposals queued or with Raft
	case n.admit <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-n.done:
		return nil, ErrClosed
	}
	// From here on the command is, or will be, with Raft: an error is an
	// unknown outcome unless drive says Raft refused the entry.
	if batch := n.commits.enqueue(p, n.cfg.MaxInflightEntries); batch != nil {
		n.drive(batch)
	}
	select {
	case r := <-p.done:
		metrics.MeasureSince([]string{"node", "apply"}, p.start)
		return r.res, r.err
	case <-ctx.Done():
		return nil, outcomeUnknown(ctx.Err())
	case <-n.done:
		return nil, outcomeUnknown(ErrClosed)
	}
}

// groupCommit is the proposals waiting for an entry. At most
// MaxInflightEntries entries are with Raft at a time; while all are taken,
// proposals gather into the next entry (up to fsm.MaxCommandsPerEntry
// commands and maxEntryBytes), which whoever finishes an entry first
// proposes. hashicorp/raft has each follower make one log write (one fsync
// with the WAL) per AppendEntries, so fewer, fuller entries mean fewer
// fsyncs per command under load, while a lone proposal on an idle node
// still goes out at once, from its caller's own goroutine.
type groupCommit struct {
	mu       sync.Mutex
	queue    []*proposal // in arrival order
	inflight int         // entries with Raft
}

// enqueue adds p; when an entry slot is free it takes the slot and returns
// the next entry's proposals, for the caller to drive.
func (g *groupCommit) enqueue(p *proposal, maxInflight int) []*proposal {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.queue = append(g.queue, p)
	if g.inflight >= max(maxInflight, 1) {
		return nil
	}
	g.inflight++
	return g.takeLocked()
}

// finished frees the slot of an entry Raft is done with, or hands it to
// the proposals that gathered meanwhile (returned, to be driven).
func (g *groupCommit) finished() []*proposal {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) == 0 {
		g.inflight--
		return nil
	}
	return g.takeLocked()
}

// takeLocked removes the next entry's proposals from the queue's front.
func (g *groupCommit) takeLocked() []*proposal {
	var b entryBatch
	i := 0
	for ; i < len(g.queue) && (i == 0 || b.fits(g.queue[i])); i++ {
		b.add(g.queue[i])
	}
	batch := b.props
	rest := copy(g.queue, g.queue[i:])
	clear(g.queue[rest:])
	g.queue = g.queue[:rest]
	return batch
}

// drive hands one entry to Raft, waits for its outcome, delivers every
// proposal's result and then passes the slot on: to the proposals queued
// meanwhile (driven by a new goroutine, since this one's caller is waiting
// for its own answer) or back to the pool.
func (n *Node) drive(batch []*proposal) {
	cmds := make([]*fsm.Command, len(batch))
	for i, p := range batch {
		cmds[i] = p.cmd
	}
	metrics.MeasureSince([]string{"node", "propose_wait"}, batch[0].start)
	proposed := time.Now()
	future := n.raft.Apply(fsm.EncodeEntry(cmds), n.cfg.ApplyTimeout)
	err := proposedError(future.Error())
	metrics.MeasureSince([]string{"node", "raft_apply"}, proposed)
	var results []*fsm.Result
	if err == nil {
		switch v := future.Response().(type) {
		case []*fsm.Result:
			results = v
		case error:
			err = v
		default:
			err = fmt.Errorf("node: unexpected apply response %T", v)
		}
	}
	if next := n.commits.finished(); next != nil {
		go n.drive(next)
	}
	for i, p := range batch {
		if err != nil || i >= len(results) {
			p.done <- proposalResult{err: orErr(err)}
		} else {
			p.done <- proposalResult{res: results[i]}
		}
		<-n.admit
	}
}

// maxEntryBytes bounds the commands' bytes that group commit packs into one
// log entry; a single larger command still gets an entry of its own. It
// bounds what one entry costs every replica's memory (the leader's
// in-flight entries, raft-wal's buffers) and one AppendEntries' size.
const maxEntryBytes = 1 << 20

// entryBatch is the next entry group commit is gathering.
type entryBatch struct {
	props []*proposal
	bytes int
}

func (b *entryBatch) reset() { b.props, b.bytes = b.props[:0], 0 }

func (b *entryBatch) add(p *proposal) {
	b.props = append(b.props, p)
	b.bytes += p.cmd.Size()
}

// fits reports whether p may join the entry.
func (b *entryBatch) fits(p *proposal) bool {
	return len(b.props) < fsm.MaxCommandsPerEntry && b.bytes+p.cmd.Size() <= maxEntryBytes
}

// full reports whether no proposal may join the entry any more.
func (b *entryBatch) full() bool {
	return len(b.props) >= fsm.MaxCommandsPerEntry || b.bytes >= maxEntryBytes
}

func orErr(err error) error {
	if err == nil {
		return fmt.Errorf("node: missing result")
	}
	return err
}
