package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
	"github.com/baton-dev/baton/server/core/node"
)

// clusterStatus is GET /v1/cluster (docs/api.md "Cluster"). node_id, state,
// the snapshot indexes and applied_since_start are Baton's own (docs/api-notes.md).
type clusterStatus struct {
	NodeID                string          `json:"node_id"`
	State                 string          `json:"state"`
	Leader                wire.LeaderInfo `json:"leader"`
	Term                  uint64          `json:"term"`
	CommitIndex           uint64          `json:"commit_index"`
	AppliedIndex          uint64          `json:"applied_index"`
	StateDigest           string          `json:"state_digest"`
	LastSnapshotIndex     uint64          `json:"last_snapshot_index"`
	RestoredSnapshotIndex uint64          `json:"restored_snapshot_index"`
	AppliedSinceStart     uint64          `json:"applied_since_start"`
	Members               []memberStatus  `json:"members"`
	Retries               retryState      `json:"retries"`
	StateSize             stateSize       `json:"state_size"`
	Build                 Build           `json:"build"`
}

// stateSize is the data quotas count and the cluster's limit (0: none).
type stateSize struct {
	Bytes    int64 `json:"bytes"`
	MaxBytes int64 `json:"max_bytes"`
}

// retryState is what the state keeps for exactly-once retries, and its
// replicated bounds (fsm.Limits).
type retryState struct {
	SessionBytes      int64 `json:"session_bytes"`
	SessionBytesLimit int64 `json:"session_bytes_limit"`
	// SessionTenantLimit is one tenant's session bound (0: none).
	SessionTenantLimit int64 `json:"session_tenant_bytes_limit"`
	SessionTTLMs       int64 `json:"session_ttl_ms"`
	SessionsPerTenant  int64 `json:"sessions_per_tenant"`
	IdemBytesLimit     int64 `json:"idempotency_bytes_limit"`
	IdemTenantLimit    int64 `json:"idempotency_tenant_bytes_limit"`
}

func (s *Server) clusterRoutes(add addRoute) {
	add("GET", "/healthz", routeLocal, func(w http.ResponseWriter, _ *http.Request, _ *identity) error {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "node_id": s.cluster.ID(), "version": s.cfg.Build.Version})
		return nil
	})
	add("GET", "/readyz", routeLocal, s.handleReady)
	add("GET", "/metrics", routeLocal, func(w http.ResponseWriter, r *http.Request, _ *identity) error {
		s.metrics.handler().ServeHTTP(w, r)
		return nil
	})
	add("GET", "/v1/cluster", routeRead, s.handleClusterStatus)
	add("POST", "/v1/cluster/members", routeWrite, s.handleMemberAdd, cmd(wire.MemberAdd{}, fsm.KindMemberSet))
	add("DELETE", "/v1/cluster/members/{id}", routeWrite, s.handleMemberRemove, cmd(nil, fsm.KindMemberDelete))
	add("POST", "/v1/cluster/members/{id}/promote", routeWrite, s.handleMemberPromote, cmd(nil))
	add("PUT", "/v1/cluster/members/{id}/meta", routeWrite, s.handleMemberMeta, cmd(wire.MemberMeta{}, fsm.KindMemberSet))
	add("POST", "/v1/cluster/leadership-transfer", routeWrite, s.handleTransfer, cmd(wire.Transfer{}))
	add("GET", "/v1/cluster/backup", routeRead, s.handleBackup)
	add("GET", "/v1/internal/configuration", routeLocalAuth, s.handleConfiguration)
}

// errRemoved is the answer of a node removed from the cluster to every
// request but health, readiness and metrics.
func errRemoved(id string) *apiError {
	ae := errorf(codeUnavailable, "this node (%s) was removed from the cluster; send requests to a member", id)
	ae.Details = map[string]any{"node_id": id, "reason": "removed"}
	return ae
}

// removed reports whether the cluster member says it was removed from the
// configuration (node.Node.Removed).
func (s *Server) removed() bool {
	r, ok := s.cluster.(interface{ Removed() bool })
	return ok && r.Removed()
}

// readyProbeTimeout bounds how long GET /readyz waits for the leader's
// commit index.
const readyProbeTimeout = time.Second

// readyLag is how far a node that has caught up may trail its own commit
// index and stay ready: steady writes always leave a few entries committed
// and not yet applied.
const readyLag = 1024

// handleReady is GET /readyz: 200 once this node can serve every route
// with fresh data. That takes a known leader whose HTTP address this node
// knows (to forward to it), the address of enough voters to place a chunk
// (chunkplane needs a majority), and, once after start, having applied the
// commit index the current leader reported (asked over HTTP: after a
// restart a follower's own commit index stays 0 until the leader's first
// append, so it cannot tell by itself how far behind it is). The leader
// itself needs to have applied its own, non-zero, commit index.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request, _ *identity) error {
	leader, _ := s.cluster.Leader()
	applied, commit := s.fsm.AppliedIndex(), s.cluster.CommitIndex()
	body := map[string]any{"node_id": s.cluster.ID(), "leader": leader, "applied_index": applied, "commit_index": commit}
	reason := s.notReady(r.Context(), leader, applied, commit, body)
	if reason == "" {
		writeJSON(w, http.StatusOK, body)
		return nil
	}
	// Not ready: the error shape of every other failure, with the same
	// figures as details.
	ae := errorf(codeUnavailable, "node %s is not ready: %s", s.cluster.ID(), reason)
	ae.Details = body
	return ae
}

func (s *Server) notReady(ctx context.Context, leader string, applied, commit uint64, body map[string]any) string {
	switch {
	case s.removed():
		body["reason"] = "removed"
		return "this node was removed from the cluster"
	case leader == "":
		return "no known leader"
	case s.caughtUp.Load() && commit > applied+readyLag:
		// Once caught up, a lag that writes always leave (an entry or a
		// few committed, not applied yet) is no reason to be taken out
		// of service; falling far behind is.
		return fmt.Sprintf("applying the log: %d entries behind its commit index", commit-applied)
	case s.cluster.HTTPAddrOf(leader) == "":
		return fmt.Sprintf("the HTTP address of the leader %s is not known yet", leader)
	}
	if !s.caughtUp.Load() {
		// The target is fixed by the first answer: the commit index of
		// the leader (its own, on the leader) as it was when this node
		// began catching up. A target asked anew each time would move on
		// with every write, and a node applying as fast as the leader
		// commits would stay one entry short for as long as a client
		// writes.
		target := s.catchUpTarget.Load()
		if target == 0 {
			target = commit
			if !s.cluster.IsLeader() {
				ctx, cancel := context.WithTimeout(ctx, readyProbeTimeout)
				defer cancel()
				c, err := s.proxy.leaderCommit(ctx)
				if err != nil {
					return fmt.Sprintf("cannot learn the leader's commit index: %v", err)
				}
				target = max(c, commit)
			}
			if target != 0 && !s.catchUpTarget.CompareAndSwap(0, target) {
				target = s.catchUpTarget.Load()
			}
		}
		body["leader_commit_index"] = target
		switch {
		case target == 0:
			return "the leader has committed nothing yet"
		case applied < target:
			return fmt.Sprintf("catching up: applied %d of the leader's commit index %d (as it was when this node began catching up)", applied, target)
		}
		s.caughtUp.Store(true)
	}
	if known, need := s.votersKnown(); known < need {
		return fmt.Sprintf("knows the HTTP address of %d voting peers and needs %d to place chunks", known, need)
	}
	return ""
}

// votersKnown is how many voting peers (this node aside) have a known
// HTTP address, and how many a chunk upload needs: a majority of voters,
// this node included when it votes (as chunkplane.Replicate counts).
func (s *Server) votersKnown() (known, need int) {
	members, err := s.cluster.Members()
	if err != nil {
		return 0, 1
	}
	voters, selfVoter := 0, false
	for _, m := range members {
		if !m.Voter {
			continue
		}
		voters++
		if m.ID == s.cluster.ID() {
			selfVoter = true
		} else if m.HTTPAddr != "" {
			known++
		}
	}
	need = voters/2 + 1
	if selfVoter {
		need--
	}
	return known, need
}

func (s *Server) handleClusterStatus(w http.ResponseWriter, r *http.Request, id *identity) error {
	if err := id.requireAdmin(); err != nil {
		return err
	}
	probe, err := boolParam(r, "probe")
	if err != nil {
		return err
	}
	infos, err := s.cluster.Members()
	if err != nil {
		return unavailable(err)
	}
	members := make([]memberStatus, len(infos))
	for i, m := range infos {
		members[i] = memberStatus{MemberInfo: m}
	}
	if probe {
		s.probeMembers(r.Context(), members)
	}
	st := s.fsm.Status()
	lid, laddr := s.cluster.Leader()
	state := "Follower"
	if s.cluster.IsLeader() {
		state = "Leader"
	}
	for _, m := range members {
		if m.ID == s.cluster.ID() && !m.Voter {
			state = "Nonvoter"
		}
	}
	out := clusterStatus{
		NodeID: s.cluster.ID(), State: state,
		Leader: wire.LeaderInfo{ID: lid, RaftAddr: laddr, HTTPAddr: s.cluster.HTTPAddrOf(lid)},
		Term:   s.cluster.Term(), CommitIndex: s.cluster.CommitIndex(),
		AppliedIndex: st.AppliedIndex, StateDigest: st.StateDigest,
		LastSnapshotIndex: s.cluster.LastSnapshotIndex(), RestoredSnapshotIndex: st.RestoredIndex,
		AppliedSinceStart: st.AppliedCount, Members: members,
	}
	out.Build = s.cfg.Build
	lim := s.fsm.Limits()
	out.StateSize = stateSize{Bytes: s.fsm.StateBytes(), MaxBytes: lim.MaxStateBytes}
	out.Retries = retryState{SessionBytes: st.SessionBytes, SessionBytesLimit: lim.SessionBytes, SessionTenantLimit: lim.SessionTenantBytes, SessionTTLMs: lim.SessionTTL,
		SessionsPerTenant: lim.SessionsPerTenant, IdemBytesLimit: lim.IdemBytes, IdemTenantLimit: lim.IdemTenantBytes}
	return s.readReply(w, st.AppliedIndex, out)
}

func (s *Server) handleMemberAdd(w http.ResponseWriter, r *http.Request, id *identity) error {
	if err := id.requireAdmin(); err != nil {
		return err
	}
	var req wire.MemberAdd
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	if err := validateMember(req); err != nil {
		return err
	}
	voter := req.Voter == nil || *req.Voter
	if err = s.cluster.AddMember(r.Context(), req.ID, req.RaftAddr, voter); err != nil {
		return unavailable(err)
	}
	res, err := s.propose(r, id, "", fsm.KindMemberSet, &fsm.Member{ID: req.ID, RaftAddr: req.RaftAddr, HTTPAddr: req.HTTPAddr}, body)
	if err != nil {
		return err
	}
	return reply(w, res, nil)
}

func validateMember(req wire.MemberAdd) error {
	if err := validName("member id", req.ID); err != nil {
		return err
	}
	if req.RaftAddr == "" || req.HTTPAddr == "" {
		return badRequest("raft_addr and http_addr are required")
	}
	return nil
}

func (s *Server) handleMemberRemove(w http.ResponseWriter, r *http.Request, id *identity) error {
	if err := id.requireAdmin(); err != nil {
		return err
	}
	mid := r.PathValue("id")
	if err := s.cluster.RemoveMember(r.Context(), mid); err != nil {
		if errors.Is(err, node.ErrUnknownMember) {
			return errorf(fsm.CodeNotFound, "no member %q", mid)
		}
		return unavailable(err)
	}
	res, err := s.propose(r, id, "", fsm.KindMemberDelete, &fsm.MemberDeleteArgs{ID: mid}, nil)
	if err != nil {
		return err
	}
	return reply(w, res, nil)
}

// handleMemberMeta records a member's HTTP address; nodes call it for
// themselves once they know a leader (see registerLoop).
// handleMemberPromote makes a non-voter a voter once it has caught up
// (etcd's learner promotion): the leader asks the member's own /readyz,
// which is 200 only once it has applied the commit index the leader
// reported to it, and refuses with 503 until then. Promoting a voter is a
// no-op.
func (s *Server) handleMemberPromote(w http.ResponseWriter, r *http.Request, id *identity) error {
	if err := id.requireAdmin(); err != nil {
		return err
	}
	mid := r.PathValue("id")
	members, err := s.cluster.Members()
	if err != nil {
		return unavailable(err)
	}
	i := slices.IndexFunc(members, func(m node.MemberInfo) bool { return m.ID == mid })
	if i < 0 {
		return errorf(fsm.CodeNotFound, "no member %q", mid)
	}
	m := members[i]
	if !m.Voter {
		if m.HTTPAddr == "" {
			return errorf(codeUnavailable, "member %s has not published its HTTP address yet, so whether it has caught up is not known", mid)
		}
		if err := s.proxy.ready(r.Context(), m.HTTPAddr); err != nil {
			return errorf(codeUnavailable, "member %s has not caught up with the log yet, so it stays a non-voter: %v", mid, err)
		}
		if err := s.cluster.AddMember(r.Context(), m.ID, m.RaftAddr, true); err != nil {
			return unavailable(err)
		}
		m.Voter = true
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

func (s *Server) handleMemberMeta(w http.ResponseWriter, r *http.Request, id *identity) error {
	if err := id.requireAdmin(); err != nil {
		return err
	}
	var meta wire.MemberMeta
	body, err := s.readJSON(w, r, &meta)
	if err != nil {
		return err
	}
	req := wire.MemberAdd{ID: r.PathValue("id"), RaftAddr: meta.RaftAddr, HTTPAddr: meta.HTTPAddr}
	if err := validateMember(req); err != nil {
		return err
	}
	res, err := s.propose(r, id, "", fsm.KindMemberSet, &fsm.Member{ID: req.ID, RaftAddr: req.RaftAddr, HTTPAddr: req.HTTPAddr}, body)
	if err != nil {
		return err
	}
	return reply(w, res, nil)
}

func (s *Server) handleTransfer(w http.ResponseWriter, r *http.Request, id *identity) error {
	if err := id.requireAdmin(); err != nil {
		return err
	}
	var req wire.Transfer
	b, err := readBody(w, r, s.cfg.MaxJSONBody, s.cfg.BodyTimeout)
	if err != nil {
		return err
	}
	if len(b) > 0 {
		if err := decodeStrict(b, &req); err != nil {
			return err
		}
	}
	if err := s.cluster.TransferLeadership(r.Context(), req.To); err != nil {
		if errors.Is(err, node.ErrUnknownMember) {
			return errorf(fsm.CodeNotFound, "no member %q", req.To)
		}
		return unavailable(err)
	}
	lid, _ := s.cluster.Leader()
	writeJSON(w, http.StatusOK, map[string]string{"previous": s.cluster.ID(), "leader": lid})
	return nil
}
