package e2e

// The MCP server (docs/mcp.md), driven by the official Go SDK's client:
// over stdio (bin/baton mcp as a subprocess) and over streamable HTTP
// (batond's /mcp), against real batond processes.

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/cmd/batond/cluster"
)

const mcpTenant = "acme"

// mcpSetup starts a cluster with the tenant and two principals, the
// researcher and the reviewer, each granted what its part needs.
func mcpSetup(t *testing.T, extraArgs ...string) (*cluster.Cluster, *client.Client, map[string]string) {
	t.Helper()
	c := startCluster(t, 3, extraArgs...)
	admin := adminClient(t, c)
	ctx := ctxFor(t, 30*time.Second)
	if _, err := admin.PutTenant(ctx, mcpTenant); err != nil {
		t.Fatal(err)
	}
	rw := []string{"read", "write"}
	grants := map[string][]client.Grant{
		"researcher": {{Resource: "tasks", Prefix: "research", Actions: rw}, {Resource: "tasks", Prefix: "review", Actions: rw},
			{Resource: "artifacts", Prefix: "report-", Actions: rw}, {Resource: "kv", Prefix: "notes/", Actions: rw}},
		"reviewer": {{Resource: "tasks", Prefix: "review", Actions: rw}, {Resource: "artifacts", Prefix: "report-", Actions: []string{"read"}},
			{Resource: "refs", Prefix: "report-", Actions: rw}},
	}
	tokens := map[string]string{}
	for name, g := range grants {
		p, err := admin.CreatePrincipal(ctx, mcpTenant, name, g)
		if err != nil {
			t.Fatal(err)
		}
		tokens[name] = p.Token
	}
	return c, admin, tokens
}

// bearer adds a token to every request of an MCP HTTP client.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func mcpHTTPClient(t *testing.T, c *cluster.Cluster, token string) *http.Client {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if ca := c.CAFile(); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: bearer{token: token, next: tr}}
}

// connectHTTP opens an MCP session on node i's /mcp with token.
func connectHTTP(t *testing.T, c *cluster.Cluster, i int, token, query string) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: c.URL(i) + "/mcp" + query, HTTPClient: mcpHTTPClient(t, c, token), MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "baton-e2e", Version: "1"}, nil).Connect(ctxFor(t, 30*time.Second), tr, nil)
	if err != nil {
		t.Fatalf("connect to %s/mcp: %v", c.URL(i), err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// connectStdio starts `baton mcp` with token and opens a session on it.
func connectStdio(t *testing.T, c *cluster.Cluster, bin, token string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(bin, "mcp", "--tenant", mcpTenant)
	cmd.Env = []string{"BATON_ENDPOINTS=" + strings.Join(c.Endpoints(), ","), "BATON_TOKEN=" + token, "BATON_CACERT=" + c.CAFile()}
	cmd.Stderr = os.Stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "baton-e2e", Version: "1"}, nil).Connect(ctxFor(t, 30*time.Second), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("start baton mcp: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls a tool that must succeed and returns its structured
// answer.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	res, err := cs.CallTool(ctxFor(t, 90*time.Second), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s(%v): tool error: %s", name, args, toolText(res))
	}
	out, ok := res.StructuredContent.(map[string]any)
	if !ok {
		t.Fatalf("%s: structured content is %T", name, res.StructuredContent)
	}
	return out
}

// toolError calls a tool that must fail and returns its error text.
func toolError(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(ctxFor(t, 90*time.Second), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !res.IsError {
		t.Fatalf("%s(%v) succeeded, want a tool error: %s", name, args, toolText(res))
	}
	return toolText(res)
}

func toolText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// waitFor polls cond every 25 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(cluster.PollInterval)
	}
}

// handoff runs the researcher → reviewer hand-off over two sessions, with
// a third (the admin's) waiting for the approval ref to change.
func handoff(t *testing.T, admin *client.Client, researcher, reviewer, watcher *mcp.ClientSession, id string) {
	ctx := ctxFor(t, 2*time.Minute)
	if _, err := admin.CreateTask(ctx, mcpTenant, client.CreateTaskRequest{Queue: "research", TaskID: id,
		Payload: json.RawMessage(`{"topic":"fencing"}`)}); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	tools, err := researcher.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		names[tl.Name] = true
		if tl.OutputSchema == nil || tl.Annotations == nil {
			t.Errorf("tool %s has no output schema or annotations", tl.Name)
		}
	}
	for _, want := range []string{"create_task", "claim_task", "heartbeat", "complete_task", "fail_task", "publish_artifact",
		"read_artifact", "list_artifacts", "set_ref", "get_ref", "write_checkpoint", "read_checkpoint", "kv_get", "kv_put",
		"kv_search", "op_begin", "op_finish", "wait_for_change"} {
		if !names[want] {
			t.Errorf("tool %s is missing", want)
		}
	}

	// The researcher claims, publishes a draft and hands it to review.
	claim := callTool(t, researcher, "claim_task", map[string]any{"queue": "research", "lease_seconds": 30})
	task := claim["task"].(map[string]any)
	if claim["claimed"] != true || task["task_id"] != id {
		t.Fatalf("claim_task: %v", claim)
	}
	callTool(t, researcher, "heartbeat", map[string]any{})
	draft := "# " + id + "\n\nFencing tokens keep a stale worker out.\n"
	art := callTool(t, researcher, "publish_artifact", map[string]any{"name": id + "-draft", "text": draft, "media_type": "text/markdown"})
	artID := art["artifact_id"].(string)
	if art["task_id"] != id {
		t.Errorf("the publish was not tied to the claim: %v", art)
	}
	callTool(t, researcher, "kv_put", map[string]any{"namespace": "notes", "key": id, "value": map[string]any{"draft": artID}})
	if e := callTool(t, researcher, "kv_search", map[string]any{"namespace": "notes", "prefix": id}); len(e["entries"].([]any)) != 1 {
		t.Errorf("kv_search: %v", e)
	}
	callTool(t, researcher, "create_task", map[string]any{"queue": "review", "task_id": "review-" + id, "payload": map[string]any{"draft": artID}})
	done := callTool(t, researcher, "complete_task", map[string]any{"result": map[string]any{"draft": artID}, "artifact_id": artID})
	if done["status"] != "done" || done["owner"] != "" {
		t.Errorf("complete_task: %v", done)
	}
	if msg := toolError(t, researcher, "heartbeat", map[string]any{}); !strings.Contains(msg, "no task") {
		t.Errorf("heartbeat after complete: %s", msg)
	}

	// The admin's session waits for the approval.
	type waited struct {
		out map[string]any
		err error
	}
	cursor := callTool(t, watcher, "wait_for_change", map[string]any{"resources": []string{"refs"}, "prefix": id + "/", "timeout_seconds": 1})
	if cursor["changed"] != false {
		t.Fatalf("wait_for_change saw a change before any: %v", cursor)
	}
	got := make(chan waited, 1)
	go func() {
		res, err := watcher.CallTool(ctx, &mcp.CallToolParams{Name: "wait_for_change",
			Arguments: map[string]any{"resources": []string{"refs"}, "prefix": id + "/", "timeout_seconds": 60, "after": cursor["cursor"]}})
		if err == nil && res.IsError {
			err = errors.New(toolText(res))
		}
		var out map[string]any
		if err == nil {
			out, _ = res.StructuredContent.(map[string]any)
		}
		got <- waited{out, err}
	}()

	// The reviewer claims the review, reads the draft and approves it once.
	rc := callTool(t, reviewer, "claim_task", map[string]any{"queue": "review", "wait_seconds": 5})
	payload := rc["task"].(map[string]any)["payload"].(map[string]any)
	if payload["draft"] != artID {
		t.Fatalf("review payload: %v", payload)
	}
	read := callTool(t, reviewer, "read_artifact", map[string]any{"artifact_id": artID})
	if read["text"] != draft {
		t.Fatalf("read_artifact: %q, want %q", read["text"], draft)
	}
	if msg := toolError(t, reviewer, "create_task", map[string]any{"queue": "research", "task_id": "x-" + id}); !strings.Contains(msg, "forbidden") {
		t.Errorf("create_task outside the reviewer's grants: %s", msg)
	}
	callTool(t, reviewer, "set_ref", map[string]any{"ref": id + "/approved", "artifact_id": artID, "expect_absent": true})
	// A second version can no longer be approved the same way.
	v2 := callTool(t, researcher, "publish_artifact", map[string]any{"name": id + "-draft", "text": draft + "v2\n"})
	if v2["version"] != float64(2) || v2["task_id"] != "" {
		t.Errorf("publish without a claim: %v", v2)
	}
	if msg := toolError(t, reviewer, "set_ref", map[string]any{"ref": id + "/approved", "artifact_id": v2["artifact_id"], "expect_absent": true}); !strings.Contains(msg, "no longer holds") {
		t.Errorf("second approval: %s", msg)
	}
	if r := callTool(t, reviewer, "get_ref", map[string]any{"ref": id + "/approved"}); r["artifact_id"] != artID {
		t.Errorf("get_ref: %v", r)
	}
	callTool(t, reviewer, "complete_task", map[string]any{"result": map[string]any{"approved": artID}})

	w := <-got
	if w.err != nil {
		t.Fatalf("wait_for_change: %v", w.err)
	}
	evs, _ := w.out["events"].([]any)
	if w.out["changed"] != true || len(evs) != 1 || evs[0].(map[string]any)["key"] != id+"/approved" {
		t.Errorf("wait_for_change: %v", w.out)
	}

	// What the cluster holds, and the same as MCP resources.
	for _, tid := range []string{id, "review-" + id} {
		tk, err := admin.GetTask(ctx, mcpTenant, tid)
		if err != nil || tk.Status != "done" || tk.Owner != "" {
			t.Errorf("task %s: %+v, %v", tid, tk, err)
		}
	}
	res, err := reviewer.ReadResource(ctx, &mcp.ReadResourceParams{URI: "baton://tasks/review-" + id})
	if err != nil || len(res.Contents) != 1 || !strings.Contains(res.Contents[0].Text, `"status":"done"`) {
		t.Errorf("task resource: %v %v", res, err)
	}
	res, err = reviewer.ReadResource(ctx, &mcp.ReadResourceParams{URI: "baton://artifacts/" + id + "-draft/versions/1"})
	if err != nil || len(res.Contents) != 1 || res.Contents[0].Text != draft || res.Contents[0].MIMEType != "text/markdown" {
		t.Errorf("artifact resource: %v %v", res, err)
	}
}

func TestMCPHandoffHTTP(t *testing.T) {
	c, admin, tokens := mcpSetup(t)
	// Each session on another node: followers serve /mcp too.
	researcher := connectHTTP(t, c, 0, tokens["researcher"], "")
	reviewer := connectHTTP(t, c, 1, tokens["reviewer"], "")
	watcher := connectHTTP(t, c, 2, c.AdminToken(), "?tenant="+mcpTenant)
	handoff(t, admin, researcher, reviewer, watcher, "report-42")
}

func TestMCPHandoffStdio(t *testing.T) {
	bin := buildBatonCLI(t)
	c, admin, tokens := mcpSetup(t)
	researcher := connectStdio(t, c, bin, tokens["researcher"])
	reviewer := connectStdio(t, c, bin, tokens["reviewer"])
	watcher := connectStdio(t, c, bin, c.AdminToken())
	handoff(t, admin, researcher, reviewer, watcher, "report-43")
}

// TestMCPFencedSession: a session whose task was taken over gets fenced
// errors that tell the model to stop, and writes nothing; a session that
// ends releases its claim.
func TestMCPFencedSession(t *testing.T) {
	bin := buildBatonCLI(t)
	c, admin, tokens := mcpSetup(t)
	ctx := ctxFor(t, 2*time.Minute)
	for name, connect := range map[string]func() *mcp.ClientSession{
		"http":  func() *mcp.ClientSession { return connectHTTP(t, c, 1, tokens["researcher"], "") },
		"stdio": func() *mcp.ClientSession { return connectStdio(t, c, bin, tokens["researcher"]) },
	} {
		t.Run(name, func(t *testing.T) {
			id, queue := "report-fenced-"+name, "research-"+name
			if _, err := admin.CreateTask(ctx, mcpTenant, client.CreateTaskRequest{Queue: queue, TaskID: id}); err != nil {
				t.Fatal(err)
			}
			cs := connect()
			callTool(t, cs, "claim_task", map[string]any{"queue": queue, "lease_seconds": 30})
			// An operator takes the task away: releases it with its
			// current token and claims it for another worker.
			cur, err := admin.GetTask(ctx, mcpTenant, id)
			if err != nil {
				t.Fatal(err)
			}
			release := true
			if _, err := admin.UpdateTask(ctx, mcpTenant, id, client.UpdateTaskRequest{FencingToken: &cur.FencingToken, Release: &release}); err != nil {
				t.Fatal(err)
			}
			other, err := admin.ClaimTask(ctx, mcpTenant, id, client.ClaimRequest{Owner: "other-worker", Lease: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			msg := toolError(t, cs, "publish_artifact", map[string]any{"name": id + "-late", "text": "stale work"})
			for _, want := range []string{"lease", "lost", "another worker", id, "stop working"} {
				if !strings.Contains(msg, want) {
					t.Errorf("fenced publish says %q, want it to mention %q", msg, want)
				}
			}
			if vs, err := admin.ListVersions(ctx, mcpTenant, id+"-late"); err == nil && len(vs) != 0 {
				t.Errorf("a fenced publish made versions: %v", vs)
			}
			if msg := toolError(t, cs, "complete_task", map[string]any{}); !strings.Contains(msg, "no task") {
				t.Errorf("complete_task after the loss: %s", msg)
			}
			tk, err := admin.GetTask(ctx, mcpTenant, id)
			if err != nil || tk.Owner != "other-worker" || tk.FencingToken != other.FencingToken || tk.Status != "pending" {
				t.Errorf("the new owner's task changed: %+v, %v", tk, err)
			}

			// A session that ends gives back what it holds.
			id2 := id + "-2"
			if _, err := admin.CreateTask(ctx, mcpTenant, client.CreateTaskRequest{Queue: queue, TaskID: id2}); err != nil {
				t.Fatal(err)
			}
			callTool(t, cs, "claim_task", map[string]any{"queue": queue, "lease_seconds": 600})
			if tk, err := admin.GetTask(ctx, mcpTenant, id2); err != nil || tk.Owner == "" {
				t.Fatalf("claimed task: %+v, %v", tk, err)
			}
			cs.Close()
			waitFor(t, 20*time.Second, "the ended session's claim to be released", func() bool {
				tk, err := admin.GetTask(ctx, mcpTenant, id2)
				return err == nil && tk.Owner == "" && tk.LeaseUntil == nil
			})
		})
	}
}

// TestMCPHTTPAuth: /mcp authenticates before anything else, scopes a
// session to one tenant, binds it to its token, and bounds the sessions.
func TestMCPHTTPAuth(t *testing.T) {
	c, _, tokens := mcpSetup(t, "--mcp-max-sessions", "2")
	ctx := ctxFor(t, time.Minute)
	post := func(token, query string, hdr map[string]string) *http.Response {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.URL(0)+"/mcp"+query, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		hc := mcpHTTPClient(t, c, token)
		if token == "" {
			hc.Transport = hc.Transport.(bearer).next
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, tc := range []struct {
		name, token, query string
		want               int
	}{
		{"no token", "", "", http.StatusUnauthorized},
		{"unknown token", "btk_nope", "", http.StatusUnauthorized},
		{"another tenant", tokens["researcher"], "?tenant=other", http.StatusForbidden},
		{"admin without a tenant", c.AdminToken(), "", http.StatusBadRequest},
	} {
		if got := post(tc.token, tc.query, nil).StatusCode; got != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.want)
		}
	}

	// A session answers only the token that opened it.
	cs := connectHTTP(t, c, 0, tokens["researcher"], "")
	resp := post(tokens["reviewer"], "", map[string]string{"Mcp-Session-Id": cs.ID()})
	if resp.StatusCode < 400 {
		t.Errorf("another token on the researcher's session: status %d", resp.StatusCode)
	}
	callTool(t, cs, "kv_put", map[string]any{"namespace": "notes", "key": "k", "value": 1})

	// Two sessions at most on this node: the third is refused, until one ends.
	cs2 := connectHTTP(t, c, 0, tokens["reviewer"], "")
	if got := post(tokens["reviewer"], "", nil).StatusCode; got != http.StatusServiceUnavailable {
		t.Errorf("a third session: status %d, want 503", got)
	}
	cs2.Close()
	waitFor(t, 20*time.Second, "a place for a new session", func() bool {
		tr := &mcp.StreamableClientTransport{Endpoint: c.URL(0) + "/mcp", HTTPClient: mcpHTTPClient(t, c, tokens["reviewer"]), MaxRetries: -1}
		s, err := mcp.NewClient(&mcp.Implementation{Name: "baton-e2e", Version: "1"}, nil).Connect(ctx, tr, nil)
		if err != nil {
			return false
		}
		s.Close()
		return true
	})
}
