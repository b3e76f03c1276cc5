package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/server/core/node"
)

// A watch whose resume point this node has not applied yet is 503 (retry,
// perhaps elsewhere) once the catch-up wait is over, not an answer from
// state older than what the client has seen; one this node has reached
// streams.
func TestWatchAheadOfThisNode(t *testing.T) {
	f := fsm.New()
	c := &fakeCluster{f: f}
	const wait = 100 * time.Millisecond
	s := New(Config{AdminToken: testAdminToken, CatchUpWait: wait, Logger: slog.New(slog.DiscardHandler)}, c, f)
	if res, err := c.Apply(context.Background(), fsm.NewCommand(fsm.KindTenantPut, 1, "acme", "", &fsm.TenantPutArgs{Name: "acme"})); err != nil || !res.OK() {
		t.Fatalf("tenant: %v %+v", err, res)
	}
	applied := f.AppliedIndex()
	for _, tc := range []struct {
		name, query, lastEventID string
		want                     int
	}{
		{"from_index ahead", fmt.Sprintf("?from_index=%d", applied+5), "", 503},
		{"Last-Event-ID ahead", "", fmt.Sprintf("%d.0", applied+5), 503},
		{"from_index reached", fmt.Sprintf("?from_index=%d", applied), "", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*wait)
			defer cancel()
			req := httptest.NewRequestWithContext(ctx, "GET", "/v1/tenants/acme/watch"+tc.query, nil)
			req.Header.Set("Authorization", "Bearer "+testAdminToken)
			if tc.lastEventID != "" {
				req.Header.Set("Last-Event-ID", tc.lastEventID)
			}
			rec := httptest.NewRecorder()
			start := time.Now()
			s.Handler().ServeHTTP(rec, req) // a stream returns when ctx ends
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d; body %s", rec.Code, tc.want, rec.Body)
			}
			if tc.want != 503 {
				return
			}
			var body struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error.Code != "unavailable" {
				t.Fatalf("body %s (%v), want an unavailable error", rec.Body, err)
			}
			if d := time.Since(start); d < wait {
				t.Fatalf("answered after %v, before the catch-up wait of %v", d, wait)
			}
		})
	}
}

// followerCluster is a fakeCluster that follows n2, whose HTTP API is at
// leaderAddr.
type followerCluster struct {
	*fakeCluster
	leaderAddr string
}

func (c *followerCluster) IsLeader() bool           { return false }
func (c *followerCluster) Leader() (string, string) { return "n2", "127.0.0.1:3" }
func (c *followerCluster) HTTPAddrOf(id string) string {
	if id == "n2" {
		return c.leaderAddr
	}
	return "127.0.0.1:1"
}
func (c *followerCluster) Members() ([]node.MemberInfo, error) {
	return []node.MemberInfo{{ID: "n1", HTTPAddr: "127.0.0.1:1", Voter: true, State: "follower"},
		{ID: "n2", HTTPAddr: c.leaderAddr, Voter: true, State: "leader"}}, nil
}

// TestReadyzConvergesUnderWrites: a follower catching up while writes go
// on, whose leader's commit index is one ahead of what it has applied each
// time it is asked (as under a steady write load), becomes ready: it waits
// for the leader's commit index as it was when it began catching up, not
// for one that moves on with every write.
func TestReadyzConvergesUnderWrites(t *testing.T) {
	f := fsm.New()
	c := &followerCluster{fakeCluster: &fakeCluster{f: f}}
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"node_id": "n2", "commit_index": %d}`, f.AppliedIndex()+1)
	}))
	t.Cleanup(leader.Close)
	c.leaderAddr = strings.TrimPrefix(leader.URL, "http://")
	s := New(Config{AdminToken: testAdminToken, Logger: slog.New(slog.DiscardHandler)}, c, f)
	t.Cleanup(s.Close)
	var last string
	for i := range 20 {
		// The log goes on: this node applies one more entry each round.
		if res, err := c.Apply(context.Background(), fsm.NewCommand(fsm.KindTenantPut, int64(i+1), "acme", "", &fsm.TenantPutArgs{Name: "acme"})); err != nil || !res.OK() {
			t.Fatalf("apply: %v %+v", err, res)
		}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		if rec.Code == http.StatusOK {
			return
		}
		last = rec.Body.String()
	}
	t.Fatalf("/readyz never 200 in 20 rounds of writes; last answer %s", last)
}
