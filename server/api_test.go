package server

import (
	"github.com/baton-dev/baton/fsm/wire"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// apiFixture is a one-node cluster with tenants acme and other, and three
// principals of acme: one with a full admin grant, one that may only read
// KV, and one whose admin grant covers principal names starting with bot-.
type apiFixture struct {
	c *testCluster
	// tokens of acme's principals
	admin, reader, botAdmin string
}

func newAPIFixture(t *testing.T) *apiFixture {
	t.Helper()
	c := newCluster(t, 1)
	fx := &apiFixture{c: c}
	for _, name := range []string{"acme", "other"} {
		if status, _, body := c.do(t, 0, "PUT", "/v1/tenants/"+name, nil, adminAuth()); status != http.StatusCreated {
			t.Fatalf("PUT /v1/tenants/%s: got %d %s, want 201", name, status, body)
		}
	}
	fx.admin = fx.createPrincipal(t, adminAuth(), "acme",
		`{"name":"ops","grants":[{"resource":"admin","prefix":"","actions":["read","write","delete"]}]}`)
	fx.reader = fx.createPrincipal(t, adminAuth(), "acme",
		`{"name":"reader","grants":[{"resource":"kv","prefix":"","actions":["read"]}]}`)
	fx.botAdmin = fx.createPrincipal(t, adminAuth(), "acme",
		`{"name":"bot-admin","grants":[{"resource":"admin","prefix":"bot-","actions":["write","delete"]},{"resource":"kv","prefix":"bot/","actions":["read","write"]}]}`)
	return fx
}

// createPrincipal creates a principal and returns its token.
func (fx *apiFixture) createPrincipal(t *testing.T, auth map[string]string, tenant, body string) string {
	t.Helper()
	status, _, resp := fx.c.do(t, 0, "POST", "/v1/tenants/"+tenant+"/principals", body, auth)
	if status != http.StatusCreated {
		t.Fatalf("POST /v1/tenants/%s/principals %s: got %d %s, want 201", tenant, body, status, resp)
	}
	var p wire.PrincipalWithToken
	decodeBody(t, resp, &p)
	if !strings.HasPrefix(p.Token, "btk_") {
		t.Fatalf("principal token: got %q, want a btk_ token", p.Token)
	}
	return p.Token
}

// TestBadRequests sends requests that must be refused, and checks the status,
// the error code, the Allow header of 405s, and that nothing was written.
func TestBadRequests(t *testing.T) {
	fx := newAPIFixture(t)
	admin := adminAuth()
	huge := `{"name":"big","grants":[],"pad":"` + strings.Repeat("a", 1<<20) + `"}`
	cases := []struct {
		name         string
		method, path string
		body         string
		headers      map[string]string
		wantStatus   int
		wantCode     string
		wantAllow    string
		// reachesLog: refused by the FSM, so the log grows (the entry is a
		// committed decision) but the state's keys must not change.
		reachesLog bool
	}{
		// Malformed bodies.
		{name: "malformed JSON", method: "POST", path: "/v1/tenants/acme/principals", body: `{"name":`, headers: admin, wantStatus: 400, wantCode: "invalid_argument"},
		{name: "empty body", method: "POST", path: "/v1/tenants/acme/principals", body: ``, headers: admin, wantStatus: 400, wantCode: "invalid_argument"},
		{name: "array instead of object", method: "POST", path: "/v1/tenants/acme/principals", body: `[{"name":"a"}]`, headers: admin, wantStatus: 400, wantCode: "invalid_argument"},
		{name: "trailing data", method: "POST", path: "/v1/tenants/acme/principals", body: `{"name":"a","grants":[]} {}`, headers: admin, wantStatus: 400, wantCode: "invalid_argument"},
		{name: "unknown field", method: "POST", path: "/v1/tenants/acme/principals", body: `{"name":"a","grants":[],"role":"root"}`, headers: admin, wantStatus: 400, wantCode: "invalid_argument"},
		{name: "wrong field type", method: "POST", path: "/v1/tenants/acme/principals", body: `{"name":7}`, headers: admin, wantStatus: 400, wantCode: "invalid_argument"},
		{name: "missing principal name", method: "POST", path: "/v1/tenants/acme/principals", body: `{"grants":[]}`, headers: admin, wantStatus: 400, wantCode: "invalid_argument"},
		{name: "bad principal name", method: "POST", path: "/v1/tenants/acme/principals", body: `{"name":"-bad","grants":[]}`, headers: admin, wantStatus: 400, wantCode: "invalid_argument"},
		{name: "unknown grant resource", method: "POST", path: "/v1/tenants/acme/principals", body: `{"name":"a","grants":[{"resource":"secrets","prefix":"","actions":["read"]}]}`, headers: admin, wantStatus: 400, wantCode: "invalid_argument"},
		{name: "unknown grant action", method: "POST", path: "/v1/tenants/acme/principals", body: `{"name":"a","grants":[{"resource":"kv","prefix":"","actions":["own"]}]}`, headers: admin, wantStatus: 400, wantCode: "invalid_argument"},
		{name: "grant without actions", method: "POST", path: "/v1/tenants/acme/principals", body: `{"name":"a","grants":[{"resource":"kv","prefix":""}]}`, headers: admin, wantStatus: 400, wantCode: "invalid_argument"},
		{name: "oversized JSON body", method: "POST", path: "/v1/tenants/acme/principals", body: huge, headers: admin, wantStatus: 413, wantCode: "too_large"},
		{name: "oversized tenant body", method: "PUT", path: "/v1/tenants/big", body: huge, headers: admin, wantStatus: 413, wantCode: "too_large"},

		// Bad names.
		{name: "tenant starting with -", method: "PUT", path: "/v1/tenants/-bad", headers: admin, wantStatus: 400, wantCode: "invalid_argument"},
		{name: "tenant starting with .", method: "PUT", path: "/v1/tenants/.hidden", headers: admin, wantStatus: 400, wantCode: "invalid_argument"},
		{name: "tenant with escaped slash", method: "PUT", path: "/v1/tenants/a%2Fb", headers: admin, wantStatus: 400, wantCode: "invalid_argument"},
		{name: "tenant with a space", method: "PUT", path: "/v1/tenants/a%20b", headers: admin, wantStatus: 400, wantCode: "invalid_argument"},
		{name: "tenant a/b is no route", method: "PUT", path: "/v1/tenants/a/b", headers: admin, wantStatus: 404, wantCode: "not_found"},
		{name: "tenant of 129 chars", method: "PUT", path: "/v1/tenants/" + strings.Repeat("t", 129), headers: admin, wantStatus: 400, wantCode: "invalid_argument"},
		{name: "tenant of 129 chars in principal path", method: "POST", path: "/v1/tenants/" + strings.Repeat("t", 129) + "/principals", body: `{"name":"a","grants":[]}`, headers: admin, wantStatus: 400, wantCode: "invalid_argument"},
		{name: "principal name in path", method: "DELETE", path: "/v1/tenants/acme/principals/-x", headers: admin, wantStatus: 400, wantCode: "invalid_argument"},
		{name: "Idempotency-Key of 129 chars", method: "PUT", path: "/v1/tenants/idem", headers: with(admin, "Idempotency-Key", strings.Repeat("k", 129)), wantStatus: 400, wantCode: "invalid_argument"},
		{name: "Idempotency-Key with a tab", method: "PUT", path: "/v1/tenants/idem", headers: with(admin, "Idempotency-Key", "a\tb"), wantStatus: 400, wantCode: "invalid_argument"},
		{name: "Idempotency-Key not ASCII", method: "PUT", path: "/v1/tenants/idem", headers: with(admin, "Idempotency-Key", "ключ"), wantStatus: 400, wantCode: "invalid_argument"},

		// Routing.
		{name: "DELETE on tenant list", method: "DELETE", path: "/v1/tenants", headers: admin, wantStatus: 405, wantCode: "method_not_allowed", wantAllow: "GET"},
		{name: "PATCH on tenant", method: "PATCH", path: "/v1/tenants/acme", headers: admin, wantStatus: 405, wantCode: "method_not_allowed", wantAllow: "PUT"},
		{name: "PATCH on principals", method: "PATCH", path: "/v1/tenants/acme/principals", headers: admin, wantStatus: 405, wantCode: "method_not_allowed", wantAllow: "GET, POST"},
		{name: "POST on cluster", method: "POST", path: "/v1/cluster", headers: admin, wantStatus: 405, wantCode: "method_not_allowed", wantAllow: "GET"},
		{name: "405 before authentication", method: "PUT", path: "/v1/tenants", wantStatus: 405, wantCode: "method_not_allowed", wantAllow: "GET"},
		{name: "unknown path", method: "GET", path: "/v1/nope", headers: admin, wantStatus: 404, wantCode: "not_found"},
		{name: "unknown tenant subpath", method: "GET", path: "/v1/tenants/acme/widgets", headers: admin, wantStatus: 404, wantCode: "not_found"},
		{name: "trailing slash", method: "GET", path: "/v1/tenants/", headers: admin, wantStatus: 404, wantCode: "not_found"},
		{name: "no version prefix", method: "GET", path: "/tenants", headers: admin, wantStatus: 404, wantCode: "not_found"},

		// Authentication.
		{name: "no token on write", method: "PUT", path: "/v1/tenants/new", wantStatus: 401, wantCode: "unauthenticated"},
		{name: "no token on read", method: "GET", path: "/v1/tenants", wantStatus: 401, wantCode: "unauthenticated"},
		{name: "no token on stale read", method: "GET", path: "/v1/tenants?consistency=stale", wantStatus: 401, wantCode: "unauthenticated"},
		{name: "bad token", method: "PUT", path: "/v1/tenants/new", headers: bearer("not-a-token"), wantStatus: 401, wantCode: "unauthenticated"},
		{name: "unknown btk token", method: "GET", path: "/v1/tenants", headers: bearer("btk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), wantStatus: 401, wantCode: "unauthenticated"},
		{name: "empty bearer", method: "PUT", path: "/v1/tenants/new", headers: map[string]string{"Authorization": "Bearer "}, wantStatus: 401, wantCode: "unauthenticated"},
		{name: "token without Bearer", method: "PUT", path: "/v1/tenants/new", headers: map[string]string{"Authorization": testAdminToken}, wantStatus: 401, wantCode: "unauthenticated"},
		{name: "basic auth", method: "PUT", path: "/v1/tenants/new", headers: map[string]string{"Authorization": "Basic YWRtaW46YWRtaW4tc2VjcmV0"}, wantStatus: 401, wantCode: "unauthenticated"},
		{name: "bearer scheme without a space", method: "PUT", path: "/v1/tenants/new", headers: map[string]string{"Authorization": "bearer" + testAdminToken}, wantStatus: 401, wantCode: "unauthenticated"},

		// Authorization: another tenant, with or without the object.
		{name: "principal on other tenant", method: "POST", path: "/v1/tenants/other/principals", body: `{"name":"spy","grants":[]}`, headers: bearer(fx.admin), wantStatus: 403, wantCode: "forbidden"},
		{name: "principal on missing tenant", method: "POST", path: "/v1/tenants/ghost/principals", body: `{"name":"spy","grants":[]}`, headers: bearer(fx.admin), wantStatus: 403, wantCode: "forbidden"},
		{name: "principal deletes on missing tenant", method: "DELETE", path: "/v1/tenants/ghost/principals/anyone", headers: bearer(fx.admin), wantStatus: 403, wantCode: "forbidden"},
		{name: "principal deletes on other tenant", method: "DELETE", path: "/v1/tenants/other/principals/anyone", headers: bearer(fx.admin), wantStatus: 403, wantCode: "forbidden"},
		// Authorization: grants.
		{name: "no admin grant creates principal", method: "POST", path: "/v1/tenants/acme/principals", body: `{"name":"sneaky","grants":[{"resource":"*","prefix":"","actions":["read","write","delete"]}]}`, headers: bearer(fx.reader), wantStatus: 403, wantCode: "forbidden"},
		{name: "no admin grant deletes principal", method: "DELETE", path: "/v1/tenants/acme/principals/ops", headers: bearer(fx.reader), wantStatus: 403, wantCode: "forbidden"},
		{name: "admin grant outside its prefix", method: "POST", path: "/v1/tenants/acme/principals", body: `{"name":"human","grants":[]}`, headers: bearer(fx.botAdmin), wantStatus: 403, wantCode: "forbidden"},
		// Authorization: admin-only endpoints.
		{name: "principal creates tenant", method: "PUT", path: "/v1/tenants/mine", headers: bearer(fx.admin), wantStatus: 403, wantCode: "forbidden"},
		{name: "principal confirms own tenant", method: "PUT", path: "/v1/tenants/acme", headers: bearer(fx.admin), wantStatus: 403, wantCode: "forbidden"},
		{name: "principal lists tenants", method: "GET", path: "/v1/tenants", headers: bearer(fx.admin), wantStatus: 403, wantCode: "forbidden"},
		{name: "principal stale-lists tenants", method: "GET", path: "/v1/tenants?consistency=stale", headers: bearer(fx.admin), wantStatus: 403, wantCode: "forbidden"},
		{name: "principal reads cluster", method: "GET", path: "/v1/cluster", headers: bearer(fx.admin), wantStatus: 403, wantCode: "forbidden"},
		{name: "principal adds member", method: "POST", path: "/v1/cluster/members", body: `{"id":"n9","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`, headers: bearer(fx.admin), wantStatus: 403, wantCode: "forbidden"},
		{name: "principal removes member", method: "DELETE", path: "/v1/cluster/members/n1", headers: bearer(fx.admin), wantStatus: 403, wantCode: "forbidden"},
		{name: "principal sets member meta", method: "PUT", path: "/v1/cluster/members/n1/meta", body: `{"raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`, headers: bearer(fx.admin), wantStatus: 403, wantCode: "forbidden"},
		{name: "principal transfers leadership", method: "POST", path: "/v1/cluster/leadership-transfer", body: `{}`, headers: bearer(fx.admin), wantStatus: 403, wantCode: "forbidden"},
		{name: "principal takes a backup", method: "GET", path: "/v1/cluster/backup", headers: bearer(fx.admin), wantStatus: 403, wantCode: "forbidden"},

		// Refused by the FSM: a committed decision, no state change.
		{name: "delete missing principal", method: "DELETE", path: "/v1/tenants/acme/principals/nobody", headers: admin, wantStatus: 404, wantCode: "not_found", reachesLog: true},
		{name: "create existing principal", method: "POST", path: "/v1/tenants/acme/principals", body: `{"name":"reader","grants":[]}`, headers: admin, wantStatus: 409, wantCode: "already_exists", reachesLog: true},
		// Refused before the log: the tenant does not exist.
		{name: "principal in missing tenant", method: "POST", path: "/v1/tenants/ghost/principals", body: `{"name":"a","grants":[]}`, headers: admin, wantStatus: 404, wantCode: "not_found"},
		{name: "delete member that is unknown", method: "DELETE", path: "/v1/cluster/members/n9", headers: admin, wantStatus: 404, wantCode: "not_found"},
		{name: "transfer to unknown member", method: "POST", path: "/v1/cluster/leadership-transfer", body: `{"to":"n9"}`, headers: admin, wantStatus: 404, wantCode: "not_found"},
		{name: "member without addresses", method: "POST", path: "/v1/cluster/members", body: `{"id":"n9"}`, headers: admin, wantStatus: 400, wantCode: "invalid_argument"},
	}
	f := fx.c.nodes[0].fsm
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := f.Status()
			tenantsBefore := f.Tenants()
			var body any
			if tc.body != "" {
				body = tc.body
			}
			status, h, resp := fx.c.do(t, 0, tc.method, tc.path, body, tc.headers)
			if status != tc.wantStatus {
				t.Errorf("%s %s: status got %d, want %d (body %s)", tc.method, tc.path, status, tc.wantStatus, resp)
			}
			if code := errorCode(resp); code != tc.wantCode {
				t.Errorf("%s %s: error code got %q, want %q (body %s)", tc.method, tc.path, code, tc.wantCode, resp)
			}
			if ct := h.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type: got %q, want application/json", ct)
			}
			if got := h.Get("Allow"); got != tc.wantAllow {
				t.Errorf("Allow: got %q, want %q", got, tc.wantAllow)
			}
			after := f.Status()
			if tc.reachesLog {
				if after.Keys != before.Keys {
					t.Errorf("keys: got %d, want %d (a refused command changes nothing)", after.Keys, before.Keys)
				}
			} else if after.AppliedIndex != before.AppliedIndex || after.StateDigest != before.StateDigest {
				t.Errorf("state: got %d %s, want unchanged %d %s", after.AppliedIndex, after.StateDigest,
					before.AppliedIndex, before.StateDigest)
			}
			if got := f.Tenants(); !slices.Equal(got, tenantsBefore) {
				t.Errorf("tenants: got %v, want %v", got, tenantsBefore)
			}
		})
	}
}

// TestGrantsAllow is the positive side of TestBadRequests: what the grants
// of the fixture's principals do allow, and name boundaries that are valid.
func TestGrantsAllow(t *testing.T) {
	fx := newAPIFixture(t)
	cases := []struct {
		name         string
		method, path string
		body         string
		headers      map[string]string
		wantStatus   int
	}{
		{"tenant of 128 chars", "PUT", "/v1/tenants/" + strings.Repeat("t", 128), "", adminAuth(), 201},
		{"tenant with every allowed char", "PUT", "/v1/tenants/A9._:-z", "", adminAuth(), 201},
		{"admin grant creates principal", "POST", "/v1/tenants/acme/principals", `{"name":"helper","grants":[]}`, bearer(fx.admin), 201},
		{"admin grant deletes principal", "DELETE", "/v1/tenants/acme/principals/helper", "", bearer(fx.admin), 204},
		{"prefixed admin grant inside prefix", "POST", "/v1/tenants/acme/principals", `{"name":"bot-1","grants":[{"resource":"kv","prefix":"bot/","actions":["read"]}]}`, bearer(fx.botAdmin), 201},
		{"prefixed admin grant deletes inside prefix", "DELETE", "/v1/tenants/acme/principals/bot-1", "", bearer(fx.botAdmin), 204},
		{"delegating a narrower grant", "POST", "/v1/tenants/acme/principals", `{"name":"bot-2","grants":[{"resource":"kv","prefix":"bot/sub/","actions":["write"]}]}`, bearer(fx.botAdmin), 201},
		{"delegating a wider prefix is refused", "POST", "/v1/tenants/acme/principals", `{"name":"bot-3","grants":[{"resource":"kv","prefix":"","actions":["read"]}]}`, bearer(fx.botAdmin), 403},
		{"delegating another resource is refused", "POST", "/v1/tenants/acme/principals", `{"name":"bot-4","grants":[{"resource":"tasks","prefix":"bot/","actions":["read"]}]}`, bearer(fx.botAdmin), 403},
		{"delegating tenant-wide admin is refused", "POST", "/v1/tenants/acme/principals", `{"name":"bot-5","grants":[{"resource":"*","prefix":"","actions":["read","write","delete"]}]}`, bearer(fx.botAdmin), 403},
		{"delegating a missing action is refused", "POST", "/v1/tenants/acme/principals", `{"name":"bot-6","grants":[{"resource":"kv","prefix":"bot/","actions":["delete"]}]}`, bearer(fx.botAdmin), 403},
		{"grants may be omitted", "POST", "/v1/tenants/acme/principals", `{"name":"nobody"}`, adminAuth(), 201},
		{"lowercase bearer scheme", "PUT", "/v1/tenants/lower", "", map[string]string{"Authorization": "bearer " + testAdminToken}, 201},
		{"uppercase bearer scheme", "PUT", "/v1/tenants/upper", "", map[string]string{"Authorization": "BEARER " + testAdminToken}, 201},
		{"principal token with a mixed-case scheme", "GET", "/v1/tenants/acme/principals", "", map[string]string{"Authorization": "bEaReR " + fx.admin}, 200},
		{"stale tenant list", "GET", "/v1/tenants?consistency=stale", "", adminAuth(), 200},
		{"health needs no token", "GET", "/healthz", "", nil, 200},
		{"readiness needs no token", "GET", "/readyz", "", nil, 200},
		{"metrics need no token", "GET", "/metrics", "", nil, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.body != "" {
				body = tc.body
			}
			status, _, resp := fx.c.do(t, 0, tc.method, tc.path, body, tc.headers)
			if status != tc.wantStatus {
				t.Errorf("%s %s: got %d %s, want %d", tc.method, tc.path, status, resp, tc.wantStatus)
			}
		})
	}
}

// TestRevokedToken: a principal's token fails with 401 from the request
// after its DELETE is acknowledged, and the principals it created remain.
func TestRevokedToken(t *testing.T) {
	fx := newAPIFixture(t)
	tok := fx.createPrincipal(t, adminAuth(), "acme",
		`{"name":"temp","grants":[{"resource":"admin","prefix":"","actions":["write"]}]}`)
	child := fx.createPrincipal(t, bearer(tok), "acme", `{"name":"child","grants":[]}`)

	status, h, body := fx.c.do(t, 0, "DELETE", "/v1/tenants/acme/principals/temp", nil, adminAuth())
	if status != http.StatusNoContent {
		t.Fatalf("DELETE principal temp: got %d %s, want 204", status, body)
	}
	if indexOf(t, h) == 0 {
		t.Errorf("DELETE principal: X-Baton-Index got 0, want the index of the delete")
	}
	status, _, body = fx.c.do(t, 0, "POST", "/v1/tenants/acme/principals", `{"name":"child2","grants":[]}`, bearer(tok))
	if status != http.StatusUnauthorized || errorCode(body) != "unauthenticated" {
		t.Errorf("revoked token: got %d %s, want 401 unauthenticated", status, body)
	}
	if _, ok := fx.c.nodes[0].fsm.PrincipalByToken(hashToken(child)); !ok {
		t.Errorf("child's token: got unknown, want it to outlive its creator")
	}
	// Deleting again is 404: the principal is gone, not just its token.
	status, _, body = fx.c.do(t, 0, "DELETE", "/v1/tenants/acme/principals/temp", nil, adminAuth())
	if status != http.StatusNotFound || errorCode(body) != "not_found" {
		t.Errorf("second DELETE: got %d %s, want 404 not_found", status, body)
	}

	t.Run("stays revoked when the name is reused", func(t *testing.T) {
		fresh := fx.createPrincipal(t, adminAuth(), "acme",
			`{"name":"temp","grants":[{"resource":"admin","prefix":"","actions":["write"]}]}`)
		if fresh == tok {
			t.Fatalf("re-created principal got the revoked token again")
		}
		status, _, body := fx.c.do(t, 0, "POST", "/v1/tenants/acme/principals", `{"name":"child3","grants":[]}`, bearer(tok))
		if status != http.StatusUnauthorized {
			t.Errorf("revoked token after its name was re-created: got %d %s, want 401", status, body)
		}
	})
}

// TestIdempotencyKeysGoWithPrincipal: a principal deleted and created
// again under its name does not inherit the old one's Idempotency-Key
// answers: the same key and request apply anew (no replay), and the same
// key with another request is not a mismatch.
func TestIdempotencyKeysGoWithPrincipal(t *testing.T) {
	fx := newAPIFixture(t)
	const bot = `{"name":"keeper","grants":[{"resource":"kv","prefix":"","actions":["read","write"]}]}`
	old := fx.createPrincipal(t, adminAuth(), "acme", bot)
	cases := []struct {
		name, key, body string
	}{
		{"same key, same request", "k-same", `{"value":1}`},
		{"same key, another request", "k-other", `{"value":1}`},
	}
	for _, tc := range cases {
		if status, _, body := fx.c.do(t, 0, "PUT", "/v1/tenants/acme/kv/n/"+tc.key, tc.body, with(bearer(old), "Idempotency-Key", tc.key)); status != http.StatusOK {
			t.Fatalf("%s: first put: got %d %s, want 200", tc.name, status, body)
		}
	}
	if status, _, body := fx.c.do(t, 0, "DELETE", "/v1/tenants/acme/principals/keeper", nil, adminAuth()); status != http.StatusNoContent {
		t.Fatalf("DELETE principal: got %d %s, want 204", status, body)
	}
	fresh := fx.createPrincipal(t, adminAuth(), "acme", bot)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			if tc.key == "k-other" {
				body = `{"value":2}`
			}
			status, h, resp := fx.c.do(t, 0, "PUT", "/v1/tenants/acme/kv/n/"+tc.key, body, with(bearer(fresh), "Idempotency-Key", tc.key))
			if status != http.StatusOK || h.Get("Idempotent-Replay") != "" {
				t.Errorf("put by the re-created principal: got %d %s (Idempotent-Replay %q), want 200, applied anew", status, resp, h.Get("Idempotent-Replay"))
			}
		})
	}
}

// TestPrincipalRotateNeedsCoveringGrants: rotating hands the caller the
// rotated principal's new token, so, as for creating it, a principal may
// rotate only principals whose every grant its own cover (the admin token
// any); a refused rotation leaves the old token working.
func TestPrincipalRotateNeedsCoveringGrants(t *testing.T) {
	fx := newAPIFixture(t)
	boss := fx.createPrincipal(t, adminAuth(), "acme",
		`{"name":"boss","grants":[{"resource":"*","prefix":"","actions":["read","write","delete"]}]}`)
	fx.createPrincipal(t, adminAuth(), "acme", `{"name":"bot-narrow","grants":[{"resource":"kv","prefix":"bot/x/","actions":["read"]}]}`)
	fx.createPrincipal(t, adminAuth(), "acme", `{"name":"bot-wide","grants":[{"resource":"kv","prefix":"","actions":["read"]}]}`)
	fx.createPrincipal(t, adminAuth(), "acme", `{"name":"helper","grants":[{"resource":"admin","prefix":"h","actions":["write"]}]}`)
	cases := []struct {
		name, target string
		auth         map[string]string
		wantStatus   int
	}{
		{"admin grant rotating a wider principal", "boss", bearer(fx.admin), 403},
		{"prefixed admin rotating a wider kv grant", "bot-wide", bearer(fx.botAdmin), 403},
		{"admin grant rotating a covered principal", "helper", bearer(fx.admin), 200},
		{"prefixed admin rotating a covered principal", "bot-narrow", bearer(fx.botAdmin), 200},
		{"admin token rotating anyone", "bot-wide", adminAuth(), 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := fx.c.do(t, 0, "POST", "/v1/tenants/acme/principals/"+tc.target+"/rotate", nil, tc.auth)
			if status != tc.wantStatus {
				t.Fatalf("rotate %s: got %d %s, want %d", tc.target, status, body, tc.wantStatus)
			}
			if status == http.StatusForbidden && (errorCode(body) != "forbidden" || strings.Contains(string(body), "btk_")) {
				t.Errorf("rotate %s: got %s, want forbidden without a token", tc.target, body)
			}
		})
	}
	if status, _, body := fx.c.do(t, 0, "GET", "/v1/tenants/acme/kv/x/y", nil, bearer(boss)); status != http.StatusNotFound {
		t.Errorf("boss's token after the refused rotation: got %d %s, want 404 (authenticated)", status, body)
	}
}

// TestNonCanonicalPath: a path with an empty, "." or ".." segment is an
// API error, not an HTML redirect from http.ServeMux (docs/api.md: such names
// are 400 invalid_argument; every error is a JSON error object).
func TestNonCanonicalPath(t *testing.T) {
	fx := newAPIFixture(t)
	for _, path := range []string{"/v1/tenants/acme/../other", "/v1//tenants", "/v1/tenants/./acme", "//", "/v1/tenants//", "/v1/tenants/acme/tasks/."} {
		t.Run(path, func(t *testing.T) {
			status, h, body := fx.c.do(t, 0, "PUT", path, nil, adminAuth())
			if status >= 300 && status < 400 {
				t.Errorf("PUT %s: got %d Location %q, want a 4xx JSON error", path, status, h.Get("Location"))
			}
			if status < 400 || errorCode(body) == "" {
				t.Errorf("PUT %s: got %d %s, want a 4xx JSON error", path, status, body)
			}
		})
	}
}
