package client_test

import (
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
