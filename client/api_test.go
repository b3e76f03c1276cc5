package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
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
			rec := &recorder{reply: func(w http.ResponseWriter, _ *http.Request, _ int) { writeJSON(w, 200, map[string]any{}) }}
			c := newClient(t, serve(t, rec.ServeHTTP).URL)
			if err := tc.call(c); err != nil {
				t.Fatal(err)
			}
			r := rec.requests()[0]
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

func TestMissingPathParameter(t *testing.T) {
	rec := &recorder{reply: tenantsOK}
	c := newClient(t, serve(t, rec.ServeHTTP).URL)
	if _, err := c.GetTask(bg, "acme", ""); err == nil || !strings.Contains(err.Error(), "task id is required") {
		t.Errorf("got %v, want 'task id is required'", err)
	}
	if n := len(rec.requests()); n != 0 {
		t.Errorf("got %d requests, want 0", n)
	}
}

func TestClaimQueue(t *testing.T) {
	cases := []struct {
		name   string
		status int
		wantID string
	}{
		{"nothing claimable", 204, ""},
		{"claimed", 200, "report-42"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				if tc.status == 200 {
					_, _ = w.Write([]byte(sampleTask))
				}
			}
			c := newClient(t, serve(t, h).URL)
			task, err := c.ClaimQueue(bg, "acme", "research", client.QueueClaimRequest{Owner: "w", Lease: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.wantID == "" && task != nil:
				t.Errorf("got task %+v, want nil", task)
			case tc.wantID != "" && (task == nil || task.TaskID != tc.wantID):
				t.Errorf("got %+v, want task %s", task, tc.wantID)
			}
		})
	}
}

func TestPutTenantCreated(t *testing.T) {
	for _, status := range []int{200, 201} {
		h := func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) }
		c := newClient(t, serve(t, h).URL)
		created, err := c.PutTenant(bg, "acme")
		if err != nil || created != (status == 201) {
			t.Errorf("status %d: got created=%v err=%v, want created=%v", status, created, err, status == 201)
		}
	}
}

func TestMeta(t *testing.T) {
	h := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Baton-Index", "1042")
		w.Header().Set("X-Baton-Position", "68354047") // 1042<<16 | 0xFFFF
		w.Header().Set("Idempotent-Replay", "true")
		w.WriteHeader(201)
		_, _ = w.Write([]byte(sampleTask))
	}
	c := newClient(t, serve(t, h).URL)
	var task client.Task
	meta, err := c.Do(bg, http.MethodPost, "/v1/tenants/acme/tasks", map[string]string{"queue": "q"}, &task)
	if err != nil {
		t.Fatal(err)
	}
	if want := (client.Meta{Index: 1042, Position: 1042<<16 | 0xFFFF, Replay: true, Status: 201}); meta != want || task.TaskID != "report-42" {
		t.Errorf("got %+v %q, want %+v report-42", meta, task.TaskID, want)
	}
	var captured client.Meta
	if _, err := c.CreateTask(bg, "acme", client.CreateTaskRequest{Queue: "q"}, client.CaptureMeta(&captured)); err != nil {
		t.Fatal(err)
	}
	if captured.Index != 1042 || !captured.Replay {
		t.Errorf("CaptureMeta got %+v, want index 1042 replay", captured)
	}
}

func TestClusterStatus(t *testing.T) {
	body := `{"node_id": "n2", "state": "Follower", "leader": {"id": "n1", "http_addr": "127.0.0.1:7001", "raft_addr": "127.0.0.1:8001"},
	"term": 3, "commit_index": 120, "applied_index": 119, "last_snapshot_index": 100, "restored_snapshot_index": 50,
	"state_digest": "sha256:ab", "members": [{"id": "n1", "raft_addr": "127.0.0.1:8001", "http_addr": "127.0.0.1:7001", "voter": true, "state": "Leader"}]}`
	h := func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(body)) }
	c := newClient(t, serve(t, h).URL)
	st, err := c.Cluster(bg)
	if err != nil {
		t.Fatal(err)
	}
	want := client.ClusterStatus{NodeID: "n2", State: "Follower",
		Leader: client.LeaderInfo{ID: "n1", HTTPAddr: "127.0.0.1:7001", RaftAddr: "127.0.0.1:8001"},
		Term:   3, CommitIndex: 120, AppliedIndex: 119, LastSnapshotIndex: 100, RestoredSnapshotIndex: 50,
		StateDigest: "sha256:ab",
		Members:     []client.Member{{ID: "n1", RaftAddr: "127.0.0.1:8001", HTTPAddr: "127.0.0.1:7001", Voter: true, State: "Leader"}}}
	gotJSON, _ := json.Marshal(st)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("got %s\nwant %s", gotJSON, wantJSON)
	}
}

func TestHealthAndReady(t *testing.T) {
	ready := serve(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	notReady := serve(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) })
	dead := closedEndpoint(t)
	c := newClient(t, ready.URL)
	cases := []struct {
		endpoint            string
		wantHealthy, wantOK bool
		wantReadyErr        bool
	}{
		{ready.URL, true, true, false},
		{notReady.URL, false, false, false},
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
