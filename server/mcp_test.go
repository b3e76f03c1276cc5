package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpToken adds the admin token to an MCP client's requests.
type mcpToken struct{ next http.RoundTripper }

func (m mcpToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+testAdminToken)
	return m.next.RoundTrip(r)
}

func mcpCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		b, _ := json.Marshal(res.Content)
		t.Fatalf("%s: tool error %s", name, b)
	}
	return res.StructuredContent.(map[string]any)
}

// mcpSession opens an MCP session on node i, as the admin in tenant acme;
// it is closed when the test ends, and ctx (a minute) bounds the test's
// calls.
func mcpSession(t *testing.T, c *testCluster, i int) (*mcp.ClientSession, context.Context) {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: "http://" + c.nodes[i].httpAddr + "/mcp?tenant=acme",
			HTTPClient: &http.Client{Transport: mcpToken{tr}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, ctx
}

// TestMCPSessionOnFollower runs /mcp in-process (under -race in make
// unit): a follower serves the session, its tool calls go through the
// node's own handler (forwarded to the leader, a watch streamed), the
// session renews a short lease on its own, and closing the session
// releases its claim.
func TestMCPSessionOnFollower(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.WaitForLeader(t)
	f := c.Followers(leader)[0]
	if st, _, b := c.do(t, leader, http.MethodPut, "/v1/tenants/acme", nil, adminAuth()); st != http.StatusCreated {
		t.Fatalf("create tenant: %d %s", st, b)
	}
	for _, id := range []string{"t1", "t2"} {
		if st, _, b := c.do(t, leader, http.MethodPost, "/v1/tenants/acme/tasks", map[string]any{"task_id": id, "queue": "q"}, adminAuth()); st != http.StatusCreated {
			t.Fatalf("create task: %d %s", st, b)
		}
	}
	cs, ctx := mcpSession(t, c, f)

	task := func(id string) map[string]any {
		_, _, b := c.do(t, leader, http.MethodGet, "/v1/tenants/acme/tasks/"+id, nil, adminAuth())
		var v map[string]any
		decodeBody(t, b, &v)
		return v
	}
	claimed := mcpCall(t, cs, "claim_task", map[string]any{"queue": "q", "lease_seconds": 1})["task"].(map[string]any)
	v0 := claimed["version"].(float64)
	waitFor(t, "the session to renew the lease twice", func() string {
		if v := task("t1")["version"].(float64); v < v0+2 {
			return "version still " + claimed["task_id"].(string)
		}
		return ""
	})

	// A bounded watch, streamed from the follower: nothing, then a change.
	if out := mcpCall(t, cs, "wait_for_change", map[string]any{"resources": []string{"kv"}, "timeout_seconds": 1}); out["changed"] != false {
		t.Fatalf("wait_for_change before any change: %v", out)
	}
	got := make(chan map[string]any, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait_for_change",
			Arguments: map[string]any{"resources": []string{"kv"}, "prefix": "notes/", "timeout_seconds": 30}})
		if err != nil || res.IsError {
			got <- map[string]any{"error": err, "result": res}
			return
		}
		got <- res.StructuredContent.(map[string]any)
	}()
	// Written until the waiter sees it: the watch starts at an index the
	// test cannot observe, so a write made before it began may be missed.
	var out map[string]any
	deadline := time.Now().Add(waitTimeout)
	for out == nil {
		if time.Now().After(deadline) {
			t.Fatal("wait_for_change did not see the kv writes")
		}
		mcpCall(t, cs, "kv_put", map[string]any{"namespace": "notes", "key": "k", "value": map[string]any{"n": 1}})
		select {
		case out = <-got:
		case <-time.After(100 * time.Millisecond):
		}
	}
	if out["changed"] != true {
		t.Fatalf("wait_for_change: %v", out)
	}

	if done := mcpCall(t, cs, "complete_task", map[string]any{}); done["status"] != "done" {
		t.Fatalf("complete_task: %v", done)
	}
	mcpCall(t, cs, "claim_task", map[string]any{"queue": "q", "lease_seconds": 600})
	if task("t2")["owner"] == "" {
		t.Fatal("t2 not claimed")
	}
	cs.Close()
	waitFor(t, "the ended session's claim to be released", func() string {
		if o := task("t2")["owner"]; o != "" {
			return "owner " + o.(string)
		}
		return ""
	})
}

// TestMCPConcurrentClaimsHoldOne: an MCP client may run a session's tool
// calls concurrently. Of eight claim_task calls at once, one holds a task
// and the others are refused; the tasks those others had claimed are
// given back unstarted, not left renewed by a session that holds only one
// claim (before, every one of the eight stayed owned, renewed until the
// session ended).
func TestMCPConcurrentClaimsHoldOne(t *testing.T) {
	c := newCluster(t, 1)
	leader := c.WaitForLeader(t)
	if st, _, b := c.do(t, leader, http.MethodPut, "/v1/tenants/acme", nil, adminAuth()); st != http.StatusCreated {
		t.Fatalf("create tenant: %d %s", st, b)
	}
	const n = 8
	for i := range n {
		body := map[string]any{"task_id": fmt.Sprintf("t%d", i), "queue": "q"}
		if st, _, b := c.do(t, leader, http.MethodPost, "/v1/tenants/acme/tasks", body, adminAuth()); st != http.StatusCreated {
			t.Fatalf("create task: %d %s", st, b)
		}
	}
	cs, ctx := mcpSession(t, c, leader)

	var wg sync.WaitGroup
	held, refused := atomic.Int32{}, atomic.Int32{}
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "claim_task",
				Arguments: map[string]any{"queue": "q", "lease_seconds": 600}})
			switch {
			case err != nil:
				t.Errorf("claim_task: %v", err)
			case res.IsError:
				b, _ := json.Marshal(res.Content)
				if !strings.Contains(string(b), "already hold task") {
					t.Errorf("claim_task refused: %s", b)
				}
				refused.Add(1)
			case res.StructuredContent.(map[string]any)["claimed"] == true:
				held.Add(1)
			default:
				t.Errorf("claim_task: %v", res.StructuredContent)
			}
		})
	}
	close(start)
	wg.Wait()
	if held.Load() != 1 || refused.Load() != n-1 {
		t.Fatalf("%d calls held a task and %d were refused, want 1 and %d", held.Load(), refused.Load(), n-1)
	}
	owned := 0
	for i := range n {
		_, _, b := c.do(t, leader, http.MethodGet, fmt.Sprintf("/v1/tenants/acme/tasks/t%d", i), nil, adminAuth())
		var v map[string]any
		decodeBody(t, b, &v)
		if v["owner"] != "" && v["owner"] != nil {
			owned++
		} else if v["attempt"].(float64) != 0 {
			t.Errorf("task t%d given back with attempt %v, want 0 (unstarted)", i, v["attempt"])
		}
	}
	if owned != 1 {
		t.Errorf("%d tasks owned after the calls, want 1", owned)
	}
}
