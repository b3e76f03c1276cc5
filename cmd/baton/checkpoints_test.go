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

// cpNode is a fake node that answers every checkpoint request with
// sampleCheckpoint (a list with it), recording what it was sent.
type cpNode struct {
	mu   sync.Mutex
	reqs []fakeReq
}

func (f *cpNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, fakeReq{r.Method + " " + r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("Authorization"), string(body)})
	f.mu.Unlock()
	w.Header().Set("X-Baton-Index", "9")
	switch {
	case r.Method == "DELETE":
		w.WriteHeader(204)
	case strings.HasSuffix(r.URL.Path, "/checkpoints"):
		io.WriteString(w, `{"checkpoints": [`+sampleCheckpoint+`]}`)
	case strings.Contains(r.URL.Path, "/writes/"):
		io.WriteString(w, `{"task_id": "step-3", "writes": []}`)
	default:
		io.WriteString(w, sampleCheckpoint)
	}
}

func cpCLI(t *testing.T, args ...string) (code int, stdout, stderr string, node *cpNode) {
	t.Helper()
	node = &cpNode{}
	srv := httptest.NewServer(node)
	t.Cleanup(srv.Close)
	var out, errOut bytes.Buffer
	full := append([]string{"--endpoints", srv.URL, "--timeout", "5s", "--tenant", "acme"}, args...)
	code = run(context.Background(), full, &out, &errOut)
	return code, out.String(), errOut.String(), node
}

// TestCheckpointNamespaceFlags: every checkpoint command about one
// namespace takes --ns (sent as checkpoint_ns), thread ids such as e-mail
// addresses and ones with slashes and spaces go in one path segment, and
// list sends --filter as a JSON object; delete-thread takes no --ns (it
// deletes every namespace).
func TestCheckpointNamespaceFlags(t *testing.T) {
	t.Setenv("BATON_TOKEN", "tok")
	const ns = "checkpoint_ns=agent%3A1%7Ctools"
	cases := []struct {
		args         []string
		route, query string
		body         string
	}{
		{[]string{"checkpoint", "put", "cp-2", "--thread", "user@example.com", "--ns", "agent:1|tools", "--parent", "cp-1", "--data", `{"m":1}`},
			"PUT /v1/tenants/acme/threads/user@example.com/checkpoints/cp-2", ns, `{"parent_id":"cp-1","data":{"m":1}}`},
		{[]string{"checkpoint", "get", "cp-2", "--thread", "team alpha/run 7", "--ns", "agent:1|tools"},
			"GET /v1/tenants/acme/threads/team%20alpha%2Frun%207/checkpoints/cp-2", ns, ``},
		{[]string{"checkpoint", "latest", "--thread", "ünï", "--ns", "agent:1|tools"},
			"GET /v1/tenants/acme/threads/%C3%BCn%C3%AF/checkpoints/latest", ns, ``},
		{[]string{"checkpoint", "latest", "--thread", "chat-7"}, "GET /v1/tenants/acme/threads/chat-7/checkpoints/latest", "", ``},
		{[]string{"checkpoint", "list", "--thread", "u@x.io", "--ns", "agent:1|tools", "--filter", `{"source": "loop", "step": 3}`, "--before", "cp-9", "--limit", "2"},
			"GET /v1/tenants/acme/threads/u@x.io/checkpoints", "before=cp-9&" + ns + "&filter=%7B%22source%22%3A%22loop%22%2C%22step%22%3A3%7D&limit=2", ``},
		{[]string{"checkpoint", "writes", "cp-2", "--thread", "u@x.io", "--ns", "agent:1|tools", "--task", "step-3", "--writes", `[]`},
			"PUT /v1/tenants/acme/threads/u@x.io/checkpoints/cp-2/writes/step-3", ns, `{"writes":[]}`},
		{[]string{"checkpoint", "delete-thread", "--thread", "u@x.io"}, "DELETE /v1/tenants/acme/threads/u@x.io", "", ``},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, stderr, node := cpCLI(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			r := node.reqs[0]
			if r.Route != tc.route || !sameQuery(r.Query, tc.query) || r.Body != tc.body {
				t.Errorf("got %s?%s %s\nwant %s?%s %s", r.Route, r.Query, r.Body, tc.route, tc.query, tc.body)
			}
		})
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"checkpoint", "list", "--thread", "t", "--filter", `["source"]`}, "--filter must be a JSON object"},
		{[]string{"checkpoint", "list", "--thread", "t", "--filter", `{"source":`}, "not valid JSON"},
		{[]string{"checkpoint", "delete-thread", "--thread", "t", "--ns", "x"}, "unknown flag: --ns"},
	} {
		if code, _, stderr, _ := cpCLI(t, tc.args...); code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d %q, want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	// The namespace shows in the checkpoint's text form.
	if code, out, stderr, _ := cpCLI(t, "checkpoint", "latest", "--thread", "chat-7", "--ns", "sub"); code != 0 || !strings.Contains(out, "namespace:") {
		t.Errorf("exit %d %s, output lacks the namespace:\n%s", code, stderr, out)
	}
}

// sameQuery compares two query strings whatever the order of their parameters.
func sameQuery(a, b string) bool {
	pa, pb := strings.Split(a, "&"), strings.Split(b, "&")
	if len(pa) != len(pb) {
		return false
	}
	seen := map[string]int{}
	for _, p := range pa {
		seen[p]++
	}
	for _, p := range pb {
		if seen[p]--; seen[p] < 0 {
			return false
		}
	}
	return true
}
