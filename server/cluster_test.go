package server

import (
	"encoding/json"
	"fmt"
	"github.com/baton-dev/baton/fsm/wire"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// indexOf parses X-Baton-Index, failing the test when it is missing.
func indexOf(t testing.TB, h http.Header) uint64 {
	t.Helper()
	v := h.Get("X-Baton-Index")
	idx, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("X-Baton-Index = %q: %v", v, err)
	}
	return idx
}

// TestFollowerForwardsWrites: a write sent to a follower is forwarded to the
// leader and acknowledged, and a linearizable read from any node sees it.
func TestFollowerForwardsWrites(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.WaitForLeader(t)
	if got := c.Leader(); got != leader {
		t.Fatalf("Leader: got %d, want %d", got, leader)
	}
	follower := c.Followers(leader)[0]

	status, h, body := c.do(t, follower, "PUT", "/v1/tenants/x", nil, adminAuth())
	if status != http.StatusCreated {
		t.Fatalf("PUT /v1/tenants/x on follower: got %d %s, want 201", status, body)
	}
	if got, want := h.Get(headerLeader), c.nodes[leader].httpAddr; got != want {
		t.Errorf("forwarded answer's %s: got %q, want the leader's HTTP address %q", headerLeader, got, want)
	}
	writeIndex := indexOf(t, h)
	if writeIndex == 0 {
		t.Fatalf("X-Baton-Index: got 0, want the index of the write")
	}
	// Acknowledged means applied on the leader, not merely received.
	if got := c.nodes[leader].fsm.AppliedIndex(); got < writeIndex {
		t.Errorf("leader applied index: got %d, want >= %d", got, writeIndex)
	}
	if !c.nodes[leader].fsm.TenantExists("x") {
		t.Errorf("leader: tenant x does not exist after an acknowledged write")
	}

	for i := range c.nodes {
		status, h, body := c.do(t, i, "GET", "/v1/tenants", nil, adminAuth())
		if status != http.StatusOK {
			t.Fatalf("GET /v1/tenants on %s: got %d %s, want 200", c.nodes[i].id, status, body)
		}
		var got struct{ Tenants []string }
		decodeBody(t, body, &got)
		if !slices.Contains(got.Tenants, "x") {
			t.Errorf("GET /v1/tenants on %s: got %v, want it to contain x", c.nodes[i].id, got.Tenants)
		}
		if idx := indexOf(t, h); idx < writeIndex {
			t.Errorf("GET /v1/tenants on %s: X-Baton-Index got %d, want >= %d", c.nodes[i].id, idx, writeIndex)
		}
	}

	// The same PUT again confirms (200) instead of creating.
	status, _, body = c.do(t, c.Followers(leader)[1], "PUT", "/v1/tenants/x", nil, adminAuth())
	if status != http.StatusOK {
		t.Errorf("second PUT /v1/tenants/x: got %d %s, want 200", status, body)
	}
	c.WaitConverged(t)
}

// TestStaleReadServedLocally: ?consistency=stale on a follower is answered
// from its own state, without a request to the leader.
func TestStaleReadServedLocally(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.WaitForLeader(t)
	follower := c.Followers(leader)[0]
	if status, _, body := c.do(t, leader, "PUT", "/v1/tenants/acme", nil, adminAuth()); status != http.StatusCreated {
		t.Fatalf("PUT /v1/tenants/acme: got %d %s, want 201", status, body)
	}
	st := c.WaitConverged(t)

	leaderBefore := requestsTotal(t, c.nodes[leader].srv)
	followerBefore := requestsTotal(t, c.nodes[follower].srv)
	status, h, body := c.do(t, follower, "GET", "/v1/tenants?consistency=stale", nil, adminAuth())
	if status != http.StatusOK {
		t.Fatalf("stale GET /v1/tenants on follower: got %d %s, want 200", status, body)
	}
	var got struct{ Tenants []string }
	decodeBody(t, body, &got)
	if !slices.Equal(got.Tenants, []string{"acme"}) {
		t.Errorf("stale GET /v1/tenants: got %v, want [acme]", got.Tenants)
	}
	if idx := indexOf(t, h); idx != st.AppliedIndex {
		t.Errorf("stale read X-Baton-Index: got %d, want the follower's applied index %d", idx, st.AppliedIndex)
	}
	if after := requestsTotal(t, c.nodes[leader].srv); after != leaderBefore {
		t.Errorf("leader's baton_http_requests_total: got %v after a stale follower read, want unchanged %v", after, leaderBefore)
	}
	if after := requestsTotal(t, c.nodes[follower].srv); after != followerBefore+1 {
		t.Errorf("follower's baton_http_requests_total: got %v, want %v (the counter works)", after, followerBefore+1)
	}

	// The same read without ?consistency=stale does reach the leader.
	if status, _, body := c.do(t, follower, "GET", "/v1/tenants", nil, adminAuth()); status != http.StatusOK {
		t.Fatalf("GET /v1/tenants on follower: got %d %s, want 200", status, body)
	}
	if after := requestsTotal(t, c.nodes[leader].srv); after != leaderBefore+1 {
		t.Errorf("leader's baton_http_requests_total after a linearizable follower read: got %v, want %v", after, leaderBefore+1)
	}
}

// TestNoQuorum: with 2 of 3 nodes stopped, the survivor refuses writes and
// linearizable reads with 503 unavailable and Retry-After within the request
// timeout, and still answers stale reads from its own state.
func TestNoQuorum(t *testing.T) {
	for _, survivorLeads := range []bool{false, true} {
		t.Run(fmt.Sprintf("survivor_was_leader=%v", survivorLeads), func(t *testing.T) {
			c := newCluster(t, 3)
			leader := c.WaitForLeader(t)
			if status, _, body := c.do(t, leader, "PUT", "/v1/tenants/acme", nil, adminAuth()); status != http.StatusCreated {
				t.Fatalf("PUT /v1/tenants/acme: got %d %s, want 201", status, body)
			}
			c.WaitConverged(t)
			survivor := c.Followers(leader)[0]
			if survivorLeads {
				survivor = leader
			}
			for i := range c.nodes {
				if i != survivor {
					c.StopNode(i)
				}
			}

			for _, req := range []struct{ method, path string }{
				{"PUT", "/v1/tenants/late"},
				{"POST", "/v1/tenants/acme/principals"},
				{"GET", "/v1/tenants"},
			} {
				body := `{"name":"p","grants":[]}`
				start := time.Now()
				status, h, resp := c.do(t, survivor, req.method, req.path, body, adminAuth())
				elapsed := time.Since(start)
				// A leader that has not yet seen it lost its quorum proposes a
				// write, and can then only say its outcome is unknown.
				proposed := req.method != "GET" && status == http.StatusGatewayTimeout && errorCode(resp) == codeOutcomeUnknown
				if !proposed && (status != http.StatusServiceUnavailable || errorCode(resp) != codeUnavailable) {
					t.Errorf("%s %s without quorum: got %d %s, want 503 unavailable (or, a write, 504 outcome_unknown)", req.method, req.path, status, resp)
				}
				if h.Get("Retry-After") == "" {
					t.Errorf("%s %s without quorum: no Retry-After header", req.method, req.path)
				}
				if limit := c.requestTimeout + time.Second; elapsed > limit {
					t.Errorf("%s %s without quorum took %s, want under %s", req.method, req.path, elapsed, limit)
				}
			}
			if c.nodes[survivor].fsm.TenantExists("late") {
				t.Errorf("tenant late exists on the survivor, want no write without quorum")
			}

			// Not ready: 503 in the error shape, with the figures as details.
			waitFor(t, "survivor not ready", func() string {
				status, h, body := c.do(t, survivor, "GET", "/readyz", nil, nil)
				var got struct {
					Error struct {
						Code, Message string
						NodeID        string `json:"node_id"`
					}
				}
				_ = json.Unmarshal(body, &got)
				if status != http.StatusServiceUnavailable || got.Error.Code != codeUnavailable ||
					got.Error.NodeID != c.nodes[survivor].id || !strings.Contains(got.Error.Message, "not ready") ||
					h.Get("Retry-After") == "" {
					return fmt.Sprintf("/readyz: %d %s", status, body)
				}
				return ""
			})

			status, _, body := c.do(t, survivor, "GET", "/v1/tenants?consistency=stale", nil, adminAuth())
			if status != http.StatusOK {
				t.Fatalf("stale GET /v1/tenants without quorum: got %d %s, want 200", status, body)
			}
			var got struct{ Tenants []string }
			decodeBody(t, body, &got)
			if !slices.Equal(got.Tenants, []string{"acme"}) {
				t.Errorf("stale GET /v1/tenants without quorum: got %v, want [acme]", got.Tenants)
			}
		})
	}
}

// TestIdempotentRetryAcrossLeaderChange: a principal create retried with
// the same Idempotency-Key after the leader died returns the first response
// (same token, same index) marked as a replay and creates nothing; the same
// key with another body is 409 idempotency_mismatch.
func TestIdempotentRetryAcrossLeaderChange(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.WaitForLeader(t)
	if status, _, body := c.do(t, leader, "PUT", "/v1/tenants/acme", nil, adminAuth()); status != http.StatusCreated {
		t.Fatalf("PUT /v1/tenants/acme: got %d %s, want 201", status, body)
	}
	const reqBody = `{"name":"reviewer","grants":[{"resource":"refs","prefix":"report-","actions":["read"]}]}`
	key := with(adminAuth(), "Idempotency-Key", "create-reviewer-1")
	status, h1, first := c.do(t, leader, "POST", "/v1/tenants/acme/principals", reqBody, key)
	if status != http.StatusCreated {
		t.Fatalf("first POST principals: got %d %s, want 201", status, first)
	}
	if h1.Get("Idempotent-Replay") != "" {
		t.Errorf("first POST: Idempotent-Replay got %q, want absent", h1.Get("Idempotent-Replay"))
	}
	var created wire.PrincipalWithToken
	decodeBody(t, first, &created)
	if created.Token == "" {
		t.Fatalf("first POST: no token in %s", first)
	}
	c.WaitConverged(t)

	c.StopNode(leader)
	newLeader := c.WaitForLeader(t)
	keysBefore := c.nodes[newLeader].fsm.Status().Keys

	// Retry through a node that is not the new leader, so it is forwarded.
	via := newLeader
	for _, f := range c.Followers(newLeader) {
		via = f
	}
	status, h2, replay := c.do(t, via, "POST", "/v1/tenants/acme/principals", reqBody, key)
	if status != http.StatusCreated {
		t.Fatalf("retried POST principals: got %d %s, want 201", status, replay)
	}
	if got := h2.Get("Idempotent-Replay"); got != "true" {
		t.Errorf("retried POST: Idempotent-Replay got %q, want true", got)
	}
	if string(replay) != string(first) {
		t.Errorf("retried POST body: got %s, want the first response %s", replay, first)
	}
	if got := c.nodes[newLeader].fsm.Status().Keys; got != keysBefore {
		t.Errorf("keys after the replay: got %d, want %d (nothing applied)", got, keysBefore)
	}
	if p, ok := c.nodes[newLeader].fsm.PrincipalByToken(hashToken(created.Token)); !ok || p.Name != "reviewer" {
		t.Errorf("first token on the new leader: got %v, %v, want principal reviewer", p, ok)
	}

	status, _, body := c.do(t, via, "POST", "/v1/tenants/acme/principals",
		`{"name":"reviewer","grants":[{"resource":"*","prefix":"","actions":["read"]}]}`, key)
	if status != http.StatusConflict || errorCode(body) != "idempotency_mismatch" {
		t.Errorf("same key, other body: got %d %s, want 409 idempotency_mismatch", status, body)
	}
	if got := c.nodes[newLeader].fsm.Status().Keys; got != keysBefore {
		t.Errorf("keys after the mismatch: got %d, want %d", got, keysBefore)
	}
	c.WaitConverged(t)

	t.Run("replay carries the first X-Baton-Index", func(t *testing.T) {
		if got, want := indexOf(t, h2), indexOf(t, h1); got != want {
			t.Errorf("retried POST: X-Baton-Index got %d, want the first response's %d", got, want)
		}
	})
}

// TestSnapshotRestart: a node restarted after a snapshot restores it and
// replays only the log tail, reaching the same state digest as its peers.
func TestSnapshotRestart(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.WaitForLeader(t)
	put := func(name string) {
		t.Helper()
		if status, _, body := c.do(t, leader, "PUT", "/v1/tenants/"+name, nil, adminAuth()); status != http.StatusCreated {
			t.Fatalf("PUT /v1/tenants/%s: got %d %s, want 201", name, status, body)
		}
	}
	for i := range 30 {
		put(fmt.Sprintf("before-%02d", i))
	}
	if status, _, body := c.do(t, leader, "POST", "/v1/tenants/before-00/principals",
		`{"name":"bot","grants":[{"resource":"*","prefix":"","actions":["read","write"]}]}`, adminAuth()); status != http.StatusCreated {
		t.Fatalf("POST principals: got %d %s, want 201", status, body)
	}
	c.WaitConverged(t)

	restarted := c.Followers(leader)[0]
	if err := c.nodes[restarted].node.Snapshot(); err != nil {
		t.Fatalf("Snapshot on %s: %v", c.nodes[restarted].id, err)
	}
	for i := range 5 {
		put(fmt.Sprintf("tail-%02d", i))
	}
	c.WaitConverged(t)
	c.StopNode(restarted)
	for i := range 3 {
		put(fmt.Sprintf("while-down-%02d", i))
	}
	c.RestartNode(restarted)
	c.WaitForLeader(t)
	want := c.WaitConverged(t)

	var got clusterStatus
	status, _, body := c.do(t, restarted, "GET", "/v1/cluster?consistency=stale", nil, adminAuth())
	if status != http.StatusOK {
		t.Fatalf("stale GET /v1/cluster on the restarted node: got %d %s, want 200", status, body)
	}
	decodeBody(t, body, &got)
	if got.RestoredSnapshotIndex == 0 {
		t.Errorf("restored_snapshot_index: got 0, want the snapshot's index")
	}
	if got.LastSnapshotIndex != got.RestoredSnapshotIndex {
		t.Errorf("last_snapshot_index: got %d, want restored_snapshot_index %d", got.LastSnapshotIndex, got.RestoredSnapshotIndex)
	}
	if got.AppliedIndex != want.AppliedIndex || got.StateDigest != want.StateDigest {
		t.Errorf("restarted node at %d %s, want %d %s", got.AppliedIndex, got.StateDigest, want.AppliedIndex, want.StateDigest)
	}
	if tail := got.AppliedIndex - got.RestoredSnapshotIndex; got.AppliedSinceStart == 0 || got.AppliedSinceStart > tail {
		t.Errorf("applied_since_start: got %d, want 1..%d (only the tail after snapshot index %d of %d)",
			got.AppliedSinceStart, tail, got.RestoredSnapshotIndex, got.AppliedIndex)
	}
	var tenants struct{ Tenants []string }
	_, _, body = c.do(t, restarted, "GET", "/v1/tenants?consistency=stale", nil, adminAuth())
	decodeBody(t, body, &tenants)
	if len(tenants.Tenants) != 38 {
		t.Errorf("tenants on the restarted node: got %d, want 38", len(tenants.Tenants))
	}
	if !c.nodes[restarted].fsm.TenantExists("while-down-02") || !c.nodes[restarted].fsm.TenantExists("before-29") {
		t.Errorf("restarted node is missing tenants written before the snapshot or while it was down")
	}
}
