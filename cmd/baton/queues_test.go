package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

const sampleQueueStats = `{"queue": "q", "tasks": 5, "by_status": {"pending": 3, "dead": 1, "done": 1}, "waiting": 3,
	"due_later": 1, "dead": 1, "oldest_pending_at": "2026-12-01T10:15:30.123Z", "oldest_pending_age_ms": 4200,
	"claims_per_minute": 7, "running": 2, "lease_expired": 1, "as_of": "2026-12-01T10:15:34.323Z"}`

// queueNode answers the queue statistics' routes and records requests.
type queueNode struct {
	mu   sync.Mutex
	reqs []string // method, path, query and body
}

func (n *queueNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	n.mu.Lock()
	n.reqs = append(n.reqs, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery+" "+string(body))
	n.mu.Unlock()
	w.Header().Set("X-Baton-Index", "9")
	switch r.Method + " " + r.URL.Path {
	case "GET /v1/tenants/acme/queues/q":
		io.WriteString(w, sampleQueueStats)
	case "GET /v1/tenants/acme/queues":
		io.WriteString(w, `{"queues": [`+sampleQueueStats+`], "next_page_token": "cQ"}`)
	case "PUT /v1/tenants/acme/queues/q/policy":
		io.WriteString(w, `{"max_attempts": 0, "backoff_initial_ms": 0, "backoff_max_ms": 0, "retention_ms": 86400000}`)
	case "GET /v1/tenants/acme/queues/missing":
		w.WriteHeader(404)
		io.WriteString(w, `{"error": {"code": "not_found", "message": "tenant \"acme\" not found"}}`)
	default:
		w.WriteHeader(403)
		io.WriteString(w, `{"error": {"code": "forbidden", "message": "no grant"}}`)
	}
}

func queueCLI(t *testing.T, args ...string) (code int, stdout, stderr string, reqs []string) {
	t.Helper()
	node := &queueNode{}
	srv := httptest.NewServer(node)
	t.Cleanup(srv.Close)
	var out, errOut bytes.Buffer
	code = run(context.Background(), append([]string{"--endpoints", srv.URL, "--timeout", "5s"}, args...), &out, &errOut)
	node.mu.Lock()
	defer node.mu.Unlock()
	return code, out.String(), errOut.String(), append([]string(nil), node.reqs...)
}

// TestQueueStatsCLI: baton queue stats and baton queue ls, as tables and
// JSON, their requests, and the exit codes of a usage error and an API
// error.
func TestQueueStatsCLI(t *testing.T) {
	code, out, errOut, reqs := queueCLI(t, "queue", "stats", "q", "--tenant", "acme")
	if code != 0 || reqs[0] != "GET /v1/tenants/acme/queues/q? " {
		t.Fatalf("stats: exit %d %q, requests %q", code, errOut, reqs)
	}
	for _, want := range []string{"tasks:", "5", "dead=1 done=1 pending=3", "due later:", "oldest pending:", "(4.2s old)", "claims per minute:", "7",
		"running:", "2 (1 more whose lease ran out)"} {
		if !strings.Contains(out, want) {
			t.Errorf("stats output lacks %q:\n%s", want, out)
		}
	}
	if code, out, _, _ = queueCLI(t, "queue", "stats", "q", "--tenant", "acme", "-o", "json"); code != 0 || !strings.Contains(out, `"claims_per_minute": 7`) {
		t.Errorf("stats -o json: exit %d\n%s", code, out)
	}
	code, out, _, reqs = queueCLI(t, "queue", "ls", "--tenant", "acme", "--limit", "1", "--page-token", "cA")
	if code != 0 || reqs[0] != "GET /v1/tenants/acme/queues?limit=1&page_token=cA " {
		t.Fatalf("ls: exit %d, requests %q", code, reqs)
	}
	if row := strings.Fields(strings.Split(out, "\n")[1]); len(row) < 7 || strings.Join(row[:7], " ") != "q 5 3 1 1 7 2" ||
		!strings.Contains(out, "more: --page-token cQ") {
		t.Errorf("ls output:\n%s", out)
	}
	if code, _, errOut, _ = queueCLI(t, "queue", "stats", "--tenant", "acme"); code != exitUsage || !strings.Contains(errOut, "missing QUEUE") {
		t.Errorf("stats without a queue: exit %d %q", code, errOut)
	}
	if code, _, _, _ = queueCLI(t, "queue", "stats", "missing", "--tenant", "acme"); code != exitNotFound {
		t.Errorf("stats of a missing tenant: exit %d, want %d", code, exitNotFound)
	}
	if code, _, _, _ = queueCLI(t, "queue", "list", "--tenant", "other"); code != exitAuth {
		t.Errorf("list without a grant: exit %d, want %d", code, exitAuth)
	}
}

// TestRetentionFlagsCLI: --retention on task create and queue policy set.
func TestRetentionFlagsCLI(t *testing.T) {
	code, out, errOut, reqs := queueCLI(t, "queue", "policy", "set", "q", "--tenant", "acme", "--retention", "24h")
	if code != 0 || reqs[0] != `PUT /v1/tenants/acme/queues/q/policy? {"max_attempts":0,"backoff_initial_ms":0,"backoff_max_ms":0,"retention_ms":86400000}` {
		t.Fatalf("policy set: exit %d %q, requests %q", code, errOut, reqs)
	}
	if !strings.Contains(out, "retention:") || !strings.Contains(out, "24h0m0s") {
		t.Errorf("policy output:\n%s", out)
	}
	_, _, _, reqs = queueCLI(t, "task", "create", "--tenant", "acme", "--queue", "q", "--id", "t1", "--retention", "1h")
	if len(reqs) == 0 || reqs[0] != `POST /v1/tenants/acme/tasks? {"task_id":"t1","queue":"q","retention_ms":3600000}` {
		t.Fatalf("task create: requests %q", reqs)
	}
	if code, _, errOut, _ = queueCLI(t, "queue", "policy", "set", "q", "--tenant", "acme", "--retention", "-1s"); code != exitUsage || !strings.Contains(errOut, "--retention") {
		t.Errorf("a negative retention: exit %d %q", code, errOut)
	}
}
