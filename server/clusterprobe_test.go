package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestClusterProbe: GET /v1/cluster?probe=true adds each member's own
// readiness, indexes and version; a member that is down is reported
// unreachable, not waited for; without the parameter nothing is added.
func TestClusterProbe(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.WaitForLeader(t)
	c.WaitConverged(t)
	probe := func(i int) clusterStatus {
		t.Helper()
		var st clusterStatus
		status, _, body := c.do(t, i, "GET", "/v1/cluster?probe=true", nil, adminAuth())
		if status != http.StatusOK {
			t.Fatalf("GET /v1/cluster?probe=true: %d %s", status, body)
		}
		decodeBody(t, body, &st)
		return st
	}
	var st clusterStatus
	waitFor(t, "every member probed ready", func() string {
		st = probe(leader)
		for _, m := range st.Members {
			if m.Probe == nil || !m.Probe.Reachable || !m.Probe.Ready || m.Probe.AppliedIndex == 0 || m.Probe.CommitIndex < m.Probe.AppliedIndex {
				b, _ := json.Marshal(m)
				return string(b)
			}
		}
		return ""
	})
	if len(st.Members) != 3 {
		t.Fatalf("%d members", len(st.Members))
	}

	down := c.Followers(leader)[0]
	c.StopNode(down)
	waitFor(t, "the stopped member reported unreachable", func() string {
		for _, m := range probe(leader).Members {
			if m.ID == c.nodes[down].id {
				if m.Probe == nil || m.Probe.Reachable || m.Probe.Error == "" {
					b, _ := json.Marshal(m)
					return string(b)
				}
				return ""
			}
		}
		return "member missing"
	})

	status, _, body := c.do(t, leader, "GET", "/v1/cluster", nil, adminAuth())
	if status != http.StatusOK || strings.Contains(string(body), `"probe"`) {
		t.Errorf("GET /v1/cluster without probe: %d %s", status, body)
	}
	if status, _, body := c.do(t, leader, "GET", "/v1/cluster?probe=yes", nil, adminAuth()); status != http.StatusBadRequest {
		t.Errorf("probe=yes: %d %s", status, body)
	}
}
