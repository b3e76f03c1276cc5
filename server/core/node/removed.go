package node

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
)

// A member removed from the configuration must stop serving: it no longer
// receives the log, so whatever it answers from its state grows staler. A
// node counts as removed when the newest Raft configuration it holds lists
// other servers but not itself, after it was once a member: since it
// started (it was in a configuration it held), or before (it opened with
// Raft state of its own). A node that joins replays old configurations
// without itself while it catches up; it has no state when it opens and
// has not been in a configuration yet, so it is not taken for removed.
// Being added back makes the node a member again.
//
// hashicorp/raft does not always deliver the configuration that removes a
// server to that server (the leader stops replicating to it once the entry
// is appended). A node that never receives it keeps its old configuration
// and knows no leader. So a node that has known no leader for a while
// asks its peers (the server's removalLoop), and when the leader answers
// with a configuration that does not list this node (the
// leader's LeaderConfiguration), the node takes its word (LearnRemoval).
// Only the leader's word undoes that (ForgetRemoval): once this node
// knows a leader again, the server asks it, and a leader whose
// configuration lists the node again (it was added back) clears it. A
// leader's contact alone is not enough: the leader that removed the node
// may still send it a heartbeat or two after the removal.

// membershipPoll is how often the node looks at its configuration.
const membershipPoll = 100 * time.Millisecond

func (n *Node) membershipLoop() {
	defer n.wg.Done()
	t := time.NewTicker(membershipPoll)
	defer t.Stop()
	for {
		n.checkMembership()
		select {
		case <-n.done:
			return
		case <-t.C:
		}
	}
}

func (n *Node) checkMembership() {
	n.memberMu.Lock()
	defer n.memberMu.Unlock()
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	servers := f.Configuration().Servers
	in := false
	for _, s := range servers {
		in = in || s.ID == raft.ServerID(n.cfg.ID)
	}
	if in {
		n.wasMember.Store(true)
	}
	removed := ((len(servers) > 0 && !in) || n.removedByLeader.Load()) && n.wasMember.Load()
	if was := n.removed.Swap(removed); was != removed {
		if removed {
			n.log.Warn("this node was removed from the cluster; it refuses requests until it is added again")
		} else {
			n.log.Info("this node is a member of the cluster again")
		}
	}
}

// Removed reports whether this node was removed from the cluster's
// configuration (see above); a removed node must not serve.
func (n *Node) Removed() bool { return n.removed.Load() }

// LearnRemoval takes the leader's word that its configuration
// does not list this node: the node refuses requests from now on
// (Removed), until ForgetRemoval.
func (n *Node) LearnRemoval() {
	n.removedByLeader.Store(true)
	n.checkMembership()
}

// ForgetRemoval takes the leader's word that its configuration
// lists this node again: the node's own configuration decides again.
func (n *Node) ForgetRemoval() {
	n.removedByLeader.Store(false)
	n.checkMembership()
}

// RemovedByLeader reports whether the node holds the leader's word that
// it was removed (LearnRemoval).
func (n *Node) RemovedByLeader() bool { return n.removedByLeader.Load() }

// LeaderConfiguration returns, on the leader, the servers of its newest
// configuration, once a quorum has confirmed it still leads (VerifyLeader:
// heartbeats, no log entry, so nothing the state machine would have to
// apply). The configuration may be one the leader has not committed yet;
// one taken for a removal that then fails costs the node availability
// until a leader listing it answers, never safety. On a follower it is
// ErrNotLeader.
func (n *Node) LeaderConfiguration(ctx context.Context) ([]string, error) {
	if !n.IsLeader() {
		return nil, ErrNotLeader
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, translate(err)
	}
	servers := []string{}
	for _, s := range f.Configuration().Servers {
		servers = append(servers, string(s.ID))
	}
	if err := n.verifier.Verify(ctx); err != nil {
		return nil, translate(err)
	}
	return servers, nil
}
