package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/internal/clustertest"
	"github.com/google/uuid"
)

func TestNewValidates(t *testing.T) {
	cases := []struct {
		name    string
		cfg     client.Config
		wantErr string
	}{
		{"ok", client.Config{Endpoints: []string{"http://127.0.0.1:7001", "https://b.example/"}}, ""},
		{"no endpoints", client.Config{}, "no endpoints: set Config.Endpoints"},
		{"empty endpoint", client.Config{Endpoints: []string{""}}, "endpoint 1 of 1 in Config.Endpoints is empty"},
		{"no scheme", client.Config{Endpoints: []string{"127.0.0.1:7001"}}, ""},
		{"no scheme, bad host", client.Config{Endpoints: []string{"h:1/?x=1"}}, "query"},
		{"ftp", client.Config{Endpoints: []string{"ftp://h:1"}}, "scheme must be http or https"},
		{"no host", client.Config{Endpoints: []string{"http://"}}, "missing host"},
		{"query", client.Config{Endpoints: []string{"http://h:1/?x=1"}}, "query"},
		{"negative timeout", client.Config{Endpoints: []string{"http://h:1"}, Timeout: -1}, "timeout"},
		{"negative retry", client.Config{Endpoints: []string{"http://h:1"}, MaxRetry: -1}, "max retry"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.New(tc.cfg)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("got %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
}

const sampleTask = `{"tenant_id": "acme", "task_id": "report-42", "queue": "research",
 "status": "pending", "owner": "", "lease_until": null, "fencing_token": 0,
 "version": 1, "attempt": 0, "priority": 0, "artifact_id": "",
 "payload": {"topic": "x"}, "result": null, "created_at": "2025-01-02T03:04:05.678Z",
 "updated_at": "2025-01-02T03:04:05.678Z"}`

func TestTaskDecodesAPIShape(t *testing.T) {
	var task client.Task
	if err := json.Unmarshal([]byte(sampleTask), &task); err != nil {
		t.Fatal(err)
	}
	want := time.Date(2025, 1, 2, 3, 4, 5, 678e6, time.UTC)
	if task.TaskID != "report-42" || task.Version != 1 || task.LeaseUntil != nil || !task.CreatedAt.Equal(want) {
		t.Errorf("got %+v", task)
	}
	if string(task.Payload) != `{"topic": "x"}` {
		t.Errorf("got payload %s", task.Payload)
	}
}

// TestRequestShapes pins method, path, query and body of each typed call.
func TestRequestShapes(t *testing.T) {
	str := func(s string) *string { return &s }
	u64 := func(v uint64) *uint64 { return &v }
	yes := true
	cases := []struct {
		name                    string
		call                    func(c *client.Client) error
		method, path, query, in string
	}{
		{"PutTenant", func(c *client.Client) error { _, err := c.PutTenant(bg, "acme"); return err },
			"PUT", "/v1/tenants/acme", "", ``},
		{"CreatePrincipal", func(c *client.Client) error {
			_, err := c.CreatePrincipal(bg, "acme", "rev", []client.Grant{{Resource: "tasks", Prefix: "", Actions: []string{"read"}}})
			return err
		}, "POST", "/v1/tenants/acme/principals", "", `{"name":"rev","grants":[{"resource":"tasks","prefix":"","actions":["read"]}]}`},
		{"RevokePrincipal", func(c *client.Client) error { return c.RevokePrincipal(bg, "acme", "rev") },
			"DELETE", "/v1/tenants/acme/principals/rev", "", ``},
		{"AddMember", func(c *client.Client) error {
			return c.AddMember(bg, client.Member{ID: "n4", RaftAddr: "h:8004", HTTPAddr: "h:7004", Voter: true, State: "x"})
		}, "POST", "/v1/cluster/members", "", `{"id":"n4","raft_addr":"h:8004","http_addr":"h:7004","voter":true}`},
		{"RemoveMember", func(c *client.Client) error { return c.RemoveMember(bg, "n4") },
			"DELETE", "/v1/cluster/members/n4", "", ``},
		{"TransferLeadership", func(c *client.Client) error { return c.TransferLeadership(bg, "n2") },
			"POST", "/v1/cluster/leadership-transfer", "", `{"to":"n2"}`},
		{"TransferLeadership any", func(c *client.Client) error { return c.TransferLeadership(bg, "") },
			"POST", "/v1/cluster/leadership-transfer", "", `{}`},
		{"CreateTask", func(c *client.Client) error {
			p := int64(5)
			_, err := c.CreateTask(bg, "acme", client.CreateTaskRequest{Queue: "q", Priority: &p, Payload: json.RawMessage(`{"a":1}`)})
			return err
		}, "POST", "/v1/tenants/acme/tasks", "", `{"queue":"q","priority":5,"payload":{"a":1}}`},
		{"GetTask stale", func(c *client.Client) error { _, err := c.GetTask(bg, "acme", "t:1", client.Stale()); return err },
			"GET", "/v1/tenants/acme/tasks/t:1", "consistency=stale", ``},
		{"ListTasks", func(c *client.Client) error {
			_, err := c.ListTasks(bg, "acme", client.ListTasksOptions{Queue: "q", Owner: "w", Limit: 10, PageToken: "p"})
			return err
		}, "GET", "/v1/tenants/acme/tasks", "limit=10&owner=w&page_token=p&queue=q", ``},
		{"DeleteTask", func(c *client.Client) error { return c.DeleteTask(bg, "acme", "t1", u64(3)) },
			"DELETE", "/v1/tenants/acme/tasks/t1", "expect_version=3", ``},
		{"ClaimTask", func(c *client.Client) error {
			_, err := c.ClaimTask(bg, "acme", "t1", client.ClaimRequest{Owner: "w", Lease: 30 * time.Second, ExpectStatus: str("pending")})
			return err
		}, "POST", "/v1/tenants/acme/tasks/t1/claim", "", `{"owner":"w","lease_ms":30000,"expect_status":"pending"}`},
		{"ClaimQueue", func(c *client.Client) error {
			_, err := c.ClaimQueue(bg, "acme", "q", client.QueueClaimRequest{Owner: "w", Lease: time.Second, Wait: 10 * time.Millisecond})
			return err
		}, "POST", "/v1/tenants/acme/queues/q/claim", "", `{"owner":"w","lease_ms":1000,"wait_ms":10}`},
		{"RenewTask", func(c *client.Client) error {
			_, err := c.RenewTask(bg, "acme", "t1", client.RenewRequest{FencingToken: 7, Lease: time.Second + 900*time.Microsecond})
			return err
		}, "POST", "/v1/tenants/acme/tasks/t1/renew", "", `{"fencing_token":7,"lease_ms":1000}`},
		{"UpdateTask", func(c *client.Client) error {
			_, err := c.UpdateTask(bg, "acme", "t1", client.UpdateTaskRequest{FencingToken: u64(7), Status: str("done"),
				ArtifactID: str(""), Result: json.RawMessage(`{"ok":true}`), Release: &yes})
			return err
		}, "POST", "/v1/tenants/acme/tasks/t1/update", "", `{"fencing_token":7,"status":"done","artifact_id":"","result":{"ok":true},"release":true}`},
		{"Txn", func(c *client.Client) error {
			_, err := c.Txn(bg, "acme", []client.TxnOp{
				client.TxnUpdateTask("t1", client.UpdateTaskRequest{FencingToken: u64(7), Status: str("done")}),
				client.TxnClaimTask("t2", client.ClaimRequest{Owner: "w", Lease: 5 * time.Millisecond}),
				client.TxnSetRef("r/approved", client.SetRefRequest{ArtifactID: "sha256:a", ExpectAbsent: true}),
				client.TxnPutKV("ns", "k/1", client.PutKVRequest{Value: json.RawMessage(`1`), Fence: &client.Fence{TaskID: "t1", Token: 7}}),
				client.TxnDeleteKV("ns", "k/2", u64(0), nil),
			})
			return err
		}, "POST", "/v1/tenants/acme/txn", "", `{"ops":[` +
			`{"fencing_token":7,"op":"task.update","status":"done","task_id":"t1"},` +
			`{"lease_ms":5,"op":"task.claim","owner":"w","task_id":"t2"},` +
			`{"artifact_id":"sha256:a","expect_artifact_id":"","op":"ref.set","ref":"r/approved"},` +
			`{"fence":{"task_id":"t1","token":7},"key":"k/1","namespace":"ns","op":"kv.put","value":1},` +
			`{"expect_version":0,"key":"k/2","namespace":"ns","op":"kv.delete"}]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// What is checked is the request the node got; its answer
			// (the tasks named do not exist) is not. Calls that would
			// change the shared node's membership or leadership go to the
			// node without a leader, which answers them 503 at once.
			p := proxy(t, nil)
			c := newClient(t, p.URL)
			if changesMembership[tc.name] {
				p = clustertest.NewProxy(t, env.Leaderless, nil)
				c = newClientCfg(t, client.Config{Endpoints: []string{p.URL}, Token: env.Token, NoSession: true, MaxRetry: time.Millisecond})
			}
			var e *client.Error
			if err := tc.call(c); err != nil && !errors.As(err, &e) {
				t.Fatal(err)
			}
			r := p.Requests()[0]
			if r.Method != tc.method || r.Path != tc.path || r.Query != tc.query {
				t.Errorf("got %s %s?%s, want %s %s?%s", r.Method, r.Path, r.Query, tc.method, tc.path, tc.query)
			}
			if string(r.Body) != tc.in {
				t.Errorf("got body %s\nwant      %s", r.Body, tc.in)
			}
		})
	}
}

var bg = context.Background()

// changesMembership names the request-shape cases sent to the node without
// a leader instead of the shared one.
var changesMembership = map[string]bool{"AddMember": true, "RemoveMember": true,
	"TransferLeadership": true, "TransferLeadership any": true}

func TestMissingPathParameter(t *testing.T) {
	p := proxy(t, nil)
	c := newClient(t, p.URL)
	if _, err := c.GetTask(bg, "acme", ""); err == nil || !strings.Contains(err.Error(), "task id is required") {
		t.Errorf("got %v, want 'task id is required'", err)
	}
	if n := p.Count(); n != 0 {
		t.Errorf("got %d requests, want 0", n)
	}
}

func TestClaimQueue(t *testing.T) {
	c := newClient(t, env.URL())
	queue := uniqueName("research")
	t.Run("nothing claimable", func(t *testing.T) {
		task, err := c.ClaimQueue(bg, "acme", queue, client.QueueClaimRequest{Owner: "w", Lease: time.Second})
		if err != nil || task != nil {
			t.Errorf("got task %+v, err %v; want nil, nil (204)", task, err)
		}
	})
	t.Run("claimed", func(t *testing.T) {
		created, err := c.CreateTask(bg, "acme", client.CreateTaskRequest{Queue: queue})
		if err != nil {
			t.Fatal(err)
		}
		task, err := c.ClaimQueue(bg, "acme", queue, client.QueueClaimRequest{Owner: "w", Lease: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if task == nil || task.TaskID != created.TaskID || task.Owner != "w" {
			t.Errorf("got %+v, want task %s owned by w", task, created.TaskID)
		}
	})
}

// TestPutTenantCreated runs on a node of its own: the examples list the
// shared node's tenants.
func TestPutTenantCreated(t *testing.T) {
	c := newClient(t, clustertest.StartCluster(t, env, 1).URL(0))
	tenant := uniqueName("tenant")
	for _, want := range []bool{true, false} { // 201, then 200
		created, err := c.PutTenant(bg, tenant)
		if err != nil || created != want {
			t.Errorf("got created=%v err=%v, want created=%v", created, err, want)
		}
	}
}

// TestMeta: a write's answer carries its log index and position, and a
// replay of it (the same Idempotency-Key) says so; CaptureMeta hands them
// to a typed call.
func TestMeta(t *testing.T) {
	c := newClient(t, env.URL())
	key := client.IdempotencyKey("meta-" + uuid.NewString())
	req := client.CreateTaskRequest{Queue: uniqueName("meta")}
	var task client.Task
	meta, err := c.Do(bg, http.MethodPost, "/v1/tenants/acme/tasks", req, &task, key)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Status != 201 || meta.Index == 0 || meta.Position>>16 != meta.Index || meta.Replay || task.TaskID == "" {
		t.Errorf("got %+v %q, want status 201, an index, its position and no replay", meta, task.TaskID)
	}
	var captured client.Meta
	again, err := c.CreateTask(bg, "acme", req, client.CaptureMeta(&captured), key)
	if err != nil {
		t.Fatal(err)
	}
	if captured.Index != meta.Index || !captured.Replay || again.TaskID != task.TaskID {
		t.Errorf("CaptureMeta got %+v for task %q, want index %d replay of %q", captured, again.TaskID, meta.Index, task.TaskID)
	}
}

func TestClusterStatus(t *testing.T) {
	c := newClient(t, env.URL())
	st, err := c.Cluster(bg)
	if err != nil {
		t.Fatal(err)
	}
	addr := env.Cluster.HTTPAddr(0)
	if st.NodeID != "n1" || st.State != "Leader" || st.Leader.ID != "n1" || st.Leader.HTTPAddr != addr ||
		st.Leader.RaftAddr != env.Cluster.RaftAddr(0) || st.Term == 0 || st.CommitIndex == 0 || st.AppliedIndex == 0 ||
		!strings.HasPrefix(st.StateDigest, "sha256:") {
		t.Errorf("got %+v, want node n1 leading at %s", st, addr)
	}
	if len(st.Members) != 1 || st.Members[0] != (client.Member{ID: "n1", RaftAddr: env.Cluster.RaftAddr(0), HTTPAddr: addr,
		Voter: true, State: "leader"}) {
		t.Errorf("got members %+v, want n1 alone, a voter, leading", st.Members)
	}
}

func TestHealthAndReady(t *testing.T) {
	// The node without a leader is alive (healthy) but not ready.
	ready, notReady, dead := env.URL(), env.Leaderless, clustertest.ClosedEndpoint(t)
	c := newClient(t, ready)
	cases := []struct {
		endpoint            string
		wantHealthy, wantOK bool
		wantReadyErr        bool
	}{
		{ready, true, true, false},
		{notReady, true, false, false},
		{dead, false, false, true},
	}
	for _, tc := range cases {
		if err := c.Healthz(bg, tc.endpoint); (err == nil) != tc.wantHealthy {
			t.Errorf("Healthz(%s) = %v, want healthy=%v", tc.endpoint, err, tc.wantHealthy)
		}
		ok, err := c.Readyz(bg, tc.endpoint)
		if ok != tc.wantOK || (err != nil) != tc.wantReadyErr {
			t.Errorf("Readyz(%s) = %v, %v; want %v, err=%v", tc.endpoint, ok, err, tc.wantOK, tc.wantReadyErr)
		}
	}
}
