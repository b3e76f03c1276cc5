package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
)

const (
	sampleEntry = `{"namespace": "research", "key": "sources/raft", "value": {"url": "https://raft.github.io"},
 "version": 589825, "updated_at": "2025-01-02T03:04:05.678Z", "expires_at": null}`
	sampleCheckpoint = `{"thread_id": "chat-7", "checkpoint_id": "cp-2", "parent_id": "cp-1", "data": {"messages": ["hi"]},
 "metadata": {"step": 2}, "created_at": "2025-01-02T03:04:05.678Z",
 "pending_writes": [{"task_id": "step-3", "idx": 0, "channel": "messages", "value": "hello"}]}`
	sampleOp = `{"op_id": "notify:r42", "kind": "email.send", "params_digest": "sha256:ab", "task_id": "",
 "state": "started", "result": null, "created_at": "2025-01-02T03:04:05.678Z", "updated_at": "2025-01-02T03:04:05.678Z"}`
)

// stateNode is a fake node for the kv, checkpoint, op and watch commands.
type stateNode struct {
	mu   sync.Mutex
	reqs []fakeReq
	stop chan struct{}
}

func (f *stateNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	route := r.Method + " " + r.URL.EscapedPath()
	f.mu.Lock()
	f.reqs = append(f.reqs, fakeReq{route, r.URL.RawQuery, r.Header.Get("Authorization"), string(body)})
	f.mu.Unlock()
	w.Header().Set("X-Baton-Index", "9")
	switch route {
	case "GET /v1/tenants/acme/kv/research/sources/raft", "PUT /v1/tenants/acme/kv/research/sources/raft":
		io.WriteString(w, sampleEntry)
	case "GET /v1/tenants/acme/kv/research":
		io.WriteString(w, `{"entries": [`+sampleEntry+`], "next_page_token": "c291cmNlcy9yYWZ0"}`)
	case "DELETE /v1/tenants/acme/kv/research/sources/raft", "DELETE /v1/tenants/acme/threads/chat-7":
		w.WriteHeader(204)
	case "PUT /v1/tenants/acme/kv/research/lock":
		w.WriteHeader(409)
		io.WriteString(w, `{"error": {"code": "version_mismatch", "message": "entry is at version 589825, not 0", "current_version": 589825}}`)
	case "PUT /v1/tenants/acme/threads/chat-7/checkpoints/cp-2", "GET /v1/tenants/acme/threads/chat-7/checkpoints/cp-2",
		"GET /v1/tenants/acme/threads/chat-7/checkpoints/latest":
		io.WriteString(w, sampleCheckpoint)
	case "GET /v1/tenants/acme/threads/chat-7/checkpoints":
		io.WriteString(w, `{"checkpoints": [`+sampleCheckpoint+`]}`)
	case "PUT /v1/tenants/acme/threads/chat-7/checkpoints/cp-2/writes/step-3":
		io.WriteString(w, `{"task_id": "step-3", "writes": [{"task_id": "step-3", "idx": 0, "channel": "messages", "value": "hello"}]}`)
	case "GET /v1/tenants/acme/ops/notify:r42", "POST /v1/tenants/acme/ops/notify:r42/finish":
		io.WriteString(w, sampleOp)
	case "POST /v1/tenants/acme/ops/notify:r42/begin":
		w.WriteHeader(201)
		io.WriteString(w, sampleOp)
	case "GET /v1/tenants/acme/watch":
		f.watch(w, r)
	default:
		w.WriteHeader(404)
		io.WriteString(w, `{"error": {"code": "not_found", "message": "no route"}}`)
	}
}

// watch streams two events; with from_index=5 it then reports
// compaction, otherwise it holds the stream open.
func (f *stateNode) watch(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	fmt.Fprint(w, "id: 10.0\ndata: {\"index\": 10, \"resource\": \"kv\", \"key\": \"research/a\", \"type\": \"put\", \"value\": {\"v\": 1}}\n\n")
	fmt.Fprint(w, "id: 10\ndata: {\"index\": 10, \"resource\": \"kv\", \"key\": \"research/b\", \"type\": \"delete\"}\n\n")
	if r.URL.Query().Get("from_index") == "5" {
		fmt.Fprint(w, "event: error\ndata: {\"error\": {\"code\": \"compacted\", \"message\": \"watcher fell behind\"}}\n\n")
		return
	}
	w.(http.Flusher).Flush()
	select {
	case <-r.Context().Done():
	case <-f.stop:
	}
}

func (f *stateNode) requests() []fakeReq {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeReq(nil), f.reqs...)
}

// stateCLI runs baton against a stateNode, with ctx.
func stateCLI(t *testing.T, ctx context.Context, stdout io.Writer, args ...string) (code int, stderr string, node *stateNode) {
	t.Helper()
	node = &stateNode{stop: make(chan struct{})}
	srv := httptest.NewServer(node)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(node.stop) })
	var errOut bytes.Buffer
	full := append([]string{"--endpoints", srv.URL, "--timeout", "5s"}, args...)
	return run(ctx, full, stdout, &errOut), errOut.String(), node
}

func TestStateRequestsSent(t *testing.T) {
	t.Setenv("BATON_TOKEN", "env-token")
	t.Setenv("BATON_TENANT", "acme")
	cases := []struct {
		args         []string
		route, query string
		body         string
	}{
		{[]string{"kv", "get", "research", "sources/raft", "--stale"}, "GET /v1/tenants/acme/kv/research/sources/raft", "consistency=stale", ``},
		{[]string{"kv", "put", "research", "sources/raft", `{"url": "https://raft.github.io"}`, "--expect-version", "0", "--ttl", "30s",
			"--fence-task", "r42", "--fence-token", "589825"},
			"PUT /v1/tenants/acme/kv/research/sources/raft", "",
			`{"value":{"url":"https://raft.github.io"},"expect_version":0,"ttl_ms":30000,"fence":{"task_id":"r42","token":589825}}`},
		{[]string{"kv", "put", "research", "sources/raft", "--", "-5"}, "PUT /v1/tenants/acme/kv/research/sources/raft", "", `{"value":-5}`},
		{[]string{"kv", "del", "research", "sources/raft", "--expect-version", "589825"},
			"DELETE /v1/tenants/acme/kv/research/sources/raft", "expect_version=589825", ``},
		{[]string{"kv", "ls", "research", "--prefix", "sources/", "--limit", "5"}, "GET /v1/tenants/acme/kv/research", "limit=5&prefix=sources%2F", ``},
		{[]string{"checkpoint", "put", "cp-2", "--thread", "chat-7", "--parent", "cp-1", "--data", `{"messages": ["hi"]}`, "--metadata", `{"step":2}`},
			"PUT /v1/tenants/acme/threads/chat-7/checkpoints/cp-2", "", `{"parent_id":"cp-1","data":{"messages":["hi"]},"metadata":{"step":2}}`},
		{[]string{"checkpoint", "put", "cp-2", "--thread", "chat-7", "--parent", "cp-1", "--fork", "--data", `1`},
			"PUT /v1/tenants/acme/threads/chat-7/checkpoints/cp-2", "", `{"parent_id":"cp-1","data":1,"fork":true}`},
		{[]string{"checkpoint", "get", "cp-2", "--thread", "chat-7"}, "GET /v1/tenants/acme/threads/chat-7/checkpoints/cp-2", "", ``},
		{[]string{"checkpoint", "latest", "--thread", "chat-7"}, "GET /v1/tenants/acme/threads/chat-7/checkpoints/latest", "", ``},
		{[]string{"checkpoint", "list", "--thread", "chat-7", "--before", "cp-9", "--limit", "3"},
			"GET /v1/tenants/acme/threads/chat-7/checkpoints", "before=cp-9&limit=3", ``},
		{[]string{"checkpoint", "writes", "cp-2", "--thread", "chat-7", "--task", "step-3", "--writes", `[{"channel": "messages", "value": "hello"}]`},
			"PUT /v1/tenants/acme/threads/chat-7/checkpoints/cp-2/writes/step-3", "", `{"writes":[{"channel":"messages","value":"hello"}]}`},
		{[]string{"checkpoint", "delete-thread", "--thread", "chat-7", "--fence-task", "r42", "--fence-token", "7"},
			"DELETE /v1/tenants/acme/threads/chat-7", "", `{"fence":{"task_id":"r42","token":7}}`},
		{[]string{"op", "get", "notify:r42"}, "GET /v1/tenants/acme/ops/notify:r42", "", ``},
		{[]string{"op", "begin", "notify:r42", "--kind", "email.send", "--params-digest", "sha256:ab", "--task-id", "r42"},
			"POST /v1/tenants/acme/ops/notify:r42/begin", "", `{"kind":"email.send","params_digest":"sha256:ab","task_id":"r42"}`},
		{[]string{"op", "finish", "notify:r42", "--state", "succeeded", "--result", `{"id": "m-1"}`},
			"POST /v1/tenants/acme/ops/notify:r42/finish", "", `{"state":"succeeded","result":{"id":"m-1"}}`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stderr, node := stateCLI(t, context.Background(), io.Discard, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			r := node.requests()[0]
			if r.Route != tc.route || r.Query != tc.query || r.Body != tc.body || r.Auth != "Bearer env-token" {
				t.Errorf("got %s?%s %s (auth %q)\nwant %s?%s %s (auth Bearer env-token)", r.Route, r.Query, r.Body, r.Auth, tc.route, tc.query, tc.body)
			}
		})
	}
}

// TestOpBeginDigestMatchesOnce: op begin --params hashes like concurrency.Once,
// so an operator can begin (or probe) the same op from the shell.
func TestOpBeginDigestMatchesOnce(t *testing.T) {
	code, stderr, node := stateCLI(t, context.Background(), io.Discard,
		"op", "begin", "notify:r42", "--tenant", "acme", "--kind", "email.send", "--params", `{"to": "ops@example.com", "n": 1}`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want, _ := client.ParamsDigest(map[string]any{"n": 1, "to": "ops@example.com"})
	var got client.BeginOpRequest
	if err := json.Unmarshal([]byte(node.requests()[0].Body), &got); err != nil || got.ParamsDigest != want {
		t.Errorf("got body %s, want params_digest %s", node.requests()[0].Body, want)
	}
}

func TestStateUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"kv"}, "kv needs a subcommand"},
		{[]string{"kv", "put", "ns", "k", "--tenant", "acme"}, "missing VALUE_JSON"},
		{[]string{"kv", "put", "ns", "k", "not json", "--tenant", "acme"}, "VALUE_JSON is not valid JSON"},
		{[]string{"kv", "put", "ns", "k", "1", "--tenant", "acme", "--ttl", "0s"}, "--ttl must be at least 1ms"},
		{[]string{"kv", "put", "ns", "k", "1", "--tenant", "acme", "--fence-task", "t"}, "--fence-task and --fence-token go together"},
		{[]string{"kv", "get", "ns", "k"}, "--tenant is required"},
		{[]string{"kv", "ls", "--tenant", "acme"}, "missing NAMESPACE"},
		{[]string{"checkpoint", "put", "cp-1", "--tenant", "acme", "--data", "1"}, "--thread is required"},
		{[]string{"checkpoint", "put", "cp-1", "--tenant", "acme", "--thread", "t"}, "--data is required"},
		{[]string{"checkpoint", "writes", "cp-1", "--tenant", "acme", "--thread", "t", "--writes", "[]"}, "--task is required"},
		{[]string{"checkpoint", "latest", "--tenant", "acme", "--thread", "t", "extra"}, `unexpected argument "extra"`},
		{[]string{"op", "begin", "o", "--tenant", "acme", "--kind", "k"}, "--params or --params-digest is required"},
		{[]string{"op", "begin", "o", "--tenant", "acme", "--kind", "k", "--params", "1", "--params-digest", "d"}, "not both"},
		{[]string{"op", "finish", "o", "--tenant", "acme", "--state", "done"}, "--state must be succeeded, failed or unknown"},
		{[]string{"watch", "--tenant", "acme", "--from-index", "3", "--after-id", "3.1"}, "not both"},
		{[]string{"watch"}, "--tenant is required"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stderr, node := stateCLI(t, context.Background(), io.Discard, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("got exit %d stderr %q, want 2 and %q", code, stderr, tc.want)
			}
			if n := len(node.requests()); n != 0 {
				t.Errorf("usage error sent %d requests, want 0", n)
			}
		})
	}
}

func TestStateOutput(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"kv", "get", "research", "sources/raft"}, []string{"key:", "sources/raft", "version:", "589825", `{"url":"https://raft.github.io"}`, "expires:"}},
		{[]string{"kv", "ls", "research"}, []string{"KEY", "VERSION", "sources/raft", "--page-token c291cmNlcy9yYWZ0"}},
		{[]string{"kv", "del", "research", "sources/raft"}, []string{"deleted research/sources/raft"}},
		{[]string{"checkpoint", "latest", "--thread", "chat-7"}, []string{"checkpoint:", "cp-2", "parent:", "cp-1", "step-3", "messages", `"hello"`}},
		{[]string{"checkpoint", "list", "--thread", "chat-7"}, []string{"CHECKPOINT", "PARENT", "cp-2", `{"step":2}`}},
		{[]string{"checkpoint", "delete-thread", "--thread", "chat-7"}, []string{"deleted thread chat-7"}},
		{[]string{"op", "get", "notify:r42"}, []string{"state:", "started", "email.send", "sha256:ab"}},
		{[]string{"op", "begin", "notify:r42", "--kind", "email.send", "--params-digest", "sha256:ab"}, []string{"began op notify:r42", "state:"}},
		{[]string{"--output", "json", "op", "begin", "notify:r42", "--kind", "email.send", "--params-digest", "sha256:ab"}, []string{`"created": true`, `"op_id": "notify:r42"`}},
		{[]string{"--output", "json", "kv", "get", "research", "sources/raft"}, []string{`"version": 589825`}},
		{[]string{"--output", "json", "checkpoint", "list", "--thread", "chat-7"}, []string{`"checkpoints": [`, `"checkpoint_id": "cp-2"`}},
		{[]string{"--output", "json", "kv", "del", "research", "sources/raft"}, []string{`"index": 9`, `"ok": true`}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Setenv("BATON_TENANT", "acme")
			var out bytes.Buffer
			code, stderr, _ := stateCLI(t, context.Background(), &out, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestStateServerError(t *testing.T) {
	var out bytes.Buffer
	code, stderr, _ := stateCLI(t, context.Background(), &out, "kv", "put", "research", "lock", `"w1"`, "--tenant", "acme", "--expect-version", "0")
	if want := "baton: version_mismatch: entry research/lock exists (version 589825); --expect-version 0 (only if absent) refused the write\n"; code != 3 || stderr != want || out.Len() != 0 {
		t.Errorf("got exit %d stderr %q stdout %q, want 3 and %q", code, stderr, out.String(), want)
	}
}

func TestStateHelp(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"kv", "checkpoint", "op", "watch"}},
		{[]string{"kv", "--help"}, []string{"get", "put", "delete", "list"}},
		{[]string{"kv", "del", "--help"}, []string{"baton kv delete NAMESPACE KEY", "Also called: rm, del"}},
		{[]string{"checkpoint", "--help"}, []string{"put", "latest", "writes", "delete-thread"}},
		{[]string{"kv", "put", "--help"}, []string{"baton kv put NAMESPACE KEY VALUE_JSON", "--ttl duration", "Examples:", "--expect-version 0"}},
		{[]string{"watch", "--help"}, []string{"--from-index", "one JSON event per line", "Examples:", "compacted"}},
		{[]string{"op", "begin", "-h"}, []string{"--params", "canonical JSON"}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			code, stderr, _ := stateCLI(t, context.Background(), &out, tc.args...)
			if code != 0 || stderr != "" {
				t.Fatalf("got exit %d stderr %q, want 0 and nothing", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("help lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// lineWriter collects output lines and signals each one.
type lineWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines chan string
}

func (lw *lineWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.buf.Write(p)
	for {
		line, err := lw.buf.ReadString('\n')
		if err != nil {
			lw.buf.WriteString(line) // incomplete: keep it for the next write
			return len(p), nil
		}
		lw.lines <- strings.TrimSuffix(line, "\n")
	}
}

// TestWatchPrintsEvents: watch prints one JSON object per event and ends
// with status 0 when interrupted.
func TestWatchPrintsEvents(t *testing.T) {
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	out := &lineWriter{lines: make(chan string, 10)}
	done := make(chan int, 1)
	var stderr string
	go func() {
		code, errText, _ := stateCLI(t, ctx, out, "watch", "--tenant", "acme", "--resources", "kv", "--prefix", "research/")
		stderr = errText
		done <- code
	}()
	want := []string{
		`{"id":"10.0","index":10,"resource":"kv","key":"research/a","type":"put","value":{"v":1}}`,
		`{"id":"10","index":10,"resource":"kv","key":"research/b","type":"delete"}`,
	}
	for i, w := range want {
		select {
		case line := <-out.lines:
			if line != w {
				t.Errorf("line %d: got %s, want %s", i, line, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no line %d within 5s", i)
		}
	}
	interrupt() // Ctrl-C
	select {
	case code := <-done:
		if code != 0 || stderr != "" {
			t.Errorf("got exit %d stderr %q after interrupt, want 0 and nothing", code, stderr)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch still running 5s after the interrupt")
	}
}

func TestWatchCompactedExits(t *testing.T) {
	var out bytes.Buffer
	code, stderr, node := stateCLI(t, context.Background(), &out, "watch", "--tenant", "acme", "--from-index", "5")
	if code != 1 || !strings.Contains(stderr, "compacted: watcher fell behind") || strings.Count(out.String(), "\n") != 2 {
		t.Errorf("got exit %d stderr %q stdout %q, want 1, compacted, 2 events", code, stderr, out.String())
	}
	if q := node.requests()[0].Query; q != "from_index=5" {
		t.Errorf("got query %q, want from_index=5", q)
	}
}
