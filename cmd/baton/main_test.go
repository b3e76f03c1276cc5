package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
)

const sampleTask = `{"tenant_id": "acme", "task_id": "t1", "queue": "research",
 "status": "running", "owner": "w", "lease_until": "2999-01-01T00:00:00.000Z", "fencing_token": 57,
 "version": 3, "attempt": 1, "priority": 0, "artifact_id": "",
 "payload": {"topic": "raft"}, "result": null, "created_at": "2025-01-02T03:04:05.678Z",
 "updated_at": "2025-01-02T03:04:05.678Z"}`

const sampleStatus = `{"node_id": "n1", "state": "Leader", "leader": {"id": "n1", "http_addr": "127.0.0.1:7001", "raft_addr": "127.0.0.1:8001"},
 "term": 3, "commit_index": 120, "applied_index": 120, "state_digest": "sha256:abc",
 "members": [{"id": "n1", "raft_addr": "127.0.0.1:8001", "http_addr": "127.0.0.1:7001", "voter": true, "state": "Leader"},
             {"id": "n2", "raft_addr": "127.0.0.1:8002", "http_addr": "127.0.0.1:7002", "voter": true, "state": "Follower"}]}`

// fakeNode answers a fixed set of routes and records what it was sent.
type fakeNode struct {
	mu   sync.Mutex
	reqs []fakeReq
}

type fakeReq struct {
	Route, Query, Auth string
	Body               string
}

func (f *fakeNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	route := r.Method + " " + r.URL.Path
	f.mu.Lock()
	f.reqs = append(f.reqs, fakeReq{route, r.URL.RawQuery, r.Header.Get("Authorization"), string(body)})
	f.mu.Unlock()
	w.Header().Set("X-Baton-Index", "9")
	switch route {
	case "GET /v1/cluster":
		io.WriteString(w, sampleStatus)
	case "PUT /v1/tenants/acme":
		w.WriteHeader(201)
	case "GET /v1/tenants":
		io.WriteString(w, `{"tenants": ["acme", "globex"]}`)
	case "POST /v1/tenants/acme/principals":
		w.WriteHeader(201)
		io.WriteString(w, `{"name": "rev", "token": "s3cret-token", "grants": [{"resource": "tasks", "prefix": "rev:x", "actions": ["read", "write"]}]}`)
	case "POST /v1/tenants/acme/principals/rev/rotate":
		io.WriteString(w, `{"name": "rev", "token": "n3w-token", "grants": [{"resource": "tasks", "prefix": "rev/", "actions": ["read"]}]}`)
	case "GET /v1/tenants/acme/principals":
		io.WriteString(w, `{"principals": [{"name": "ops", "grants": []}, {"name": "rev", "grants": [{"resource": "tasks", "prefix": "rev/", "actions": ["read", "write"]}]}]}`)
	case "GET /v1/tenants/acme/tasks/t1", "POST /v1/tenants/acme/tasks/t1/claim", "POST /v1/tenants/acme/tasks/t1/update",
		"POST /v1/tenants/acme/tasks/t1/fail", "POST /v1/tenants/acme/tasks/t1/retry", "POST /v1/tenants/acme/tasks",
		"POST /v1/tenants/acme/tasks/t1/cancel":
		io.WriteString(w, sampleTask)
	case "POST /v1/tenants/acme/waitpoints", "GET /v1/tenants/acme/waitpoints/ok-1", "POST /v1/tenants/acme/waitpoints/ok-1/complete":
		io.WriteString(w, `{"tenant_id": "acme", "waitpoint_id": "ok-1", "state": "pending", "payload": null, "version": 1, "task_id": "", "created_at": "2026-12-01T10:15:30.123Z", "timeout_at": "2026-12-01T11:15:30.123Z", "resolved_at": null}`)
	case "POST /v1/tenants/acme/tasks/t1/wait":
		io.WriteString(w, sampleTask)
	case "POST /v1/tenants/acme/schedules", "POST /v1/tenants/acme/schedules/nightly/pause":
		io.WriteString(w, `{"tenant_id": "acme", "schedule_id": "nightly", "queue": "q", "cron": "0 2 * * *", "catch_up": "latest", "priority": 0, "payload": {}, "paused": false, "next_at": "2026-12-02T01:00:00.000Z", "last_tick_at": null, "ticks": 0, "version": 1, "created_at": "2026-12-01T10:15:30.123Z", "updated_at": "2026-12-01T10:15:30.123Z"}`)
	case "GET /v1/tenants/acme/schedules":
		io.WriteString(w, `{"schedules": [], "next_page_token": ""}`)
	case "DELETE /v1/tenants/acme/schedules/nightly":
		w.WriteHeader(204)
	case "GET /v1/tenants/acme/tasks/t1/dependencies":
		io.WriteString(w, `{"dependencies": [{"task_id": "a", "resolved": true, "status": "done", "result": {"n": 1}, "artifact_id": ""}], "next_page_token": ""}`)
	case "GET /v1/tenants/acme/tasks":
		io.WriteString(w, `{"tasks": [`+sampleTask+`], "next_page_token": "p2"}`)
	case "POST /v1/tenants/acme/tasks/t1/renew":
		w.WriteHeader(409)
		io.WriteString(w, `{"error": {"code": "fenced", "message": "token 12 is not current (current 15)", "current_token": 15}}`)
	case "PUT /v1/tenants/acme/queues/q/policy", "GET /v1/tenants/acme/queues/q/policy":
		io.WriteString(w, `{"max_attempts": 5, "backoff_initial_ms": 1000, "backoff_max_ms": 300000}`)
	case "POST /v1/tenants/acme/queues/q/claim":
		w.WriteHeader(204)
	case "DELETE /v1/cluster/members/n3":
		w.WriteHeader(204)
	case "GET /healthz":
		io.WriteString(w, `{"status": "ok", "node_id": "n2", "version": "v9.9.9"}`)
	default:
		w.WriteHeader(401)
		io.WriteString(w, `{"error": {"code": "unauthenticated", "message": "unknown token"}}`)
	}
}

func (f *fakeNode) requests() []fakeReq {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeReq(nil), f.reqs...)
}

// cli runs baton against a fake node and returns exit status and output.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string, node *fakeNode) {
	t.Helper()
	node = &fakeNode{}
	srv := httptest.NewServer(node)
	t.Cleanup(srv.Close)
	var out, errOut bytes.Buffer
	full := append([]string{"--endpoints", srv.URL, "--timeout", "5s"}, args...)
	code = run(context.Background(), full, &out, &errOut)
	return code, out.String(), errOut.String(), node
}

// TestVersion: baton version prints its own build and the answering
// node's version; --version only its own.
func TestVersion(t *testing.T) {
	code, out, errOut, _ := cli(t, "version")
	if code != 0 || !strings.Contains(out, "client: baton ") || !strings.Contains(out, "server: batond v9.9.9 (node n2)") {
		t.Errorf("baton version: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	var stdout bytes.Buffer
	if code := run(context.Background(), []string{"--version"}, &stdout, io.Discard); code != 0 || !strings.HasPrefix(stdout.String(), "baton ") || !strings.HasSuffix(stdout.String(), ")\n") {
		t.Errorf("baton --version: exit %d, %q", code, stdout.String())
	}
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{nil, "missing command"},
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"task"}, "task needs a subcommand"},
		{[]string{"task", "frobnicate"}, `unknown command "frobnicate" for "baton task"`},
		{[]string{"tasks", "lst"}, `unknown command "lst" for "baton task"; did you mean "get" or "list"?`},
		{[]string{"task", "get", "--tenant", "acme"}, "task get: missing ID"},
		{[]string{"task", "get", "a", "b", "--tenant", "acme"}, `unexpected argument "b"`},
		{[]string{"task", "claim", "t1", "--owner", "w", "--lease", "30s"}, "--tenant is required"},
		{[]string{"task", "claim", "t1", "--tenant", "acme", "--owner", "w"}, "--lease is required"},
		{[]string{"task", "claim", "t1", "--tenant", "acme", "--owner", "w", "--lease", "-1s"}, "--lease must be at least 1ms"},
		{[]string{"task", "claim", "t1", "--tenant", "acme", "--owner", "w", "--lease", "soon"}, `invalid argument "soon" for "--lease" flag`},
		{[]string{"task", "renew", "t1", "--tenant", "acme", "--lease", "1s"}, "--fencing-token is required"},
		{[]string{"task", "release", "t1", "--tenant", "acme"}, "task release: --fencing-token is required"},
		{[]string{"task", "create", "--tenant", "acme", "--queue", "q", "--payload", "{bad"}, "not valid JSON"},
		{[]string{"task", "create", "--tenant", "acme", "--queue", "q", "--delay", "1s", "--at", "2030-01-01T00:00:00Z"}, "give --delay or --at, not both"},
		{[]string{"task", "retry", "t1", "--tenant", "acme", "--at", "tomorrow"}, `--at "tomorrow" is not an RFC 3339 time`},
		{[]string{"task", "fail", "t1", "--tenant", "acme"}, "task fail: --fencing-token is required"},
		{[]string{"task", "get", "t1", "--tenant", "acme", "--nope"}, "unknown flag: --nope"},
		{[]string{"principal", "create", "--tenant", "acme", "--name", "n", "--grant", "tasks:read"}, "want RESOURCE:PREFIX:ACTIONS"},
		{[]string{"principal", "create", "--tenant", "acme", "--name", "n", "--grant", "tasks::fly"}, `unknown action "fly"`},
		{[]string{"members", "remove"}, "members remove: missing ID"},
		{[]string{"members", "add", "--id", "n4"}, "--raft-addr is required"},
		{[]string{"--output", "xml", "status"}, `--output (or BATON_OUTPUT) must be table, json or yaml, got "xml"`},
		{[]string{"status", "-o", "xml"}, `--output (or BATON_OUTPUT) must be table, json or yaml, got "xml"`},
		{[]string{"status", "--timeout", "0s"}, "--timeout must be positive"},
		{[]string{"principal", "create", "--tenant", "acme"}, "principal create: missing NAME"},
		{[]string{"principal", "create", "a", "--name", "b", "--tenant", "acme"}, `NAME "a" and --name "b" differ`},
		{[]string{"help", "nosuch"}, `unknown command "nosuch"`},
		{[]string{"artifact", "put", "-", "--tenant", "acme", "--name", "out/x"}, `--name "out/x": artifact names match [A-Za-z0-9][A-Za-z0-9._:-]{0,127}`},
		{[]string{"artifact", "get", "out/x", "--tenant", "acme"}, `NAME "out/x": artifact names match [A-Za-z0-9][A-Za-z0-9._:-]{0,127}`},
		{[]string{"--endpoints", "ftp://x", "status"}, "scheme must be http or https"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var code int
			var stderr string
			var node *fakeNode
			if len(tc.args) > 1 && tc.args[0] == "--endpoints" {
				var errOut bytes.Buffer
				code, stderr = run(context.Background(), tc.args, io.Discard, &errOut), errOut.String()
				node = &fakeNode{}
			} else {
				code, _, stderr, node = cli(t, tc.args...)
			}
			if code != 2 {
				t.Errorf("got exit %d, want 2; stderr:\n%s", code, stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr %q does not contain %q", stderr, tc.want)
			}
			if !strings.Contains(stderr, "--help' for usage") {
				t.Errorf("stderr %q lacks the --help hint", stderr)
			}
			if n := len(node.requests()); n != 0 {
				t.Errorf("usage error sent %d requests, want 0", n)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"Commands:", "queue", "Global flags", "-e, --endpoints", "-o, --output", "Examples:",
			"BATON_ENDPOINTS", "BATON_TOKEN", "BATON_CACERT", "BATON_CERT", "BATON_KEY", "BATON_OUTPUT", "BATON_TIMEOUT", "BATON_TENANT",
			"Exit status:", "3  conflict", "4  not_found", "5  unauthenticated", "6  the cluster cannot answer", "completion"}},
		{[]string{"help"}, []string{"Commands:"}},
		{[]string{"task", "--help"}, []string{"Commands:", "claim", "release"}},
		{[]string{"help", "task"}, []string{"baton task COMMAND", "claim", "release"}},
		{[]string{"help", "task", "claim"}, []string{"baton task claim ID", "--lease duration"}},
		{[]string{"task", "help"}, []string{"baton task COMMAND"}},
		{[]string{"members", "--help"}, []string{"add", "remove"}},
		{[]string{"task", "claim", "--help"}, []string{"baton task claim ID", "--lease duration", "Examples:"}},
		{[]string{"task", "ls", "--help"}, []string{"baton task list", "Also called: ls"}},
		{[]string{"principal", "create", "-h"}, []string{"--grant", "shown only once"}},
		{[]string{"principal", "revoke", "-h"}, []string{"baton principal delete NAME", "revoke"}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr, _ := cli(t, tc.args...)
			if code != 0 || stderr != "" {
				t.Fatalf("got exit %d stderr %q, want 0 and nothing", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("help lacks %q:\n%s", w, stdout)
				}
			}
		})
	}
}

func TestJSONOutput(t *testing.T) {
	t.Run("task get", func(t *testing.T) {
		code, stdout, stderr, _ := cli(t, "--output", "json", "task", "get", "t1", "--tenant", "acme")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var task client.Task
		if err := json.Unmarshal([]byte(stdout), &task); err != nil {
			t.Fatalf("stdout is not a task: %v\n%s", err, stdout)
		}
		var payload bytes.Buffer
		_ = json.Compact(&payload, task.Payload)
		if task.TaskID != "t1" || task.FencingToken != 57 || payload.String() != `{"topic":"raft"}` {
			t.Errorf("got task %s token %d payload %s, want t1 57 {\"topic\":\"raft\"}", task.TaskID, task.FencingToken, payload.String())
		}
	})
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"tenant", "create", "acme"}, `{"created":true,"tenant":"acme"}`},
		{[]string{"tenant", "list"}, `{"tenants":["acme","globex"]}`},
		{[]string{"members", "remove", "n3"}, `{"index":9,"ok":true}`},
		{[]string{"queue", "claim", "q", "--tenant", "acme", "--owner", "w", "--lease", "1s"}, `null`},
		{[]string{"queue", "claim", "q", "--tenant", "acme", "--owner", "w", "--lease", "1s", "--max", "3"}, `[]`},
		{[]string{"status"}, `"state_digest":"sha256:abc"`},
		{[]string{"task", "list", "--tenant", "acme"}, `"next_page_token":"p2"`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr, _ := cli(t, append([]string{"--output", "json"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, []byte(stdout)); err != nil {
				t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
			}
			if !strings.Contains(compact.String(), tc.want) {
				t.Errorf("got %s, want it to contain %s", compact.String(), tc.want)
			}
		})
	}
}

func TestTextOutput(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		// The sample's members are at addresses nothing serves: status
		// asks each one and says it does not answer.
		{[]string{"status"}, []string{"leader:", "n1 (http 127.0.0.1:7001, raft 127.0.0.1:8001)", "term:", "applied index:", "sha256:abc",
			"ANSWERS", "LAG", "n2  true   no: unavailable"}},
		{[]string{"members"}, []string{"ID", "VOTER", "n2", "127.0.0.1:8002"}},
		{[]string{"principal", "create", "--tenant", "acme", "--name", "rev", "--grant", "tasks:rev:x:read,write"},
			[]string{"s3cret-token", "shown only this once", "rev:x"}},
		{[]string{"tenant", "create", "acme"}, []string{"created tenant acme"}},
		{[]string{"principal", "rotate", "rev", "--tenant", "acme"}, []string{"n3w-token", "shown only this once", "old token no longer works"}},
		{[]string{"principal", "list", "--tenant", "acme"}, []string{"PRINCIPAL", "ops", "rev", "rev/", "read,write"}},
		{[]string{"task", "list", "--tenant", "acme"}, []string{"TASK", "t1", "research", "--page-token p2"}},
		{[]string{"task", "get", "t1", "--tenant", "acme"}, []string{"fencing token:", "57", `{"topic":"raft"}`}},
		{[]string{"queue", "claim", "q", "--tenant", "acme", "--owner", "w", "--lease", "1s"}, []string{"no claimable task in queue q"}},
		{[]string{"queue", "claim", "q", "--tenant", "acme", "--owner", "w", "--lease", "1s", "--max", "3"}, []string{"no claimable task in queue q"}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr, _ := cli(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("output lacks %q:\n%s", w, stdout)
				}
			}
		})
	}
}

func TestServerErrors(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"task", "renew", "t1", "--tenant", "acme", "--fencing-token", "12", "--lease", "30s"}, 3,
			"baton: fenced: fencing token 12 is not current for task \"t1\" (the current token is 15: the task was claimed again since); the renewal was refused\n"},
		{[]string{"task", "get", "nope", "--tenant", "acme"}, 5, "baton: unauthenticated: unknown token\n"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr, _ := cli(t, tc.args...)
			if code != tc.code || stderr != tc.want || stdout != "" {
				t.Errorf("got exit %d stderr %q stdout %q, want %d and %q", code, stderr, stdout, tc.code, tc.want)
			}
		})
	}
}

// TestJSONErrors: with -o json (or yaml) an error is the API's error
// object on stdout, and the words still go to stderr.
func TestJSONErrors(t *testing.T) {
	code, stdout, stderr, _ := cli(t, "task", "renew", "t1", "--tenant", "acme", "--fencing-token", "12", "--lease", "30s", "-o", "json")
	want := `{"error":{"code":"fenced","current_token":15,"message":"token 12 is not current (current 15)"}}`
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(stdout)); err != nil || compact.String() != want || code != 3 || !strings.HasPrefix(stderr, "baton: fenced: ") {
		t.Errorf("got exit %d stdout %q stderr %q, want 3, %s and the words on stderr", code, stdout, stderr, want)
	}
	code, stdout, _, _ = cli(t, "-o", "yaml", "task", "get", "nope", "--tenant", "acme")
	if code != 5 || stdout != "error:\n  code: unauthenticated\n  message: unknown token\n" {
		t.Errorf("yaml: got exit %d stdout %q", code, stdout)
	}
	code, stdout, _, _ = cli(t, "-o", "json", "task", "bogus")
	if code != 2 || !strings.HasPrefix(stdout, `{`) || !strings.Contains(stdout, `"code": "usage"`) || !strings.HasSuffix(stdout, "}\n") {
		t.Errorf("usage error as JSON: got exit %d stdout %q", code, stdout)
	}
}

func TestRequestsSent(t *testing.T) {
	t.Setenv("BATON_TOKEN", "env-token")
	t.Setenv("BATON_TENANT", "acme")
	cases := []struct {
		args  []string
		route string
		body  string
	}{
		{[]string{"task", "claim", "--owner", "w", "t1", "--lease", "30s", "--set-status", "running"},
			"POST /v1/tenants/acme/tasks/t1/claim", `{"owner":"w","lease_ms":30000,"set_status":"running"}`},
		{[]string{"task", "update", "t1", "--fencing-token", "0", "--release", "--result", `{"ok": true}`},
			"POST /v1/tenants/acme/tasks/t1/update", `{"fencing_token":0,"result":{"ok":true},"release":true}`},
		{[]string{"task", "release", "t1", "--fencing-token", "57"},
			"POST /v1/tenants/acme/tasks/t1/update", `{"fencing_token":57,"release":true}`},
		{[]string{"task", "fail", "t1", "--fencing-token", "57", "--error", "upstream 502"},
			"POST /v1/tenants/acme/tasks/t1/fail", `{"fencing_token":57,"error":"upstream 502"}`},
		{[]string{"task", "fail", "t1", "--fencing-token", "57", "--error", "bad input", "--non-retryable"},
			"POST /v1/tenants/acme/tasks/t1/fail", `{"fencing_token":57,"error":"bad input","non_retryable":true}`},
		{[]string{"task", "retry", "t1"}, "POST /v1/tenants/acme/tasks/t1/retry", `{}`},
		{[]string{"task", "create", "--queue", "q", "--id", "t2", "--depends-on", "a,b", "--dependency-policy", "ignore"},
			"POST /v1/tenants/acme/tasks", `{"task_id":"t2","queue":"q","depends_on":["a","b"],"dependency_policy":"ignore"}`},
		{[]string{"task", "deps", "t1", "--limit", "5"}, "GET /v1/tenants/acme/tasks/t1/dependencies", ``},
		{[]string{"task", "wait", "t1", "--fencing-token", "57", "--waitpoint", "ok-1"},
			"POST /v1/tenants/acme/tasks/t1/wait", `{"fencing_token":57,"waitpoint_id":"ok-1"}`},
		{[]string{"waitpoint", "create", "ok-1", "--timeout", "1h"}, "POST /v1/tenants/acme/waitpoints", `{"waitpoint_id":"ok-1","timeout_ms":3600000}`},
		{[]string{"waitpoint", "get", "ok-1", "--wait", "2s"}, "GET /v1/tenants/acme/waitpoints/ok-1", ``},
		{[]string{"waitpoint", "complete", "ok-1", "--payload", `{"approved": true}`},
			"POST /v1/tenants/acme/waitpoints/ok-1/complete", `{"payload":{"approved":true}}`},
		{[]string{"queue", "policy", "set", "q", "--max-leased", "10", "--claims-per-second", "5", "--claim-burst", "5", "--concurrency-key-limit", "2"},
			"PUT /v1/tenants/acme/queues/q/policy", `{"max_attempts":0,"backoff_initial_ms":0,"backoff_max_ms":0,"max_leased":10,"claims_per_second":5,"claim_burst":5,"concurrency_key_limit":2}`},
		{[]string{"task", "create", "--queue", "q", "--id", "t3", "--concurrency-key", "cust-1"},
			"POST /v1/tenants/acme/tasks", `{"task_id":"t3","queue":"q","concurrency_key":"cust-1"}`},
		{[]string{"schedule", "create", "nightly", "--queue", "q", "--cron", "0 2 * * *", "--timezone", "Europe/Paris"},
			"POST /v1/tenants/acme/schedules", `{"schedule_id":"nightly","queue":"q","cron":"0 2 * * *","timezone":"Europe/Paris"}`},
		{[]string{"schedule", "pause", "nightly"}, "POST /v1/tenants/acme/schedules/nightly/pause", ``},
		{[]string{"schedule", "ls", "--limit", "5"}, "GET /v1/tenants/acme/schedules", ``},
		{[]string{"schedule", "delete", "nightly"}, "DELETE /v1/tenants/acme/schedules/nightly", ``},
		{[]string{"task", "cancel", "t1", "--reason", "user stop"}, "POST /v1/tenants/acme/tasks/t1/cancel", `{"reason":"user stop"}`},
		{[]string{"task", "cancel", "t1", "--fencing-token", "57", "--expect-version", "3"},
			"POST /v1/tenants/acme/tasks/t1/cancel", `{"fencing_token":57,"expect_version":3}`},
		{[]string{"task", "retry", "t1", "--delay", "1m", "--expect-version", "4"},
			"POST /v1/tenants/acme/tasks/t1/retry", `{"expect_version":4,"delay_ms":60000}`},
		{[]string{"task", "release", "t1", "--fencing-token", "57", "--at", "2030-01-02T03:04:05Z"},
			"POST /v1/tenants/acme/tasks/t1/update", `{"fencing_token":57,"release":true,"available_at":"2030-01-02T03:04:05Z"}`},
		{[]string{"task", "create", "--queue", "q", "--id", "t9", "--max-attempts", "5", "--backoff-initial", "2s", "--backoff-max", "1m", "--delay", "10s"},
			"POST /v1/tenants/acme/tasks", `{"task_id":"t9","queue":"q","max_attempts":5,"backoff_initial_ms":2000,"backoff_max_ms":60000,"delay_ms":10000}`},
		{[]string{"queue", "policy", "set", "q", "--max-attempts", "5", "--backoff-initial", "1s", "--backoff-max", "5m"},
			"PUT /v1/tenants/acme/queues/q/policy", `{"max_attempts":5,"backoff_initial_ms":1000,"backoff_max_ms":300000}`},
		{[]string{"queue", "policy", "get", "q"}, "GET /v1/tenants/acme/queues/q/policy", ``},
		{[]string{"queue", "claim", "q", "--owner", "w", "--lease", "2s", "--wait", "50ms", "--status", "pending,retry"},
			"POST /v1/tenants/acme/queues/q/claim", `{"owner":"w","lease_ms":2000,"statuses":["pending","retry"],"wait_ms":50}`},
		{[]string{"principal", "create", "--name", "rev", "--grant", "*::read,write,delete"},
			"POST /v1/tenants/acme/principals", `{"name":"rev","grants":[{"resource":"*","prefix":"","actions":["read","write","delete"]}]}`},
		{[]string{"principal", "rotate", "rev"}, "POST /v1/tenants/acme/principals/rev/rotate", ``},
		{[]string{"principal", "list"}, "GET /v1/tenants/acme/principals", ``},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, stderr, node := cli(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			r := node.requests()[0]
			if r.Route != tc.route || r.Body != tc.body || r.Auth != "Bearer env-token" {
				t.Errorf("got %s %s (auth %q), want %s %s (auth Bearer env-token)", r.Route, r.Body, r.Auth, tc.route, tc.body)
			}
		})
	}
}

// A grant whose prefix is not bounded by a segment gets a warning on
// stderr; an empty prefix or one ending in "/" does not.
func TestPrincipalCreatePrefixWarning(t *testing.T) {
	for _, tc := range []struct {
		grant string
		warn  bool
	}{
		{"tasks:research:read", true},
		{"kv:notes/a:read", true},
		{"tasks:research/:read", false},
		{"*::read,write", false},
	} {
		code, _, stderr, _ := cli(t, "principal", "create", "--tenant", "acme", "--name", "rev", "--grant", tc.grant)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.grant, code, stderr)
		}
		if got := strings.Contains(stderr, "warning: grant") && strings.Contains(stderr, "plain string prefix"); got != tc.warn {
			t.Errorf("--grant %s: stderr %q, want a warning: %v", tc.grant, stderr, tc.warn)
		}
	}
}

// TestExitCodes: each API error code maps to its documented exit status.
func TestExitCodes(t *testing.T) {
	cases := map[string]int{
		"fenced": 3, "lease_held": 3, "version_mismatch": 3, "already_exists": 3,
		"idempotency_mismatch": 3, "idempotency_expired": 3,
		"not_found": 4, "unauthenticated": 5, "forbidden": 5,
		"unavailable": 6, "rate_limited": 6, "outcome_unknown": 7,
		"invalid_argument": 1, "digest_mismatch": 1, "compacted": 1, "resource_exhausted": 1, "too_large": 1,
	}
	for code, want := range cases {
		if got := exitCode(&client.Error{Status: 400, Code: code}); got != want {
			t.Errorf("%s: exit %d, want %d", code, got, want)
		}
	}
	wrapped := fmt.Errorf("%w: GET http://x/v1/cluster: connection refused", client.ErrUnavailable)
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{usageErrorf("baton", "bad"), 2},
		{wrapped, 6},
		{fmt.Errorf("GET http://x: %w", context.DeadlineExceeded), 6},
		{&refusal{err: &client.Error{Code: "fenced"}, msg: "words"}, 3},
		{errors.New("open x: no such file"), 1},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("%v: exit %d, want %d", tc.err, got, tc.want)
		}
	}
}

// TestGlobalEnv: every global flag has its BATON_* variable, a flag wins
// over it, and endpoints need no scheme.
func TestGlobalEnv(t *testing.T) {
	node := &fakeNode{}
	srv := httptest.NewServer(node)
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	t.Setenv("BATON_ENDPOINTS", host)
	t.Setenv("BATON_TOKEN", "env-token")
	t.Setenv("BATON_OUTPUT", "json")
	t.Setenv("BATON_TIMEOUT", "5s")
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"tenant", "list"}, &out, &errOut); code != 0 || out.String() != "{\n  \"tenants\": [\n    \"acme\",\n    \"globex\"\n  ]\n}\n" {
		t.Fatalf("env only: exit %d stdout %q stderr %q", code, out.String(), errOut.String())
	}
	if r := node.requests()[0]; r.Auth != "Bearer env-token" {
		t.Errorf("auth %q, want the env token", r.Auth)
	}
	out.Reset()
	if code := run(context.Background(), []string{"tenant", "list", "-o", "yaml", "--token", "flag-token"}, &out, &errOut); code != 0 || out.String() != "tenants:\n- acme\n- globex\n" {
		t.Errorf("flags over env: exit %d stdout %q", code, out.String())
	}
	if r := node.requests()[1]; r.Auth != "Bearer flag-token" {
		t.Errorf("auth %q, want the flag's token", r.Auth)
	}
	// A task command's own --token (the fencing token of older releases)
	// hides the global one: the bearer token still comes from the env.
	out.Reset()
	errOut.Reset()
	if code := run(context.Background(), []string{"task", "release", "t1", "--tenant", "acme", "--token", "57"}, &out, &errOut); code != 0 ||
		!strings.Contains(errOut.String(), "warning: --token 57 is read as --fencing-token 57") {
		t.Errorf("task release --token 57: exit %d stderr %q", code, errOut.String())
	}
	if r := node.requests()[2]; r.Auth != "Bearer env-token" || r.Body != `{"fencing_token":57,"release":true}` {
		t.Errorf("task release --token 57: sent %s auth %q", r.Body, r.Auth)
	}
	// A --token that is not a number is the bearer token.
	if code := run(context.Background(), []string{"task", "update", "t1", "--tenant", "acme", "--token", "s3cret", "--fencing-token", "5"}, io.Discard, io.Discard); code != 0 {
		t.Errorf("task update --token s3cret: exit %d", code)
	}
	if r := node.requests()[3]; r.Auth != "Bearer s3cret" || r.Body != `{"fencing_token":5}` {
		t.Errorf("task update --token s3cret --fencing-token 5: sent %s auth %q", r.Body, r.Auth)
	}
	t.Setenv("BATON_TIMEOUT", "soon")
	errOut.Reset()
	if code := run(context.Background(), []string{"status"}, io.Discard, &errOut); code != 2 || !strings.Contains(errOut.String(), `BATON_TIMEOUT="soon"`) {
		t.Errorf("bad BATON_TIMEOUT: exit %d stderr %q", code, errOut.String())
	}
}

// TestOutputEndsWithNewline: the table output of every command the fake
// answers ends with a newline, as do JSON and YAML.
func TestOutputEndsWithNewline(t *testing.T) {
	for _, args := range [][]string{
		{"status"}, {"members"}, {"tenant", "list"}, {"tenant", "create", "acme"},
		{"task", "get", "t1", "--tenant", "acme"}, {"task", "claim", "t1", "--tenant", "acme", "--owner", "w", "--lease", "1s"},
		{"task", "list", "--tenant", "acme"}, {"members", "remove", "n3"}, {"version"},
	} {
		for _, format := range []string{"table", "json", "yaml"} {
			code, stdout, stderr, _ := cli(t, append(args, "-o", format)...)
			if code != 0 || !strings.HasSuffix(stdout, "\n") || strings.HasSuffix(stdout, "\n\n") {
				t.Errorf("%s -o %s: exit %d stdout %q stderr %q, want one newline at the end", strings.Join(args, " "), format, code, stdout, stderr)
			}
		}
	}
}

// TestUnreachableFailsFast: against endpoints that refuse connections,
// status and version give up within seconds (not the 30 s of --timeout)
// with exit 6; version prints the client's version first.
func TestUnreachableFailsFast(t *testing.T) {
	var eps []string
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		eps = append(eps, ln.Addr().String())
		ln.Close() // connections to it are refused
	}
	cases := []struct {
		args    []string
		wantOut string
	}{
		{[]string{"status"}, ""},
		{[]string{"version"}, "client: baton "},
		{[]string{"version", "-o", "json"}, `"server_error"`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			start := time.Now()
			code := run(context.Background(), append([]string{"--endpoints", strings.Join(eps, ",")}, tc.args...), &out, &errOut)
			if took := time.Since(start); took > 15*time.Second {
				t.Errorf("took %v, want well under --timeout's 30s", took)
			}
			if code != 6 {
				t.Errorf("exit %d, want 6; stderr %q", code, errOut.String())
			}
			if !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("stdout %q, want %q", out.String(), tc.wantOut)
			}
			if n := strings.Count(out.String(), `"error"`); n != 0 {
				t.Errorf("stdout %q holds an error object besides the answer", out.String())
			}
		})
	}
}
