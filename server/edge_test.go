package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/fsm"
)

// Tests of the edge (api-notes.md "Forwarding", "Authentication details"):
// authenticate, then authorize, then read and validate the body, on every
// node.

// edgeFixture is a three-node cluster with tenants acme and other, and
// principals of acme: research (tasks under research/ and kv under notes/),
// and a token of tenant other.
type edgeFixture struct {
	c                    *testCluster
	leader, follower     int
	research, otherToken string
}

func newEdgeFixture(t *testing.T) *edgeFixture {
	t.Helper()
	c := newCluster(t, 3)
	fx := &edgeFixture{c: c}
	fx.leader = c.WaitForLeader(t)
	fx.follower = c.Followers(fx.leader)[0]
	for _, name := range []string{"acme", "other"} {
		if status, _, body := c.do(t, fx.leader, "PUT", "/v1/tenants/"+name, nil, adminAuth()); status != http.StatusCreated {
			t.Fatalf("PUT /v1/tenants/%s: got %d %s", name, status, body)
		}
	}
	fx.research = fx.principal(t, "acme", `{"name":"research","grants":[{"resource":"tasks","prefix":"research/","actions":["read","write"]},{"resource":"kv","prefix":"notes/","actions":["read","write"]}]}`)
	fx.otherToken = fx.principal(t, "other", `{"name":"o","grants":[{"resource":"*","prefix":"","actions":["read","write","delete"]}]}`)
	c.WaitConverged(t)
	return fx
}

func (fx *edgeFixture) principal(t *testing.T, tenant, body string) string {
	t.Helper()
	status, _, resp := fx.c.do(t, fx.leader, "POST", "/v1/tenants/"+tenant+"/principals", body, adminAuth())
	if status != http.StatusCreated {
		t.Fatalf("creating principal %s: %d %s", body, status, resp)
	}
	var p principalResponse
	decodeBody(t, resp, &p)
	return p.Token
}

// A principal's token works on a follower the moment its creation is
// acknowledged: a follower that does not know a token asks the leader how
// far it must apply before it answers 401.
func TestEdgeFreshTokenOnFollower(t *testing.T) {
	fx := newEdgeFixture(t)
	for i := range 10 {
		tok := fx.principal(t, "acme", fmt.Sprintf(`{"name":"fresh-%d","grants":[{"resource":"kv","prefix":"","actions":["read","write"]}]}`, i))
		status, _, body := fx.c.do(t, fx.follower, "PUT", fmt.Sprintf("/v1/tenants/acme/kv/ns/k%d", i), `{"value":1}`, bearer(tok))
		if status != http.StatusOK {
			t.Fatalf("fresh token %d on follower: got %d %s, want 200", i, status, body)
		}
	}
	status, _, body := fx.c.do(t, fx.follower, "PUT", "/v1/tenants/acme/kv/ns/k", `{"value":1}`, bearer("btk_unknown"))
	if status != http.StatusUnauthorized || errorCode(body) != "unauthenticated" {
		t.Fatalf("unknown token on follower: got %d %s, want 401", status, body)
	}
}

// A body over the limit is 413 on every node, the leader and through a
// follower, with or without a declared length, never 503.
func TestEdgeBodyTooLargeEverywhere(t *testing.T) {
	fx := newEdgeFixture(t)
	big := `{"value":"` + strings.Repeat("x", 9<<20) + `"}`
	for _, i := range []int{fx.leader, fx.follower} {
		for _, chunked := range []bool{false, true} {
			var rd io.Reader = strings.NewReader(big)
			if chunked {
				rd = io.MultiReader(rd) // hides the length: chunked encoding
			}
			req, err := http.NewRequest("PUT", "http://"+fx.c.nodes[i].httpAddr+"/v1/tenants/acme/kv/notes/big", rd)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+fx.research)
			resp, err := fx.c.client.Do(req)
			if err != nil {
				t.Fatalf("node %d chunked=%v: %v", i, chunked, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge || errorCode(b) != "too_large" {
				t.Errorf("9 MiB body to %s (leader %v, chunked %v): got %d %s, want 413 too_large",
					fx.c.nodes[i].id, i == fx.leader, chunked, resp.StatusCode, b)
			}
		}
	}
}

// Authenticate, then authorize, then validate: another tenant's token and a
// principal without any grant of the action on the resource get 403 before
// their malformed bodies are looked at, on the leader and on a follower.
func TestEdgeForbiddenBeforeValidation(t *testing.T) {
	fx := newEdgeFixture(t)
	cases := []struct {
		name, method, path, body, token string
	}{
		{"other tenant, task create", "POST", "/v1/tenants/acme/tasks", `{"queue":`, fx.otherToken},
		{"other tenant, kv put", "PUT", "/v1/tenants/acme/kv/notes/a", `not json`, fx.otherToken},
		{"other tenant, task update", "POST", "/v1/tenants/acme/tasks/t1/update", `{"Status":1}`, fx.otherToken},
		{"other tenant, principal create", "POST", "/v1/tenants/acme/principals", `{`, fx.otherToken},
		{"no refs grant, ref set", "PUT", "/v1/tenants/acme/refs/r1", `{"artifact_id":7}`, fx.research},
		{"no ops grant, op begin", "POST", "/v1/tenants/acme/ops/o1/begin", `[]`, fx.research},
		{"no checkpoints grant", "PUT", "/v1/tenants/acme/threads/t/checkpoints/c1", `{`, fx.research},
		{"no admin grant, principal create", "POST", "/v1/tenants/acme/principals", `{"name":`, fx.research},
		{"no delete grant, kv delete", "DELETE", "/v1/tenants/acme/kv/notes/a?expect_version=x", ``, fx.research},
		{"task outside the grant, update", "POST", "/v1/tenants/acme/tasks/secret-1/update", `{"bogus":true}`, fx.research},
		{"queue outside the grant, claim", "POST", "/v1/tenants/acme/queues/secret/claim", `{"owner":`, fx.research},
	}
	for _, tc := range cases {
		for _, i := range []int{fx.leader, fx.follower} {
			var body any
			if tc.body != "" {
				body = tc.body
			}
			status, _, resp := fx.c.do(t, i, tc.method, tc.path, body, bearer(tc.token))
			if status != http.StatusForbidden || errorCode(resp) != "forbidden" {
				t.Errorf("%s on %s: got %d %s, want 403 forbidden", tc.name, fx.c.nodes[i].id, status, resp)
			}
		}
	}
}

// A watch authenticates before it waits for the node to catch up: an
// unknown token naming a resume point far ahead gets 401 at once (not 503
// after the catch-up wait), and another tenant's token 403.
func TestEdgeWatchAuthenticatesFirst(t *testing.T) {
	f := fsm.New()
	c := &fakeCluster{f: f}
	const wait = time.Second
	s := New(Config{AdminToken: testAdminToken, CatchUpWait: wait, Logger: slog.New(slog.DiscardHandler)}, c, f)
	if res, err := c.Apply(context.Background(), fsm.NewCommand(fsm.KindTenantPut, 1, "acme", "", &fsm.TenantPutArgs{Name: "acme"})); err != nil || !res.OK() {
		t.Fatalf("tenant: %v %+v", err, res)
	}
	if res, err := c.Apply(context.Background(), fsm.NewCommand(fsm.KindTenantPut, 1, "other", "", &fsm.TenantPutArgs{Name: "other"})); err != nil || !res.OK() {
		t.Fatalf("tenant: %v %+v", err, res)
	}
	pc := &fsm.PrincipalCreateArgs{Name: "o", TokenHash: hashToken("other-token"), TokenSalt: "00",
		Grants: []fsm.Grant{{Resource: "*", Actions: []string{"read"}}}}
	if res, err := c.Apply(context.Background(), fsm.NewCommand(fsm.KindPrincipalCreate, 1, "other", "", pc)); err != nil || !res.OK() {
		t.Fatalf("principal: %v %+v", err, res)
	}
	ahead := f.AppliedIndex() + 1000
	for _, tc := range []struct {
		token string
		want  int
	}{{"btk_unknown", 401}, {"other-token", 403}} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*wait)
		req := httptest.NewRequestWithContext(ctx, "GET", fmt.Sprintf("/v1/tenants/acme/watch?from_index=%d", ahead), nil)
		req.Header.Set("Authorization", "Bearer "+tc.token)
		rec := httptest.NewRecorder()
		start := time.Now()
		s.Handler().ServeHTTP(rec, req)
		cancel()
		if rec.Code != tc.want {
			t.Errorf("token %s: status %d %s, want %d", tc.token, rec.Code, rec.Body, tc.want)
		}
		if d := time.Since(start); d >= wait {
			t.Errorf("token %s: answered after %v; want an answer before the catch-up wait of %v", tc.token, d, wait)
		}
	}
}
