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
// next entry (up to fsm.MaxCommandsPerEntry). hashicorp/raft has each
// follower make one log write (one fsync with the WAL) per AppendEntries, so fewer,
// fuller entries mean fewer fsyncs per command under load, while a lone
// proposal on an idle node still goes out at once.
func (n *Node) proposeLoop() {
	defer n.wg.Done()
	slots := make(chan struct{}, max(n.cfg.MaxInflightEntries, 1))
	batch := make([]*proposal, 0, fsm.MaxCommandsPerEntry)
	for {
		select {
		case p := <-n.proposals:
			batch = append(batch[:0], p)
		case <-n.done:
			return
		}
	gather:
		for len(batch) < fsm.MaxCommandsPerEntry {
			select {
			case p := <-n.proposals:
				batch = append(batch, p)
			case slots <- struct{}{}:
				break gather
			case <-n.done:
				return
			}
		}
		if len(batch) == fsm.MaxCommandsPerEntry {
			select { // a full entry still waits for its slot
			case slots <- struct{}{}:
			case <-n.done:
				return
			}
		}
		n.propose(batch, func() { <-slots })
	}
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
