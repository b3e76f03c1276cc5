package client_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/internal/clustertest"
)

// TestCheckpointListFollowsPageTokens: a server page that ends at its walk
// bound with few or no matches carries a next_page_token; ListCheckpoints
// follows it (with the limit still wanted, page_token instead of before)
// until it has Limit matches or a page has no token.
//
// A stub: a real page ends at the walk bound after 10,000 checkpoint
// records (fsm.MaxListWalk), more than a unit test should write.
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
// nothing. The artifact is the node's: 66 versions of 1,000 references
// each to one chunk, over the 65,536 one delete releases.
func TestDeleteArtifactByVersion(t *testing.T) {
	ctx := ctxTimeout(t, time.Minute)
	admin := newClient(t, env.URL())
	const versions, refs = 66, 1000
	publish := func(name string, n int) []string {
		t.Helper()
		d := client.Digest([]byte("x"))
		if _, err := admin.PutChunk(ctx, "acme", d, []byte("x")); err != nil {
			t.Fatal(err)
		}
		chunks := make([]client.ChunkRef, refs)
		for i := range chunks {
			chunks[i] = client.ChunkRef{Digest: d, Size: 1}
		}
		whole := client.Digest(bytes.Repeat([]byte("x"), refs))
		var ids []string
		for v := range n {
			m, err := admin.PublishArtifact(ctx, "acme", name, client.PublishRequest{Chunks: chunks, Digest: whole, Size: refs,
				Metadata: json.RawMessage(fmt.Sprintf(`{"v":%d}`, v))})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, m.ArtifactID)
		}
		return ids
	}
	name := uniqueName("big")
	ids := publish(name, versions)
	var goneOnce sync.Once
	p := proxy(t, func(_ int, r *http.Request) clustertest.Hop {
		if r.Method == http.MethodDelete && strings.HasSuffix(r.URL.Path, "/versions/1") {
			// The last version goes meanwhile, under another client.
			goneOnce.Do(func() {
				if err := admin.DeleteArtifactVersion(ctx, "acme", name, versions, ""); err != nil {
					t.Error(err)
				}
			})
		}
		return clustertest.Hop{}
	})
	c := newClient(t, p.URL)
	if err := c.DeleteArtifact(ctx, "acme", name, nil, client.IdempotencyKey("kk-"+name)); err != nil {
		t.Fatal(err)
	}
	calls := func() []string {
		var out []string
		for _, r := range p.Requests() {
			key := r.Key
			if key != "" && key != "kk-"+name {
				key = "random"
			}
			out = append(out, r.Method+" "+r.Path+"?"+r.Query+" key="+key)
		}
		return out
	}
	want := []string{
		"DELETE /v1/tenants/acme/artifacts/" + name + "? key=kk-" + name,
		"GET /v1/tenants/acme/artifacts/" + name + "/versions? key=",
	}
	for v := 1; v <= versions; v++ {
		want = append(want, fmt.Sprintf("DELETE /v1/tenants/acme/artifacts/%s/versions/%d?expect_artifact_id=%s key=random",
			name, v, url.QueryEscape(ids[v-1])))
	}
	if got := calls(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("calls\n%v\nwant\n%v", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if list, err := admin.ListVersions(ctx, "acme", name); len(list) != 0 || (err != nil && !errors.Is(err, client.ErrNotFound)) {
		t.Errorf("after the delete: listing versions got %d, %v; want none", len(list), err)
	}

	name = uniqueName("big")
	publish(name, versions)
	before := p.Count()
	one := uint64(1)
	if err := c.DeleteArtifact(ctx, "acme", name, &one); !errors.Is(err, client.ErrVersionMismatch) {
		t.Errorf("expecting version 1 of %d: %v, want ErrVersionMismatch", versions, err)
	}
	// The node refuses the expected version before the references; either
	// way no version is deleted.
	for _, call := range calls()[before:] {
		if strings.HasPrefix(call, "DELETE") && strings.Contains(call, "/versions/") {
			t.Errorf("expecting version 1 of %d sent %s", versions, call)
		}
	}
	if list, err := admin.ListVersions(ctx, "acme", name); err != nil || len(list) != versions {
		t.Errorf("after the refused delete: %d versions, %v; want all %d", len(list), err, versions)
	}
}
