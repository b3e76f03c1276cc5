package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"github.com/baton-dev/baton/fsm/wire"
	"io"
	"log/slog"
	"net"
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

func newEdgeFixture(t *testing.T, configure ...func(*testCluster)) *edgeFixture {
	t.Helper()
	c := newCluster(t, 3, configure...)
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

// do is c.do, retried while the answer is 503 (an election on a loaded
// machine), for at most waitTimeout.
func (fx *edgeFixture) do(t testing.TB, i int, method, path string, body any, headers map[string]string) (int, http.Header, []byte) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		status, h, resp := fx.c.do(t, i, method, path, body, headers)
		if status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return status, h, resp
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (fx *edgeFixture) principal(t *testing.T, tenant, body string) string {
	t.Helper()
	status, _, resp := fx.do(t, fx.leader, "POST", "/v1/tenants/"+tenant+"/principals", body, adminAuth())
	if status != http.StatusCreated {
		t.Fatalf("creating principal %s: %d %s", body, status, resp)
	}
	var p wire.PrincipalWithToken
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
		status, _, body := fx.do(t, fx.follower, "PUT", fmt.Sprintf("/v1/tenants/acme/kv/ns/k%d", i), `{"value":1}`, bearer(tok))
		if status != http.StatusOK {
			t.Fatalf("fresh token %d on follower: got %d %s, want 200", i, status, body)
		}
	}
	// A watch (served by the follower itself) with a token created a
	// moment ago starts streaming.
	tok := fx.principal(t, "acme", `{"name":"fresh-watcher","grants":[{"resource":"kv","prefix":"","actions":["read"]}]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+fx.c.nodes[fx.follower].httpAddr+"/v1/tenants/acme/watch?resources=kv", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := fx.c.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cancel()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch with a fresh token on a follower: got %d, want 200", resp.StatusCode)
	}
	status, _, body := fx.do(t, fx.follower, "PUT", "/v1/tenants/acme/kv/ns/k", `{"value":1}`, bearer("btk_unknown"))
	if status != http.StatusUnauthorized || errorCode(body) != "unauthenticated" {
		t.Fatalf("unknown token on follower: got %d %s, want 401", status, body)
	}
	status, _, body = fx.do(t, fx.follower, "GET", "/v1/tenants/acme/watch?from_index=999999", nil, bearer("btk_unknown"))
	if status != http.StatusUnauthorized {
		t.Fatalf("unknown token watching on a follower: got %d %s, want 401", status, body)
	}
}

// A body over the limit is 413 on every node, the leader and through a
// follower, with or without a declared length, never 503.
func TestEdgeBodyTooLargeEverywhere(t *testing.T) {
	fx := newEdgeFixture(t)
	big := `{"value":"` + strings.Repeat("x", 9<<20) + `"}`
	for _, i := range []int{fx.leader, fx.follower} {
		for _, chunked := range []bool{false, true} {
			status, b := bigPut(t, fx, i, chunked, big)
			if status != http.StatusRequestEntityTooLarge || errorCode(b) != "too_large" {
				t.Errorf("9 MiB body to %s (leader %v, chunked %v): got %d %s, want 413 too_large",
					fx.c.nodes[i].id, i == fx.leader, chunked, status, b)
			}
		}
	}
}

// bigPut sends body as a KV put to node i and returns the answer. An
// answer of the cluster changing leader (503, or 504 from a follower whose
// forward the election cut) is not what the caller tests: it waits for the
// next leader and sends again, until the deadline.
func bigPut(t *testing.T, fx *edgeFixture, i int, chunked bool, body string) (int, []byte) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var rd io.Reader = strings.NewReader(body)
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
		leaderless := resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusGatewayTimeout
		if !leaderless || time.Now().After(deadline) {
			return resp.StatusCode, b
		}
		fx.c.WaitForLeader(t) // polls, with its own deadline, until every node knows the new leader
	}
}

// Authenticate, then authorize, then validate: another tenant's token and a
// principal without any grant of the action on the resource get 403 before
// their malformed bodies are looked at, on the leader and on a follower.
func TestEdgeForbiddenBeforeValidation(t *testing.T) {
	fx := newEdgeFixture(t)
	kvOnly := fx.principal(t, "acme", `{"name":"kv-only","grants":[{"resource":"kv","prefix":"notes/","actions":["read"]}]}`)
	narrow := fx.principal(t, "acme", `{"name":"narrow","grants":[{"resource":"artifacts","prefix":"mine/","actions":["write"]},{"resource":"checkpoints","prefix":"mine/","actions":["delete"]}]}`)
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
		// Routes whose grant is read from the body, or whose name in the
		// path the handler checked only after reading the body (400 before).
		{"no tasks grant, schedule create", "POST", "/v1/tenants/acme/schedules", `{"queue":`, kvOnly},
		{"no write grant, transaction", "POST", "/v1/tenants/acme/txn", `{"ops":`, kvOnly},
		{"no artifacts grant, policy put", "PUT", "/v1/tenants/acme/artifact-policies", `{"prefix":`, fx.research},
		{"name outside the grant, publish", "POST", "/v1/tenants/acme/artifacts/a1/versions", `{"chunks":`, narrow},
		{"thread outside the grant, thread delete", "DELETE", "/v1/tenants/acme/threads/t1", `{"fence":`, narrow},
	}
	for _, tc := range cases {
		for _, i := range []int{fx.leader, fx.follower} {
			var body any
			if tc.body != "" {
				body = tc.body
			}
			status, _, resp := fx.do(t, i, tc.method, tc.path, body, bearer(tc.token))
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

// A rotation answers the new token once; the old token is refused from
// the rotation's index on, on every node that applied it; a replay with
// the same Idempotency-Key shows the same new token; the listing shows
// names and grants, never tokens.
func TestEdgePrincipalRotateAndList(t *testing.T) {
	fx := newEdgeFixture(t)
	c := fx.c
	old := fx.principal(t, "acme", `{"name":"bot-1","grants":[{"resource":"kv","prefix":"notes/","actions":["read","write"]}]}`)
	// bot-admin holds bot-1's grant too: rotating hands over bot-1's token.
	botAdmin := fx.principal(t, "acme", `{"name":"bot-admin","grants":[{"resource":"admin","prefix":"bot-","actions":["read","write"]},{"resource":"kv","prefix":"notes/","actions":["read","write"]}]}`)
	if status, _, body := fx.do(t, fx.follower, "PUT", "/v1/tenants/acme/kv/notes/a", `{"value":1}`, bearer(old)); status != 200 {
		t.Fatalf("old token before rotation: %d %s", status, body)
	}
	status, h, body := fx.do(t, fx.follower, "POST", "/v1/tenants/acme/principals/bot-1/rotate", nil, with(adminAuth(), "Idempotency-Key", "rot-1"))
	if status != http.StatusOK {
		t.Fatalf("rotate: got %d %s, want 200", status, body)
	}
	var rot wire.PrincipalWithToken
	decodeBody(t, body, &rot)
	if rot.Name != "bot-1" || !strings.HasPrefix(rot.Token, "btk_") || rot.Token == old || len(rot.Grants) != 1 || rot.Grants[0].Prefix != "notes/" {
		t.Fatalf("rotate: got %+v, want bot-1 with a new token and its grant", rot)
	}
	index := indexOf(t, h)
	for i := range c.nodes {
		waitFor(t, "the rotation applied on "+c.nodes[i].id, func() string {
			if c.nodes[i].fsm.AppliedIndex() < index {
				return "not yet"
			}
			return ""
		})
		if status, _, body := fx.do(t, i, "GET", "/v1/tenants/acme/kv/notes/a?consistency=stale", nil, bearer(old)); status != http.StatusUnauthorized {
			t.Errorf("old token on %s after the rotation: got %d %s, want 401", c.nodes[i].id, status, body)
		}
		if status, _, body := fx.do(t, i, "GET", "/v1/tenants/acme/kv/notes/a", nil, bearer(rot.Token)); status != http.StatusOK {
			t.Errorf("new token on %s: got %d %s, want 200", c.nodes[i].id, status, body)
		}
	}
	status, h, body = fx.do(t, fx.leader, "POST", "/v1/tenants/acme/principals/bot-1/rotate", nil, with(adminAuth(), "Idempotency-Key", "rot-1"))
	var again wire.PrincipalWithToken
	decodeBody(t, body, &again)
	if status != http.StatusOK || h.Get("Idempotent-Replay") != "true" || again.Token != rot.Token {
		t.Errorf("replayed rotation: got %d %s (replay %q), want the same token again", status, body, h.Get("Idempotent-Replay"))
	}
	// A principal with an admin grant on bot- rotates bot- principals only.
	if status, _, body := fx.do(t, fx.follower, "POST", "/v1/tenants/acme/principals/bot-1/rotate", nil, bearer(botAdmin)); status != 200 {
		t.Errorf("rotation by an admin grant covering the name: got %d %s", status, body)
	}
	for _, tc := range []struct {
		name, path string
		auth       map[string]string
		want       int
	}{
		{"outside the admin grant", "/v1/tenants/acme/principals/research/rotate", bearer(botAdmin), 403},
		{"without an admin grant", "/v1/tenants/acme/principals/bot-1/rotate", bearer(fx.research), 403},
		{"another tenant", "/v1/tenants/acme/principals/bot-1/rotate", bearer(fx.otherToken), 403},
		{"missing principal", "/v1/tenants/acme/principals/bot-nobody/rotate", adminAuth(), 404},
	} {
		if status, _, body := fx.do(t, fx.follower, "POST", tc.path, nil, tc.auth); status != tc.want {
			t.Errorf("rotate %s: got %d %s, want %d", tc.name, status, body, tc.want)
		}
	}

	list := func(auth map[string]string) (int, []wire.PrincipalInfo, []byte) {
		status, _, body := fx.do(t, fx.follower, "GET", "/v1/tenants/acme/principals", nil, auth)
		var out struct{ Principals []wire.PrincipalInfo }
		if status == 200 {
			decodeBody(t, body, &out)
		}
		return status, out.Principals, body
	}
	status, all, body := list(adminAuth())
	var names []string
	for _, p := range all {
		names = append(names, p.Name)
	}
	if status != 200 || strings.Join(names, ",") != "bot-1,bot-admin,research" {
		t.Errorf("admin list: got %d %v, want bot-1,bot-admin,research", status, names)
	}
	for _, leak := range []string{"token", "salt", rot.Token, hashToken(rot.Token)} {
		if strings.Contains(string(body), leak) {
			t.Errorf("the list %s contains %q", body, leak)
		}
	}
	if status, some, _ := list(bearer(botAdmin)); status != 200 || len(some) != 2 || some[0].Name != "bot-1" || some[1].Name != "bot-admin" {
		t.Errorf("list with an admin grant on bot-: got %d %+v, want bot-1 and bot-admin", status, some)
	}
	if status, _, body := list(bearer(fx.research)); status != 403 {
		t.Errorf("list without an admin grant: got %d %s, want 403", status, body)
	}
}

// Grant prefixes: a plain prefix is a string prefix (as it always was); one
// ending in "/" covers that segment itself and the names under it, and
// nothing that merely starts with the same letters.
func TestEdgeSegmentBoundedGrants(t *testing.T) {
	for _, tc := range []struct {
		prefix, name string
		want         bool
	}{
		{"", "anything", true},
		{"research", "research", true},
		{"research", "research-secret", true}, // a plain prefix, as before
		{"research/", "research", true},
		{"research/", "research/a", true},
		{"research/", "research-secret", false},
		{"research/", "researc", false},
		{"notes/", "notes/k", true},
		{"notes/", "notes-x/k", false},
	} {
		if got := prefixCovers(tc.prefix, tc.name); got != tc.want {
			t.Errorf("prefixCovers(%q, %q) = %v, want %v", tc.prefix, tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		have, want string
		ok         bool
	}{
		{"", "research/", true},
		{"research", "research/", true},
		{"research/", "research/", true},
		{"research/", "research/sub", true},
		{"research/", "research", false}, // would cover research-secret
		{"research/", "", false},
		{"research/a/", "research/", false},
	} {
		if got := prefixIncludes(tc.have, tc.want); got != tc.ok {
			t.Errorf("prefixIncludes(%q, %q) = %v, want %v", tc.have, tc.want, got, tc.ok)
		}
	}

	fx := newEdgeFixture(t) // research holds tasks "research/" and kv "notes/"
	for _, tc := range []struct {
		queue string
		want  int
	}{{"research", 201}, {"research-secret", 403}, {"researchx", 403}} {
		status, _, body := fx.do(t, fx.follower, "POST", "/v1/tenants/acme/tasks", fmt.Sprintf(`{"queue":%q}`, tc.queue), bearer(fx.research))
		if status != tc.want {
			t.Errorf("task create in queue %s with grant research/: got %d %s, want %d", tc.queue, status, body, tc.want)
		}
	}
	if status, _, body := fx.do(t, fx.leader, "PUT", "/v1/tenants/acme/kv/notes-x/k", `{"value":1}`, bearer(fx.research)); status != 403 {
		t.Errorf("kv notes-x/k with grant notes/: got %d %s, want 403", status, body)
	}
}

// Nothing outside a narrow grant leaks through errors: a task outside the
// grant is 403 without its queue's name, whether or not it exists, also
// when its id is created again; a manifest may not name chunks of
// artifacts the publisher may not read; a ref may not point at an
// artifact the caller may not read.
func TestEdgeNarrowGrantsLearnNothing(t *testing.T) {
	fx := newEdgeFixture(t) // research: tasks research/, kv notes/
	c := fx.c
	_ = c
	do := func(i int, method, path, body string, auth map[string]string) (int, []byte) {
		t.Helper()
		var b any
		if body != "" {
			b = body
		}
		status, _, resp := fx.do(t, i, method, path, b, auth)
		return status, resp
	}
	if status, body := do(fx.leader, "POST", "/v1/tenants/acme/tasks", `{"task_id":"hidden-1","queue":"classified"}`, adminAuth()); status != 201 {
		t.Fatalf("admin task create: %d %s", status, body)
	}
	for _, tc := range []struct{ name, method, path, body string }{
		{"get existing", "GET", "/v1/tenants/acme/tasks/hidden-1", ""},
		{"get missing", "GET", "/v1/tenants/acme/tasks/hidden-2", ""},
		{"update existing", "POST", "/v1/tenants/acme/tasks/hidden-1/update", `{"status":"done"}`},
		{"delete existing", "DELETE", "/v1/tenants/acme/tasks/hidden-1", ""},
		{"create over an existing id", "POST", "/v1/tenants/acme/tasks", `{"task_id":"hidden-1","queue":"research"}`},
		{"txn create over an existing id", "POST", "/v1/tenants/acme/txn", `{"ops":[{"op":"task.create","task_id":"hidden-1","queue":"research"}]}`},
		{"txn update existing", "POST", "/v1/tenants/acme/txn", `{"ops":[{"op":"task.update","task_id":"hidden-1","status":"x"}]}`},
	} {
		status, body := do(fx.follower, tc.method, tc.path, tc.body, bearer(fx.research))
		if status != 403 || errorCode(body) != "forbidden" || strings.Contains(string(body), "classified") {
			t.Errorf("%s: got %d %s, want 403 that does not name the queue", tc.name, status, body)
		}
	}
	if status, body := do(fx.leader, "POST", "/v1/tenants/acme/tasks", `{"task_id":"mine-1","queue":"research"}`, bearer(fx.research)); status != 201 {
		t.Fatalf("create in its own queue: %d %s", status, body)
	}
	if status, body := do(fx.leader, "POST", "/v1/tenants/acme/tasks", `{"task_id":"mine-1","queue":"research"}`, bearer(fx.research)); status != 409 {
		t.Errorf("create over its own task: got %d %s, want 409 already_exists", status, body)
	}

	// Artifacts: the admin publishes "secret" from one chunk.
	pub := fx.principal(t, "acme", `{"name":"pub","grants":[{"resource":"artifacts","prefix":"pub","actions":["read","write"]},{"resource":"refs","prefix":"","actions":["read","write"]}]}`)
	c.WaitConverged(t)
	upload := func(auth map[string]string, content string) string {
		t.Helper()
		sum := sha256.Sum256([]byte(content))
		digest := "sha256:" + hex.EncodeToString(sum[:])
		if status, body := do(fx.leader, "PUT", "/v1/tenants/acme/chunks/"+digest, content, auth); status != 201 && status != 200 {
			t.Fatalf("chunk upload: %d %s", status, body)
		}
		return digest
	}
	publish := func(auth map[string]string, name, digest string, size int) (int, []byte) {
		t.Helper()
		return do(fx.leader, "POST", "/v1/tenants/acme/artifacts/"+name+"/versions",
			fmt.Sprintf(`{"chunks":[{"digest":%q,"size":%d}],"digest":%q,"size":%d}`, digest, size, digest, size), auth)
	}
	const secret, mine = "the launch codes", "my own notes"
	secretDigest := upload(adminAuth(), secret)
	status, body := publish(adminAuth(), "secret", secretDigest, len(secret))
	if status != 201 {
		t.Fatalf("admin publish: %d %s", status, body)
	}
	var secretM struct {
		ArtifactID string `json:"artifact_id"`
	}
	decodeBody(t, body, &secretM)
	if status, body := publish(bearer(pub), "pub-steal", secretDigest, len(secret)); status != 403 || errorCode(body) != "forbidden" {
		t.Errorf("publishing another artifact's chunk: got %d %s, want 403", status, body)
	}
	if status, body := do(fx.leader, "GET", "/v1/tenants/acme/artifacts/pub-steal/versions/1/content", "", bearer(pub)); status == 200 {
		t.Errorf("read the stolen content: %s", body)
	}
	mineDigest := upload(bearer(pub), mine)
	status, body = publish(bearer(pub), "pub-1", mineDigest, len(mine))
	if status != 201 {
		t.Fatalf("publishing its own fresh chunk: got %d %s, want 201", status, body)
	}
	var mineM struct {
		ArtifactID string `json:"artifact_id"`
	}
	decodeBody(t, body, &mineM)
	if status, body := publish(bearer(pub), "pub-2", mineDigest, len(mine)); status != 201 {
		t.Errorf("republishing a chunk of an artifact it may read: got %d %s, want 201", status, body)
	}

	// Refs: only to artifacts the caller may read.
	status, body = do(fx.follower, "PUT", "/v1/tenants/acme/refs/r/secret", fmt.Sprintf(`{"artifact_id":%q}`, secretM.ArtifactID), bearer(pub))
	if status != 403 || strings.Contains(string(body), `"secret"`) {
		t.Errorf("ref to an artifact it may not read: got %d %s, want 403 not naming it", status, body)
	}
	status, body = do(fx.follower, "POST", "/v1/tenants/acme/txn", fmt.Sprintf(`{"ops":[{"op":"ref.set","ref":"r/secret","artifact_id":%q}]}`, secretM.ArtifactID), bearer(pub))
	if status != 403 {
		t.Errorf("txn ref to an artifact it may not read: got %d %s, want 403", status, body)
	}
	if status, body := do(fx.follower, "PUT", "/v1/tenants/acme/refs/r/mine", fmt.Sprintf(`{"artifact_id":%q}`, mineM.ArtifactID), bearer(pub)); status != 200 {
		t.Errorf("ref to its own artifact: got %d %s, want 200", status, body)
	}
}

// A body that stops arriving is given up on after Config.BodyTimeout: the
// request is answered 400 and its goroutine and buffer are freed, instead
// of waiting for the client forever.
func TestEdgeSlowBodyTimesOut(t *testing.T) {
	const bodyTimeout = 300 * time.Millisecond
	fx := newEdgeFixture(t, func(c *testCluster) { c.bodyTimeout = bodyTimeout })
	for _, i := range []int{fx.leader, fx.follower} {
		conn, err := net.Dial("tcp", fx.c.nodes[i].httpAddr)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(conn, "PUT /v1/tenants/acme/kv/notes/slow HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 100\r\n\r\n{\"value\":", fx.research)
		start := time.Now()
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		conn.Close()
		if err != nil {
			t.Fatalf("%s: no answer to a stalled body: %v", fx.c.nodes[i].id, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || time.Since(start) > 3*time.Second {
			t.Errorf("%s: stalled body answered %d after %v, want 400 after about %v", fx.c.nodes[i].id, resp.StatusCode, time.Since(start), bodyTimeout)
		}
	}
}
