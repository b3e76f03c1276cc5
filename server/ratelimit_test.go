package server

import (
	"net/http"
	"testing"
)

// TestRateLimitCountsEveryRoute: a principal's requests count against its
// tenant's rate whatever the route, also those without a resource of their
// own in the path (opening a session, a transaction, the principals list):
// with a burst of 1 and a rate that refills no token during the test, the
// second request of each principal is 429 rate_limited.
func TestRateLimitCountsEveryRoute(t *testing.T) {
	fx := newAPIFixture(t)
	if status, _, body := fx.c.do(t, 0, "PUT", "/v1/tenants/acme/quota", `{"max_bytes":0,"max_keys":0,"rate_per_sec":0.001,"burst":1}`, adminAuth()); status != http.StatusOK {
		t.Fatalf("PUT quota: got %d %s, want 200", status, body)
	}
	grants := `[{"resource":"*","prefix":"","actions":["read","write"]}]`
	cases := []struct {
		name, method, path, body string
	}{
		{"session open", "POST", "/v1/sessions", ""},
		{"transaction", "POST", "/v1/tenants/acme/txn", `{"ops":[{"op":"kv.put","namespace":"n","key":"k","value":1}]}`},
		{"kv read", "GET", "/v1/tenants/acme/kv/n/k", ""},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tok := fx.createPrincipal(t, adminAuth(), "acme", `{"name":"rl-`+string(rune('a'+i))+`","grants":`+grants+`}`)
			var body any
			if tc.body != "" {
				body = tc.body
			}
			if status, _, resp := fx.c.do(t, 0, tc.method, tc.path, body, bearer(tok)); status == http.StatusTooManyRequests {
				t.Fatalf("first %s %s: got %d %s, want it within the burst", tc.method, tc.path, status, resp)
			}
			status, h, resp := fx.c.do(t, 0, tc.method, tc.path, body, bearer(tok))
			if status != http.StatusTooManyRequests || errorCode(resp) != "rate_limited" || h.Get("Retry-After") == "" {
				t.Errorf("second %s %s: got %d %s (Retry-After %q), want 429 rate_limited with Retry-After", tc.method, tc.path, status, resp, h.Get("Retry-After"))
			}
		})
	}
}
