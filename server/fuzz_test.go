package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/server/core/node"
	"github.com/hashicorp/raft"
)

// fakeCluster is a single-member Cluster without Raft: Apply applies the
// command to the FSM at the next index at once, or fails with applyErr.
type fakeCluster struct {
	f        *fsm.FSM
	applyErr error

	mu    sync.Mutex
	index uint64
}

func (c *fakeCluster) ID() string                         { return "n1" }
func (c *fakeCluster) HTTPAddr() string                   { return "127.0.0.1:1" }
func (c *fakeCluster) RaftAddr() string                   { return "127.0.0.1:2" }
func (c *fakeCluster) IsLeader() bool                     { return true }
func (c *fakeCluster) Leader() (string, string)           { return "n1", "127.0.0.1:2" }
func (c *fakeCluster) HTTPAddrOf(string) string           { return "127.0.0.1:1" }
func (c *fakeCluster) LastLeaderContact() time.Time       { return time.Now() }
func (c *fakeCluster) ReadBarrier(context.Context) error  { return c.applyErr }
func (c *fakeCluster) WriteBarrier(context.Context) error { return nil }
func (c *fakeCluster) Term() uint64                       { return 1 }
func (c *fakeCluster) CommitIndex() uint64                { return c.f.AppliedIndex() }
func (c *fakeCluster) LastSnapshotIndex() uint64          { return 0 }
func (c *fakeCluster) RemoveMember(context.Context, string) error {
	return c.memberErr()
}
func (c *fakeCluster) AddMember(context.Context, string, string, bool) error { return c.applyErr }
func (c *fakeCluster) TransferLeadership(_ context.Context, id string) error {
	if id != "" && id != "n1" {
		return node.ErrUnknownMember
	}
	return c.applyErr
}

func (c *fakeCluster) memberErr() error {
	if c.applyErr != nil {
		return c.applyErr
	}
	return node.ErrUnknownMember
}

func (c *fakeCluster) Members() ([]node.MemberInfo, error) {
	return []node.MemberInfo{{ID: "n1", RaftAddr: "127.0.0.1:2", HTTPAddr: "127.0.0.1:1", Voter: true, State: "leader"}}, nil
}

func (c *fakeCluster) Apply(_ context.Context, cmd *fsm.Command) (*fsm.Result, error) {
	if c.applyErr != nil {
		return nil, c.applyErr
	}
	c.mu.Lock()
	c.index++
	idx := c.index
	c.mu.Unlock()
	switch v := c.f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: fsm.EncodeEntry([]*fsm.Command{cmd})}).(type) {
	case []*fsm.Result:
		return v[0], nil
	case error:
		return nil, v
	default:
		panic("fakeCluster: unexpected apply response")
	}
}

// fuzzServer is a Server over a fakeCluster with tenant acme and principal
// bot (every grant), built fresh for each input so that inputs do not
// depend on each other. It returns the server and bot's token.
func fuzzServer(t testing.TB, applyErr error) (*Server, string) {
	f := fsm.New()
	c := &fakeCluster{f: f}
	s := New(Config{AdminToken: testAdminToken, MaxJSONBody: 4 << 10, Logger: slog.New(slog.DiscardHandler)}, c, f)
	res, err := c.Apply(context.Background(), fsm.NewCommand(fsm.KindTenantPut, 1, "acme", "", &fsm.TenantPutArgs{Name: "acme"}))
	if err != nil || !res.OK() {
		t.Fatalf("seeding tenant: %v %+v", err, res)
	}
	salt := "00112233445566778899aabbccddeeff"
	tok := s.principalToken("acme", "bot", salt)
	res, err = c.Apply(context.Background(), fsm.NewCommand(fsm.KindPrincipalCreate, 2, "acme", "", &fsm.PrincipalCreateArgs{
		Name: "bot", TokenHash: hashToken(tok), TokenSalt: salt,
		Grants: []fsm.Grant{{Resource: "*", Actions: []string{"read", "write", "delete"}}},
	}))
	if err != nil || !res.OK() {
		t.Fatalf("seeding principal: %v %+v", err, res)
	}
	res, err = c.Apply(context.Background(), fsm.NewCommand(fsm.KindTaskCreate, 3, "acme", "", &fsm.TaskCreateArgs{
		ID: "t1", Queue: "q", Payload: []byte(`{"n":1}`)}))
	if err != nil || !res.OK() {
		t.Fatalf("seeding task: %v %+v", err, res)
	}
	c.applyErr = applyErr
	return s, tok
}

// FuzzRequestDecoding feeds arbitrary methods, paths, headers and bodies
// to the handler. Every answer must be a success or a docs/api.md error object
// whose code is known and matches the status; nothing may panic.
func FuzzRequestDecoding(f *testing.F) {
	// auth: 0 none, 1 admin, 2 principal, 3 the authValue string.
	// mode: its low 4 bits modulo 3: 0 real apply, 1 node unavailable, 2
	// request timed out; bit 0x10 sends Content-Type application/msgpack
	// and bit 0x20 Accept application/msgpack (cpmsgpack.go).
	seeds := []struct {
		method, path string
		auth         uint8
		authValue    string
		idemKey      string
		body         string
		mode         uint8
	}{
		{"PUT", "/v1/tenants/x", 1, "", "", "", 0},
		{"PUT", "/v1/tenants/x", 1, "", "k1", "", 0},
		{"PUT", "/v1/tenants/-bad", 1, "", "", "", 0},
		{"PUT", "/v1/tenants/a%2Fb", 1, "", "", "", 0},
		{"GET", "/v1/tenants", 1, "", "", "", 0},
		{"GET", "/v1/tenants?consistency=stale", 2, "", "", "", 0},
		{"POST", "/v1/tenants/acme/principals", 1, "", "", `{"name":"reviewer","grants":[{"resource":"refs","prefix":"r/","actions":["read"]}]}`, 0},
		{"POST", "/v1/tenants/acme/principals", 2, "", "idem-1", `{"name":"w","grants":[{"resource":"*","prefix":"","actions":["read","write","delete"]}]}`, 0},
		{"POST", "/v1/tenants/acme/principals", 1, "", "", `{"name":"a","grants":[],"x":1}`, 0},
		{"POST", "/v1/tenants/acme/principals", 1, "", "", `{"name":`, 0},
		{"POST", "/v1/tenants/other/principals", 2, "", "", `{"name":"a"}`, 0},
		{"DELETE", "/v1/tenants/acme/principals/bot", 1, "", "", "", 0},
		{"DELETE", "/v1/tenants/acme/principals/nobody", 2, "", "", "", 0},
		{"GET", "/v1/cluster", 1, "", "", "", 0},
		{"GET", "/v1/cluster/backup", 1, "", "", "", 0},
		{"POST", "/v1/cluster/members", 1, "", "", `{"id":"n2","raft_addr":"127.0.0.1:3","http_addr":"127.0.0.1:4","voter":false}`, 0},
		{"DELETE", "/v1/cluster/members/n2", 1, "", "", "", 0},
		{"PUT", "/v1/cluster/members/n1/meta", 1, "", "", `{"raft_addr":"127.0.0.1:2","http_addr":"127.0.0.1:1"}`, 0},
		{"POST", "/v1/cluster/leadership-transfer", 1, "", "", `{"to":"n7"}`, 0},
		{"GET", "/healthz", 0, "", "", "", 0},
		{"GET", "/readyz", 0, "", "", "", 0},
		{"HEAD", "/v1/tenants", 1, "", "", "", 0},
		{"PATCH", "/v1/tenants/acme", 1, "", "", "", 0},
		{"GET", "/v1/nope/../tenants", 1, "", "", "", 0},
		{"PUT", "/v1/tenants/x", 3, "Bearer nope", "", "", 0},
		{"PUT", "/v1/tenants/x", 3, "Basic Zm9vOmJhcg==", "", "", 0},
		{"PUT", "/v1/tenants/x", 1, "", "", "", 1},
		{"POST", "/v1/tenants/acme/principals", 1, "", "k", `{"name":"late","grants":[]}`, 2},
		{"GET", "/v1/tenants", 1, "", "", "", 1},
		{"PUT", "/v1/tenants/x", 1, "", strings.Repeat("k", 129), "", 0},
		{"POST", "/v1/tenants/acme/tasks", 2, "", "k", `{"task_id":"t2","queue":"q","priority":2,"payload":{"x":[1,2]}}`, 0},
		{"POST", "/v1/tenants/acme/tasks", 1, "", "", `{"queue":"q"}`, 0},
		{"GET", "/v1/tenants/acme/tasks/t1", 2, "", "", "", 0},
		{"GET", "/v1/tenants/acme/tasks?queue=q&status=pending&limit=1&page_token=x", 2, "", "", "", 0},
		{"DELETE", "/v1/tenants/acme/tasks/t1?expect_version=1", 2, "", "", "", 0},
		{"POST", "/v1/tenants/acme/tasks/t1/claim", 2, "", "", `{"owner":"w","lease_ms":1000,"expect_status":"pending"}`, 0},
		{"POST", "/v1/tenants/acme/queues/q/claim", 2, "", "", `{"owner":"w","lease_ms":1000,"statuses":["pending"],"set_status":"running","wait_ms":0}`, 0},
		{"POST", "/v1/tenants/acme/tasks/t1/renew", 2, "", "", `{"fencing_token":1,"lease_ms":1000}`, 0},
		{"POST", "/v1/tenants/acme/tasks/t1/update", 2, "", "", `{"expect_version":1,"status":"done","result":{"ok":true},"release":true}`, 0},
		{"POST", "/v1/tenants/acme/txn", 2, "", "", `{"ops":[{"op":"task.create","task_id":"t3","queue":"q"},{"op":"task.claim","task_id":"t3","owner":"w","lease_ms":10}]}`, 0},
		// The knowledge store (kvstore.go).
		{"POST", "/v1/tenants/acme/store/write", 2, "", "", `{"ops":[{"namespace":["u","a/b"],"key":"k","value":{"n":1},"vectors":[[1,0]],"ttl_minutes":1},{"namespace":["u"],"key":"x"}]}`, 0},
		{"POST", "/v1/tenants/acme/store/get", 2, "", "", `{"items":[{"namespace":["u","a/b"],"key":"k"}],"refresh_ttl":true}`, 0},
		{"POST", "/v1/tenants/acme/store/search", 1, "", "", `{"namespace_prefix":["u"],"filter":{"n":{"$gte":1},"o":{"x":[1]}},"vector":[1,1],"limit":3,"offset":1}`, 0},
		{"POST", "/v1/tenants/acme/store/namespaces", 2, "", "", `{"match_conditions":[{"match_type":"suffix","path":["*","b"]}],"max_depth":1}`, 0},
	}
	// The checkpoint routes in msgpack (mode 0x30: msgpack both ways), and
	// the queue batch and batch claims.
	blob := map[string]any{"channel": "m", "version": "1", "type": "msgpack", "b64": []byte{0x92, 0x00, 0xff}}
	for _, s := range []struct {
		path string
		body any
	}{
		{"/v1/tenants/acme/threads/th/checkpoints/c1", map[string]any{"data": map[string]any{"v": int64(1)}, "metadata": map[string]any{"step": int64(-1)},
			"blob_versions": map[string]string{"m": "1"}, "blobs": []any{blob}}},
		{"/v1/tenants/acme/threads/th/checkpoints/c1/writes/t1", map[string]any{"task_path": "p", "writes": []any{
			map[string]any{"channel": "m", "type": "msgpack", "b64": []byte{1}},
			map[string]any{"channel": "__error__", "idx": int64(-1), "value": map[string]any{"e": "x"}},
			map[string]any{"channel": "c", "idx": uint64(1) << 63, "value": int64(1)}}}},
	} {
		seeds = append(seeds, struct {
			method, path string
			auth         uint8
			authValue    string
			idemKey      string
			body         string
			mode         uint8
		}{"PUT", s.path, 2, "", "", string(mpEncode(f, s.body)), 0x30})
	}
	seeds = append(seeds, []struct {
		method, path string
		auth         uint8
		authValue    string
		idemKey      string
		body         string
		mode         uint8
	}{
		{"GET", "/v1/tenants/acme/threads/th/checkpoints/latest", 2, "", "", "", 0x20},
		{"GET", "/v1/tenants/acme/checkpoints?pending_writes=true", 2, "", "", "", 0x20},
		{"PUT", "/v1/tenants/acme/threads/th/checkpoints/c2", 2, "", "", "\xdf\xff\xff\xff\xff", 0x30},
		{"POST", "/v1/tenants/acme/queues/q/claim", 2, "", "", `{"owner":"w","lease_ms":1000,"max":3}`, 0},
		{"POST", "/v1/tenants/acme/queues/q/batch", 2, "", "k", `{"updates":[{"id":"t1","fencing_token":1,"status":"done","release":true},{"id":"nope","status":"x"}],"claim":{"owner":"w","lease_ms":1000,"max":2}}`, 0},
		{"POST", "/v1/tenants/acme/tasks/t1/update", 2, "", "", `{"status":"done","claim_next":{"queue":"q","owner":"w","lease_ms":1000,"max":64}}`, 0},
	}...)
	for _, s := range seeds {
		f.Add(s.method, s.path, s.auth, s.authValue, s.idemKey, []byte(s.body), s.mode)
	}
	errs := []error{nil, node.ErrUnavailable, context.DeadlineExceeded}
	f.Fuzz(func(t *testing.T, method, target string, auth uint8, authValue, idemKey string, body []byte, mode uint8) {
		s, tok := fuzzServer(t, errs[int(mode&0x0f)%len(errs)])
		if !strings.HasPrefix(target, "/") {
			target = "/" + target
		}
		r, err := http.NewRequest(method, "http://baton.test"+target, bytes.NewReader(body))
		if err != nil {
			return // not a request a server could receive
		}
		switch auth % 4 {
		case 1:
			r.Header.Set("Authorization", "Bearer "+testAdminToken)
		case 2:
			r.Header.Set("Authorization", "Bearer "+tok)
		case 3:
			r.Header.Set("Authorization", authValue)
		}
		if idemKey != "" {
			r.Header.Set("Idempotency-Key", idemKey)
		}
		if mode&0x10 != 0 {
			r.Header.Set("Content-Type", mediaMsgpack)
		}
		if mode&0x20 != 0 {
			r.Header.Set("Accept", mediaMsgpack)
		}
		// Bounds long polls (queue claim wait_ms) so that every input is fast.
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		r = r.WithContext(ctx)
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		checkResponse(t, r, w)
	})
}

// checkResponse asserts that w is a success or a well-formed API error.
func checkResponse(t *testing.T, r *http.Request, w *httptest.ResponseRecorder) {
	t.Helper()
	status, body, ct := w.Code, w.Body.Bytes(), w.Header().Get("Content-Type")
	switch {
	case status >= 200 && status < 300:
		if strings.HasPrefix(ct, "application/json") && len(body) > 0 && !json.Valid(body) {
			t.Fatalf("%s %s: %d with invalid JSON %q", r.Method, r.URL, status, body)
		}
		if ct == mediaMsgpack {
			var v any
			if err := decodeMsgpack(body, &v); err != nil {
				t.Fatalf("%s %s: %d with invalid msgpack %q (%v)", r.Method, r.URL, status, body, err)
			}
		}
	default:
		var e struct {
			Error *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if ct != "application/json" {
			t.Fatalf("%s %s: %d with Content-Type %q, want application/json (body %q)", r.Method, r.URL, status, ct, body)
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		if err := dec.Decode(&e); err != nil || e.Error == nil {
			t.Fatalf("%s %s: %d body %q is not an error object (%v)", r.Method, r.URL, status, body, err)
		}
		if _, err := dec.Token(); err != io.EOF {
			t.Fatalf("%s %s: data after the error object in %q", r.Method, r.URL, body)
		}
		want, known := statusOf[e.Error.Code]
		if !known {
			t.Fatalf("%s %s: unknown error code %q (body %q)", r.Method, r.URL, e.Error.Code, body)
		}
		if want != status {
			t.Fatalf("%s %s: code %q with status %d, want %d", r.Method, r.URL, e.Error.Code, status, want)
		}
		if e.Error.Code == codeInternal {
			t.Fatalf("%s %s: internal error %q", r.Method, r.URL, e.Error.Message)
		}
		if e.Error.Message == "" {
			t.Fatalf("%s %s: error %q without a message", r.Method, r.URL, e.Error.Code)
		}
		if status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
			t.Fatalf("%s %s: 503 without Retry-After", r.Method, r.URL)
		}
	}
}

// TestFakeClusterServesRequests checks the fuzz target's fixture itself: a
// write through the fake cluster is applied, and an unavailable cluster
// answers 503.
func TestFakeClusterServesRequests(t *testing.T) {
	s, tok := fuzzServer(t, nil)
	for _, tc := range []struct {
		method, path, auth, body string
		want                     int
	}{
		{"PUT", "/v1/tenants/x", testAdminToken, "", 201},
		{"PUT", "/v1/tenants/x", testAdminToken, "", 200},
		{"POST", "/v1/tenants/acme/principals", tok, `{"name":"w","grants":[]}`, 201},
		{"GET", "/v1/tenants", testAdminToken, "", 200},
	} {
		r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
		r.Header.Set("Authorization", "Bearer "+tc.auth)
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("%s %s: got %d %s, want %d", tc.method, tc.path, w.Code, w.Body, tc.want)
		}
		checkResponse(t, r, w)
	}
	s, _ = fuzzServer(t, node.ErrUnavailable)
	r := httptest.NewRequest("PUT", "/v1/tenants/y", nil)
	r.Header.Set("Authorization", "Bearer "+testAdminToken)
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusServiceUnavailable || errorCode(w.Body.Bytes()) != codeUnavailable {
		t.Errorf("PUT with the cluster unavailable: got %d %s, want 503 unavailable", w.Code, w.Body)
	}
}
