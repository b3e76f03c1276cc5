package server

import (
	"net/http"
	"testing"
	"time"

	"github.com/baton-dev/baton/server/core/node"
)

// TestWriteOutcomeCodes: a write refused before it was proposed is
// `503 unavailable` (nothing was done, any retry is safe), while a write
// that was proposed and whose wait ran out is `504 outcome_unknown` (it may
// yet commit: only a retry with the same key or session place is safe).
// Both carry Retry-After.
func TestWriteOutcomeCodes(t *testing.T) {
	// n1 leads (it times out first) and keeps its lease for seconds after
	// its followers stop, far longer than a write's wait of 500 ms.
	c := newCluster(t, 3, func(c *testCluster) {
		c.requestTimeout = 500 * time.Millisecond
		c.nodeConfig = func(cfg *node.Config) {
			d := 20 * time.Second
			if cfg.ID == "n1" {
				d = 3 * time.Second
			}
			cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = d, d, d
		}
	})
	leader := c.WaitForLeader(t)
	if leader != 0 {
		t.Fatalf("leader is %s, want n1 (the only node with a short election timeout)", c.nodes[leader].id)
	}
	if status, _, body := c.do(t, 0, "PUT", "/v1/tenants/acme", nil, adminAuth()); status != http.StatusCreated {
		t.Fatalf("PUT tenant: got %d %s, want 201", status, body)
	}
	c.StopNode(1)
	c.StopNode(2)

	cases := []struct {
		name       string
		before     func()
		wantStatus int
		wantCode   string
	}{
		{"proposed, wait ran out", func() {}, http.StatusGatewayTimeout, "outcome_unknown"},
		{"no leader, not proposed", func() {
			waitFor(t, "n1 to step down", func() string {
				if c.nodes[0].node.IsLeader() {
					return "n1 still leads"
				}
				return ""
			})
		}, http.StatusServiceUnavailable, "unavailable"},
	}
	for _, tc := range cases {
		tc.before()
		status, h, body := c.do(t, 0, "PUT", "/v1/tenants/acme/kv/ns/k", `{"value":1}`,
			with(adminAuth(), "Idempotency-Key", "k-"+tc.wantCode))
		if status != tc.wantStatus || errorCode(body) != tc.wantCode {
			t.Errorf("%s: got %d %s, want %d %s", tc.name, status, body, tc.wantStatus, tc.wantCode)
		}
		if got := h.Get("Retry-After"); got != "1" {
			t.Errorf("%s: Retry-After: got %q, want \"1\"", tc.name, got)
		}
	}
}
