package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/baton-dev/baton/fsm/wire"
)

// ClusterStatus is GET /v1/cluster as seen by the answering node.
type ClusterStatus struct {
	NodeID                string     `json:"node_id"` // the answering node
	State                 string     `json:"state"`   // its Raft state: Leader, Follower, Candidate...
	Leader                LeaderInfo `json:"leader"`  // zero when no leader is known
	Term                  uint64     `json:"term"`
	CommitIndex           uint64     `json:"commit_index"`
	AppliedIndex          uint64     `json:"applied_index"`
	LastSnapshotIndex     uint64     `json:"last_snapshot_index"`
	RestoredSnapshotIndex uint64     `json:"restored_snapshot_index"`
	StateDigest           string     `json:"state_digest"` // digest of the state at AppliedIndex
	Members               []Member   `json:"members"`
	Build                 Build      `json:"build"` // the answering node's
}

// Build is a node's version, commit and Go version.
type Build = wire.Build

// LeaderInfo identifies the leader.
type LeaderInfo = wire.LeaderInfo

// Member is one node of the cluster configuration.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	Voter    bool   `json:"voter"`
	State    string `json:"state,omitempty"` // reported by the server; ignored by AddMember
}

// Cluster returns the cluster status. Admin only.
func (c *Client) Cluster(ctx context.Context, opts ...RequestOption) (*ClusterStatus, error) {
	var out ClusterStatus
	if _, err := c.Do(ctx, http.MethodGet, "/v1/cluster", nil, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// ClusterAt asks one node for its own view (stale read, single attempt, no
// failover): its Raft state, indexes and state digest.
func (c *Client) ClusterAt(ctx context.Context, endpoint string, opts ...RequestOption) (*ClusterStatus, error) {
	return c.Cluster(ctx, append([]RequestOption{Stale(), At(endpoint)}, opts...)...)
}

// AddMember adds a node to the cluster configuration. Admin only.
func (c *Client) AddMember(ctx context.Context, m Member, opts ...RequestOption) error {
	if err := required("member id", m.ID, "raft address", m.RaftAddr); err != nil {
		return err
	}
	in := wire.MemberAdd{ID: m.ID, RaftAddr: m.RaftAddr, HTTPAddr: m.HTTPAddr, Voter: &m.Voter}
	_, err := c.Do(ctx, http.MethodPost, "/v1/cluster/members", in, nil, opts...)
	return err
}

// RemoveMember removes a node from the cluster configuration. Admin only.
func (c *Client) RemoveMember(ctx context.Context, id string, opts ...RequestOption) error {
	if err := required("member id", id); err != nil {
		return err
	}
	_, err := c.Do(ctx, http.MethodDelete, "/v1/cluster/members/"+url.PathEscape(id), nil, nil, opts...)
	return err
}

// PromoteMember makes a non-voter a voter once it has caught up with the
// log; until then the cluster refuses with ErrUnavailable (retry later).
// Promoting a voter changes nothing. Admin only.
func (c *Client) PromoteMember(ctx context.Context, id string, opts ...RequestOption) (*Member, error) {
	if err := required("member id", id); err != nil {
		return nil, err
	}
	var m Member
	if _, err := c.Do(ctx, http.MethodPost, "/v1/cluster/members/"+url.PathEscape(id)+"/promote", nil, &m, opts...); err != nil {
		return nil, err
	}
	return &m, nil
}

// TransferLeadership asks the leader to hand over to node to, or to any
// suitable node when to is empty. Admin only.
func (c *Client) TransferLeadership(ctx context.Context, to string, opts ...RequestOption) error {
	in := wire.Transfer{To: to}
	_, err := c.Do(ctx, http.MethodPost, "/v1/cluster/leadership-transfer", in, nil, opts...)
	return err
}

// Healthz returns nil while the node at endpoint serves.
func (c *Client) Healthz(ctx context.Context, endpoint string) error {
	_, err := c.Do(ctx, http.MethodGet, "/healthz", nil, nil, At(endpoint))
	return err
}

// Readyz reports whether the node at endpoint knows a leader and has caught
// up with the commit index it last heard. A 503 is (false, nil); err is set
// only when the node could not be asked or answered something unexpected.
func (c *Client) Readyz(ctx context.Context, endpoint string) (bool, error) {
	_, err := c.Do(ctx, http.MethodGet, "/readyz", nil, nil, At(endpoint))
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusServiceUnavailable {
		return false, nil
	}
	return err == nil, err
}
