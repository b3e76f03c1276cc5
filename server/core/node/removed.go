package node

import (
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
// that its configuration does not list this node, the node takes its word
// (LearnRemoval). That holds until this node hears from a leader again,
// which a leader only sends to the servers of its configuration: then the
// node's own configuration decides again (it was added back). A removal
// the leader has not committed yet could still be undone by the next
// leader; a node that took it for done refuses requests until that leader
// reaches it, which costs availability, never safety.

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
	if leader, _ := n.raft.LeaderWithID(); leader != "" {
		n.removedByLeader.Store(false)
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

// LearnRemoval takes the leader's word that its configuration does not
// list this node: the node refuses requests from now on (Removed), until
// it hears from a leader again.
func (n *Node) LearnRemoval() {
	n.removedByLeader.Store(true)
	n.checkMembership()
}
