package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestListsFollowEmptyPages: an empty page with a next token ended at the
// server's walk bound, not at the end; baton queue ls, artifact ls, task ls
// and kv ls ask for the next page until one has rows or no token.
func TestListsFollowEmptyPages(t *testing.T) {
	for _, tc := range []struct{ args, path, rows, want string }{
		{"queue ls", "/v1/tenants/acme/queues", `{"queues": [` + sampleQueueStats + `], "next_page_token": "cQ"}`, "\nq "},
		{"artifact ls", "/v1/tenants/acme/artifacts", `{"artifacts": [{"name": "a", "latest_version": 2, "versions": 2}], "next_page_token": ""}`, "\na "},
		{"task ls", "/v1/tenants/acme/tasks", `{"tasks": [` + sampleTask + `], "next_page_token": ""}`, "\nt1 "},
		{"kv ls research", "/v1/tenants/acme/kv/research", `{"entries": [` + sampleEntry + `], "next_page_token": ""}`, "\nsources/raft "},
	} {
		var mu sync.Mutex
		var queries []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			if r.URL.Path != tc.path {
				w.WriteHeader(404)
				return
			}
			queries = append(queries, r.URL.RawQuery)
			w.Header().Set("X-Baton-Index", "9")
			switch r.URL.Query().Get("page_token") {
			case "":
				io.WriteString(w, tc.rows[:strings.Index(tc.rows, "[")+1]+`], "next_page_token": "p1"}`)
			case "p1":
				io.WriteString(w, tc.rows[:strings.Index(tc.rows, "[")+1]+`], "next_page_token": "p2"}`)
			default:
				io.WriteString(w, tc.rows)
			}
		}))
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"--endpoints", srv.URL, "--timeout", "5s"}, append(strings.Fields(tc.args), "--tenant", "acme")...), &out, &errOut)
		srv.Close()
		if code != 0 || strings.Join(queries, " ") != " page_token=p1 page_token=p2" || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%s: exit %d %s, queries %q, output:\n%s", tc.args, code, errOut.String(), queries, out.String())
		}
	}
}

// TestArtifactRmByVersion: baton artifact rm NAME of a name the server
// will not delete in one command (delete_by_version) deletes its versions
// one by one, through the SDK.
func TestArtifactRmByVersion(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, r.Method+" "+r.URL.Path)
		w.Header().Set("X-Baton-Index", "9")
		switch {
		case r.Method == "DELETE" && r.URL.Path == "/v1/tenants/acme/artifacts/big":
			w.WriteHeader(400)
			io.WriteString(w, `{"error": {"code": "invalid_argument", "message": "too many chunk references", "delete_by_version": true}}`)
		case r.Method == "GET" && r.URL.Path == "/v1/tenants/acme/artifacts/big/versions":
			io.WriteString(w, `{"versions": [{"artifact_id": "sha256:a1", "name": "big", "version": 1, "created_at": "2025-01-02T03:04:05Z"},
				{"artifact_id": "sha256:a2", "name": "big", "version": 2, "created_at": "2025-01-02T03:04:05Z"}]}`)
		case r.Method == "DELETE" && strings.HasPrefix(r.URL.Path, "/v1/tenants/acme/artifacts/big/versions/"):
			w.WriteHeader(204)
		default:
			w.WriteHeader(404)
		}
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--endpoints", srv.URL, "--timeout", "5s", "artifact", "rm", "big", "--tenant", "acme"}, &out, &errOut)
	mu.Lock()
	defer mu.Unlock()
	want := "DELETE /v1/tenants/acme/artifacts/big GET /v1/tenants/acme/artifacts/big/versions DELETE /v1/tenants/acme/artifacts/big/versions/1 DELETE /v1/tenants/acme/artifacts/big/versions/2"
	if got := strings.Join(slices.DeleteFunc(calls, func(c string) bool { return strings.HasSuffix(c, "/v1/sessions") }), " "); code != 0 || got != want {
		t.Errorf("exit %d %s; calls\n%s\nwant\n%s", code, errOut.String(), got, want)
	}
}
