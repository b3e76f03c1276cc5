package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestRemovedMemberRefuses: after DELETE /v1/cluster/members/nX, nX answers
// every request, stale reads included, with a 503 saying it was removed,
// and /readyz says so too.
func TestRemovedMemberRefuses(t *testing.T) {
	c := newReal(t, 3)
	leader := waitLeader(t, c)
	putTenant(t, c, leader, "acme")
	gone := others(c, leader)[0]
	waitConverged(t, c, 1)
	if _, err := c.AdminCall(ctxFor(t, 5*time.Second), leader, http.MethodDelete, "/v1/cluster/members/"+c.ID(gone), nil); err != nil {
		t.Fatalf("remove %s: %v", c.ID(gone), err)
	}
	err := poll(ctxFor(t, 10*time.Second), c.ID(gone)+" refuses a stale read", func(ctx context.Context) (bool, string, error) {
		code, body, err := c.get(ctx, gone, "/v1/tenants?consistency=stale", true)
		if err != nil {
			return false, err.Error(), nil
		}
		var e struct {
			Error struct{ Code, Message, Reason string }
		}
		_ = json.Unmarshal(body, &e)
		ok := code == http.StatusServiceUnavailable && e.Error.Reason == "removed" &&
			strings.Contains(e.Error.Message, "was removed from the cluster")
		return ok, fmt.Sprintf("%d %s", code, snippet(body)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	code, body, err := c.get(ctxFor(t, 5*time.Second), gone, "/readyz", false)
	if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(string(body), "removed") {
		t.Fatalf("/readyz of the removed member: %d %s %v, want 503 naming the removal", code, body, err)
	}
	// The rest of the cluster serves on.
	putTenant(t, c, leader, "after-removal")
}

// TestReadyzWaitsForLeaderCommitAfterRestart: a follower restarted after
// the cluster moved on never answers 200 on /readyz before it applied
// what the leader had committed, and does become ready.
func TestReadyzWaitsForLeaderCommitAfterRestart(t *testing.T) {
	c := newReal(t, 3)
	leader := waitLeader(t, c)
	follower := others(c, leader)[0]
	putTenant(t, c, leader, "t0")
	waitConverged(t, c, 1)
	if err := c.StopNode(follower); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i := range 50 {
		last = putTenant(t, c, leader, fmt.Sprintf("t%d", i+1))
	}
	if err := c.Restart(ctxFor(t, 20*time.Second), follower); err != nil {
		t.Fatal(err)
	}
	seen503 := 0
	err := poll(ctxFor(t, 15*time.Second), c.ID(follower)+" ready", func(ctx context.Context) (bool, string, error) {
		code, body, err := c.get(ctx, follower, "/readyz", false)
		if err != nil {
			return false, err.Error(), nil
		}
		if code != http.StatusOK {
			seen503++
			return false, fmt.Sprintf("%d %s", code, snippet(body)), nil
		}
		var r struct {
			Applied uint64 `json:"applied_index"`
			Commit  uint64 `json:"commit_index"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			return false, "", err
		}
		if r.Applied < last || r.Commit == 0 {
			return false, "", fmt.Errorf("/readyz 200 at applied %d commit %d, before the leader's commit %d was applied", r.Applied, r.Commit, last)
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d not-ready answers before ready", seen503)
}

// TestDashboardMetricsExist: every metric deploy/grafana/baton.json
// queries is on a running leader's /metrics.
func TestDashboardMetricsExist(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "grafana", "baton.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("baton.json: %v", err)
	}
	names := map[string]string{} // metric -> panel
	re := regexp.MustCompile(`\bbaton_[A-Za-z0-9_]+`)
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, n := range re.FindAllString(tg.Expr, -1) {
				names[n] = p.Title
			}
		}
	}
	if len(names) < 20 {
		t.Fatalf("the dashboard queries %d metrics; expected the domain metrics too", len(names))
	}

	c := newReal(t, 3)
	leader := waitLeader(t, c)
	putTenant(t, c, leader, "acme")
	ctx := ctxFor(t, 10*time.Second)
	if _, err := c.AdminCall(ctx, leader, http.MethodPost, "/v1/tenants/acme/tasks", []byte(`{"task_id":"a","queue":"q","status":"pending"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AdminCall(ctx, leader, http.MethodPost, "/v1/tenants/acme/tasks/a/claim", []byte(`{"owner":"w","lease_ms":60000}`)); err != nil {
		t.Fatal(err)
	}
	err = poll(ctx, "every dashboard metric on /metrics", func(ctx context.Context) (bool, string, error) {
		code, body, err := c.get(ctx, leader, "/metrics", false)
		if err != nil || code != http.StatusOK {
			return false, fmt.Sprintf("%d %v", code, err), nil
		}
		present := map[string]bool{}
		for _, line := range strings.Split(string(body), "\n") {
			if line == "" || line[0] == '#' {
				continue
			}
			if i := strings.IndexAny(line, "{ "); i > 0 {
				present[line[:i]] = true
			}
		}
		var missing []string
		for n, panel := range names {
			if !present[n] {
				missing = append(missing, n+" ("+panel+")")
			}
		}
		if present["baton_raft_replication_heartbeat_"+c.ID(others(c, leader)[0])+"_seconds_count"] {
			return false, "", fmt.Errorf("a peer id is still inside a metric name")
		}
		return len(missing) == 0, fmt.Sprintf("missing %v", missing), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
