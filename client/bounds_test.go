package client_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/baton-dev/baton/client"
)

// TestCheckpointListFollowsPageTokens: a server page that ends at its walk
// bound with few or no matches carries a next_page_token; ListCheckpoints
// follows it (with the limit still wanted, page_token instead of before)
// until it has Limit matches or a page has no token.
func TestCheckpointListFollowsPageTokens(t *testing.T) {
	var mu sync.Mutex
	var queries []string
	pages := []string{
		`{"checkpoints": [], "next_page_token": "p1"}`,
		`{"checkpoints": [{"thread_id": "t", "checkpoint_id": "c9", "parent_id": "", "data": 1, "metadata": {}, "created_at": "2025-01-02T03:04:05.678Z"}], "next_page_token": "p2"}`,
		`{"checkpoints": [{"thread_id": "t", "checkpoint_id": "c3", "parent_id": "", "data": 1, "metadata": {}, "created_at": "2025-01-02T03:04:05.678Z"}]}`,
	}
	h := func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		queries = append(queries, r.URL.RawQuery)
		_, _ = w.Write([]byte(pages[min(len(queries), len(pages))-1]))
	}
	c := newClient(t, serve(t, h).URL)
	list, err := c.ListCheckpoints(bg, "acme", "t", client.ListCheckpointsOptions{Before: "c10", Limit: 5, Filter: map[string]any{"k": 1}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, cp := range list {
		ids = append(ids, cp.CheckpointID)
	}
	want := []string{
		"before=c10&filter=%7B%22k%22%3A1%7D&limit=5",
		"filter=%7B%22k%22%3A1%7D&limit=5&page_token=p1",
		"filter=%7B%22k%22%3A1%7D&limit=4&page_token=p2",
	}
	if got := strings.Join(ids, ","); got != "c9,c3" || fmt.Sprint(queries) != fmt.Sprint(want) {
		t.Errorf("got %s over queries\n%v\nwant c9,c3 over\n%v", got, queries, want)
	}
}

// TestDeleteArtifactByVersion: a whole-name delete the server refuses for
// its chunk references (details delete_by_version) is done version by
// version, oldest first, each under its artifact id and without the key
// given for the whole delete; a version gone meanwhile is no error; an
// expected version that is not the newest is ErrVersionMismatch and deletes
// nothing.
func TestDeleteArtifactByVersion(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	h := func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		key := r.Header.Get("Idempotency-Key")
		if key != "" && key != "kk" {
			key = "random"
		}
		calls = append(calls, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery+" key="+key)
		switch {
		case r.Method == "DELETE" && r.URL.Path == "/v1/tenants/acme/artifacts/big":
			writeError(w, 400, "invalid_argument", "too many chunk references", map[string]any{"delete_by_version": true, "versions": 2, "chunk_refs": 70000})
		case r.Method == "GET" && r.URL.Path == "/v1/tenants/acme/artifacts/big/versions":
			writeJSON(w, 200, map[string]any{"versions": []map[string]any{
				{"artifact_id": "sha256:a1", "name": "big", "version": 1, "created_at": "2025-01-02T03:04:05Z"},
				{"artifact_id": "sha256:a2", "name": "big", "version": 2, "created_at": "2025-01-02T03:04:05Z"},
			}})
		case r.URL.Path == "/v1/tenants/acme/artifacts/big/versions/1":
			w.WriteHeader(204)
		default:
			writeError(w, 404, "not_found", "gone", nil)
		}
	}
	c := newClient(t, serve(t, h).URL)
	if err := c.DeleteArtifact(bg, "acme", "big", nil, client.IdempotencyKey("kk")); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"DELETE /v1/tenants/acme/artifacts/big? key=kk",
		"GET /v1/tenants/acme/artifacts/big/versions? key=",
		"DELETE /v1/tenants/acme/artifacts/big/versions/1?expect_artifact_id=sha256%3Aa1 key=random",
		"DELETE /v1/tenants/acme/artifacts/big/versions/2?expect_artifact_id=sha256%3Aa2 key=random",
	}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("calls\n%v\nwant\n%v", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
	calls = nil
	one := uint64(1)
	if err := c.DeleteArtifact(bg, "acme", "big", &one); !errors.Is(err, client.ErrVersionMismatch) {
		t.Errorf("expecting version 1 of 2: %v, want ErrVersionMismatch", err)
	}
	if len(calls) != 2 {
		t.Errorf("expecting version 1 of 2 made %d calls, want the delete and the listing: %v", len(calls), calls)
	}
}
