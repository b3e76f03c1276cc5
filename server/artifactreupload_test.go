package server

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"

	"github.com/baton-dev/baton/server/core/chunkstore"
)

// TestChunkCopiesAndUnchangedRepublish: a chunk uploaded to a follower
// reaches every node's store (the peers receive the compressed form the
// follower made, decode and verify it); publishing the content of the
// name's latest version again answers that version without reading the
// chunks: it still does so after every node lost the chunk's file, which
// the publish of new content would have to read.
func TestChunkCopiesAndUnchangedRepublish(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.WaitForLeader(t)
	follower := c.Followers(leader)[0]
	if status, _, body := c.do(t, leader, "PUT", "/v1/tenants/acme", nil, adminAuth()); status != http.StatusCreated {
		t.Fatalf("PUT tenant: got %d %s", status, body)
	}
	c.WaitConverged(t)
	body := bytes.Repeat([]byte("compressible chunk "), 20_000)
	digest := chunkstore.Digest(body)
	if status, _, resp := c.do(t, follower, "PUT", "/v1/tenants/acme/chunks/"+digest, body, adminAuth()); status != http.StatusCreated {
		t.Fatalf("PUT chunk: got %d %s, want 201", status, resp)
	}
	waitFor(t, "every node to hold the chunk", func() string {
		for _, n := range c.nodes {
			if got, err := n.chunks.Get(digest); err != nil || !bytes.Equal(got, body) {
				return fmt.Sprintf("%s: %d bytes, %v", n.id, len(got), err)
			}
		}
		return ""
	})
	manifest := fmt.Sprintf(`{"chunks":[{"digest":%q,"size":%d}],"digest":%q,"size":%d}`,
		digest, len(body), chunkstore.Digest(body), len(body))
	status, _, resp := c.do(t, leader, "POST", "/v1/tenants/acme/artifacts/doc/versions", manifest, adminAuth())
	if status != http.StatusCreated {
		t.Fatalf("publish: got %d %s, want 201", status, resp)
	}
	var first struct {
		Version    uint64 `json:"version"`
		ArtifactID string `json:"artifact_id"`
	}
	decodeBody(t, resp, &first)
	c.WaitConverged(t)
	for _, n := range c.nodes {
		if err := n.chunks.Remove(digest); err != nil {
			t.Fatal(err)
		}
	}
	status, _, resp = c.do(t, leader, "POST", "/v1/tenants/acme/artifacts/doc/versions", manifest, adminAuth())
	if status != http.StatusOK {
		t.Fatalf("publish again: got %d %s, want 200 and the same version", status, resp)
	}
	var again struct {
		Version    uint64 `json:"version"`
		ArtifactID string `json:"artifact_id"`
	}
	decodeBody(t, resp, &again)
	if again != first {
		t.Fatalf("publish again: got %+v, want %+v", again, first)
	}
	// New content over the same chunk is verified, so it reads the chunk:
	// gone everywhere, the publish cannot be checked and is refused.
	other := fmt.Sprintf(`{"chunks":[{"digest":%q,"size":%d},{"digest":%q,"size":%d}],"digest":%q,"size":%d}`,
		digest, len(body), digest, len(body), chunkstore.Digest(append(append([]byte{}, body...), body...)), 2*len(body))
	if status, _, resp := c.do(t, leader, "POST", "/v1/tenants/acme/artifacts/doc/versions", other, adminAuth()); status/100 == 2 {
		t.Fatalf("publish of new content over a lost chunk: got %d %s, want an error", status, resp)
	}
}
