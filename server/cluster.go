package server

import (
	"errors"
	"net/http"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/server/core/node"
)

type leaderInfo struct {
	ID       string `json:"id"`
	HTTPAddr string `json:"http_addr"`
	RaftAddr string `json:"raft_addr"`
}

// clusterStatus is GET /v1/cluster (docs/api.md "Cluster"). node_id, state,
// the snapshot indexes and applied_since_start are Baton's own (docs/api-notes.md).
type clusterStatus struct {
	NodeID                string            `json:"node_id"`
	State                 string            `json:"state"`
	Leader                leaderInfo        `json:"leader"`
	Term                  uint64            `json:"term"`
	CommitIndex           uint64            `json:"commit_index"`
	AppliedIndex          uint64            `json:"applied_index"`
	StateDigest           string            `json:"state_digest"`
	LastSnapshotIndex     uint64            `json:"last_snapshot_index"`
	RestoredSnapshotIndex uint64            `json:"restored_snapshot_index"`
	AppliedSinceStart     uint64            `json:"applied_since_start"`
	Members               []node.MemberInfo `json:"members"`
	Retries               retryState        `json:"retries"`
	StateSize             stateSize         `json:"state_size"`
	Build                 Build             `json:"build"`
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
	SessionTTLMs      int64 `json:"session_ttl_ms"`
	SessionsPerTenant int64 `json:"sessions_per_tenant"`
	IdemBytesLimit    int64 `json:"idempotency_bytes_limit"`
	IdemTenantLimit   int64 `json:"idempotency_tenant_bytes_limit"`
}

type memberRequest struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	Voter    *bool  `json:"voter"`
}

type transferRequest struct {
	To string `json:"to"`
}

func (s *Server) clusterRoutes(add func(string, string, routeKind, handlerFunc)) {
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
	add("POST", "/v1/cluster/members", routeWrite, s.handleMemberAdd)
	add("DELETE", "/v1/cluster/members/{id}", routeWrite, s.handleMemberRemove)
	add("PUT", "/v1/cluster/members/{id}/meta", routeWrite, s.handleMemberMeta)
	add("POST", "/v1/cluster/leadership-transfer", routeWrite, s.handleTransfer)
	add("GET", "/v1/cluster/backup", routeRead, s.handleBackup)
}

func (s *Server) handleReady(w http.ResponseWriter, _ *http.Request, _ *identity) error {
	leader, _ := s.cluster.Leader()
	applied, commit := s.fsm.AppliedIndex(), s.cluster.CommitIndex()
	body := map[string]any{"node_id": s.cluster.ID(), "leader": leader, "applied_index": applied, "commit_index": commit}
	reason := ""
	switch {
	case leader == "":
		reason = "no known leader"
	case applied < commit:
		reason = "applying the log"
	}
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

func (s *Server) handleClusterStatus(w http.ResponseWriter, _ *http.Request, id *identity) error {
	if err := id.requireAdmin(); err != nil {
		return err
	}
	members, err := s.cluster.Members()
	if err != nil {
		return unavailable(err)
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
		Leader: leaderInfo{ID: lid, RaftAddr: laddr, HTTPAddr: s.cluster.HTTPAddrOf(lid)},
		Term:   s.cluster.Term(), CommitIndex: s.cluster.CommitIndex(),
		AppliedIndex: st.AppliedIndex, StateDigest: st.StateDigest,
		LastSnapshotIndex: s.cluster.LastSnapshotIndex(), RestoredSnapshotIndex: st.RestoredIndex,
		AppliedSinceStart: st.AppliedCount, Members: members,
	}
	out.Build = s.cfg.Build
	lim := s.fsm.Limits()
	out.StateSize = stateSize{Bytes: s.fsm.StateBytes(), MaxBytes: lim.MaxStateBytes}
	out.Retries = retryState{SessionBytes: st.SessionBytes, SessionBytesLimit: lim.SessionBytes, SessionTTLMs: lim.SessionTTL,
		SessionsPerTenant: lim.SessionsPerTenant, IdemBytesLimit: lim.IdemBytes, IdemTenantLimit: lim.IdemTenantBytes}
	return s.readReply(w, st.AppliedIndex, out)
}

func (s *Server) handleMemberAdd(w http.ResponseWriter, r *http.Request, id *identity) error {
	if err := id.requireAdmin(); err != nil {
		return err
	}
	var req memberRequest
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

func validateMember(req memberRequest) error {
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
func (s *Server) handleMemberMeta(w http.ResponseWriter, r *http.Request, id *identity) error {
	if err := id.requireAdmin(); err != nil {
		return err
	}
	var req memberRequest
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	req.ID = r.PathValue("id")
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
	var req transferRequest
	b, err := readBody(w, r, s.cfg.MaxJSONBody)
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
