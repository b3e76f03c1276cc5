package node

import (
	"context"
	"fmt"
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
// closes. Concurrent calls are coalesced into one log entry (group commit):
// the proposer takes every proposal waiting when it wakes, up to
// fsm.MaxCommandsPerEntry, so a busy cluster writes fewer, larger entries.
func (n *Node) Apply(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error) {
	if !n.IsLeader() {
		return nil, ErrNotLeader
	}
	p := &proposal{cmd: cmd, done: make(chan proposalResult, 1), start: time.Now()}
	select {
	case n.proposals <- p:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-n.done:
		return nil, ErrClosed
	}
	select {
	case r := <-p.done:
		metrics.MeasureSince([]string{"node", "apply"}, p.start)
		return r.res, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-n.done:
		return nil, ErrClosed
	}
}

// proposeLoop is group commit. At most cfg.MaxInflightEntries entries are
// with Raft at a time; while all slots are taken, proposals gather into the
// next entry (up to fsm.MaxCommandsPerEntry commands and maxEntryBytes).
// hashicorp/raft has each follower make one log write (one fsync with the
// WAL) per AppendEntries, so fewer, fuller entries mean fewer fsyncs per
// command under load, while a lone proposal on an idle node still goes out
// at once.
func (n *Node) proposeLoop() {
	defer n.wg.Done()
	slots := make(chan struct{}, max(n.cfg.MaxInflightEntries, 1))
	var b entryBatch
	var next *proposal // the proposal that did not fit in the last entry
	for {
		b.reset()
		if next != nil {
			b.add(next)
			next = nil
		} else {
			select {
			case p := <-n.proposals:
				b.add(p)
			case <-n.done:
				return
			}
		}
		haveSlot := false
	gather:
		for !b.full() {
			select {
			case p := <-n.proposals:
				if !b.fits(p) {
					next = p
					break gather
				}
				b.add(p)
			case slots <- struct{}{}:
				haveSlot = true
				break gather
			case <-n.done:
				return
			}
		}
		if !haveSlot { // a full entry still waits for its slot
			select {
			case slots <- struct{}{}:
			case <-n.done:
				return
			}
		}
		n.propose(b.props, func() { <-slots })
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

// propose hands one entry to Raft and waits for its outcome in the
// background, so the next entry can be proposed while this one replicates.
// release frees the entry's slot once Raft is done with it.
func (n *Node) propose(batch []*proposal, release func()) {
	cmds := make([]*fsm.Command, len(batch))
	for i, p := range batch {
		cmds[i] = p.cmd
	}
	waiters := append([]*proposal(nil), batch...)
	metrics.MeasureSince([]string{"node", "propose_wait"}, batch[0].start)
	proposed := time.Now()
	future := n.raft.Apply(fsm.EncodeEntry(cmds), n.cfg.ApplyTimeout)
	go func() {
		err := translate(future.Error())
		metrics.MeasureSince([]string{"node", "raft_apply"}, proposed)
		release()
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
		for i, p := range waiters {
			if err != nil || i >= len(results) {
				p.done <- proposalResult{err: orErr(err)}
				continue
			}
			p.done <- proposalResult{res: results[i]}
		}
	}()
}

func orErr(err error) error {
	if err == nil {
		return fmt.Errorf("node: missing result")
	}
	return err
}
