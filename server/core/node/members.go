package node

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/hashicorp/raft"
)

// MemberInfo is a member as /v1/cluster reports it.
type MemberInfo struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	Voter    bool   `json:"voter"`
	State    string `json:"state"`
}

// Members merges Raft's configuration with the replicated HTTP addresses.
func (n *Node) Members() ([]MemberInfo, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, translate(err)
	}
	meta := n.FSM.Members()
	leaderID, _ := n.Leader()
	var out []MemberInfo
	for _, s := range f.Configuration().Servers {
		m := MemberInfo{ID: string(s.ID), RaftAddr: string(s.Address), HTTPAddr: meta[string(s.ID)].HTTPAddr,
			Voter: s.Suffrage == raft.Voter}
		switch {
		case string(s.ID) == leaderID:
			m.State = "leader"
		case s.Suffrage == raft.Voter:
			m.State = "follower"
		default:
			m.State = "nonvoter"
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// HTTPAddrOf returns the replicated HTTP address of a member, if known.
func (n *Node) HTTPAddrOf(id string) string {
	if id == n.cfg.ID {
		return n.cfg.HTTPAddr
	}
	return n.FSM.Members()[id].HTTPAddr
}

// AddMember adds a voter or non-voter to the Raft configuration.
func (n *Node) AddMember(ctx context.Context, id, raftAddr string, voter bool) error {
	var f raft.IndexFuture
	timeout := n.cfg.ApplyTimeout
	if voter {
		f = n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, timeout)
	} else {
		f = n.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, timeout)
	}
	return waitFuture(ctx, f, timeout)
}

// RemoveMember removes a server from the Raft configuration.
func (n *Node) RemoveMember(ctx context.Context, id string) error {
	known := false
	members, err := n.Members()
	if err != nil {
		return err
	}
	for _, m := range members {
		known = known || m.ID == id
	}
	if !known {
		return fmt.Errorf("%w: %q", ErrUnknownMember, id)
	}
	return waitFuture(ctx, n.raft.RemoveServer(raft.ServerID(id), 0, n.cfg.ApplyTimeout), n.cfg.ApplyTimeout)
}

// ErrUnknownMember is returned when removing a server that is not a member.
var ErrUnknownMember = fmt.Errorf("node: no such member")

// TransferLeadership hands leadership to id (or any voter when empty).
// Bounded: raft#487 and #581 report transfers that block.
func (n *Node) TransferLeadership(ctx context.Context, id string) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	var f raft.Future
	if id == "" {
		f = n.raft.LeadershipTransfer()
	} else {
		addr := ""
		members, err := n.Members()
		if err != nil {
			return err
		}
		for _, m := range members {
			if m.ID == id {
				addr = m.RaftAddr
			}
		}
		if addr == "" {
			return fmt.Errorf("%w: %q", ErrUnknownMember, id)
		}
		f = n.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(addr))
	}
	return waitFuture(ctx, f, 2*n.cfg.ElectionTimeout+time.Second)
}

func waitFuture(ctx context.Context, f raft.Future, timeout time.Duration) error {
	ctx, cancel := bounded(ctx, timeout)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- f.Error() }()
	select {
	case err := <-errc:
		return translate(err)
	case <-ctx.Done():
		return fmt.Errorf("%w: %v", ErrUnavailable, ctx.Err())
	}
}
