package server

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"

	"github.com/baton-dev/baton/server/core/chunkstore"
)

// TestChunkCopiesAndUnchangedRepublish: a chunk uploaded to a follower
// reaches every node's store (with --chunk-compression zstd, the peers
// receive the compressed form the follower made, decode and verify it);
// publishing the content of the
// name's latest version again answers that version without reading the
// chunks: it still does so after every node lost the chunk's file, which
// the publish of new content would have to read.
func TestChunkCopiesAndUnchangedRepublish(t *testing.T) {
	c := newCluster(t, 3, func(c *testCluster) { c.chunkCompression = chunkstore.CompressionZstd })
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

// TestPublishFindsACorruptCopy: a publish hashes the chunks' bytes once,
// unverified; when the whole does not hash to the manifest's digest it
// reads them again verified. A corrupt copy on the node that checks is
// then found, fetched again from a peer, and the publish goes through
// with this node's copy repaired; a manifest whose digest is not its
// chunks' content is still refused. Copies of the wrong size are judged by
// the verified pass too, even when together they hash right.
func TestPublishFindsACorruptCopy(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.WaitForLeader(t)
	if status, _, body := c.do(t, leader, "PUT", "/v1/tenants/acme", nil, adminAuth()); status != http.StatusCreated {
		t.Fatalf("PUT tenant: got %d %s", status, body)
	}
	c.WaitConverged(t)
	parts := [][]byte{bytes.Repeat([]byte("first chunk "), 10_000), bytes.Repeat([]byte("second chunk "), 10_000)}
	var refs []string
	for _, b := range parts {
		d := chunkstore.Digest(b)
		if status, _, resp := c.do(t, leader, "PUT", "/v1/tenants/acme/chunks/"+d, b, adminAuth()); status != http.StatusCreated {
			t.Fatalf("PUT chunk: got %d %s, want 201", status, resp)
		}
		refs = append(refs, fmt.Sprintf(`{"digest":%q,"size":%d}`, d, len(b)))
	}
	whole := append(append([]byte{}, parts[0]...), parts[1]...)
	second := chunkstore.Digest(parts[1])
	waitFor(t, "every node to hold the chunks", func() string {
		for _, n := range c.nodes {
			if !n.chunks.Has(second) {
				return n.id + " lacks the second chunk"
			}
		}
		return ""
	})
	// The same length, other bytes: only a hash tells them apart.
	bad := bytes.Repeat([]byte("SECOND CHUNK "), 10_000)
	if err := c.nodes[leader].chunks.PutEncodedVerified(second, append([]byte{0}, bad...)); err != nil {
		t.Fatal(err)
	}
	wrong := fmt.Sprintf(`{"chunks":[%s,%s],"digest":%q,"size":%d}`, refs[0], refs[1], chunkstore.Digest(parts[0]), len(whole))
	status, _, resp := c.do(t, leader, "POST", "/v1/tenants/acme/artifacts/doc/versions", wrong, adminAuth())
	if status != http.StatusBadRequest || !bytes.Contains(resp, []byte(codeDigestMismatch)) {
		t.Fatalf("publish with the wrong digest: got %d %s, want 400 %s", status, resp, codeDigestMismatch)
	}
	if err := c.nodes[leader].chunks.PutEncodedVerified(second, append([]byte{0}, bad...)); err != nil {
		t.Fatal(err)
	}
	manifest := fmt.Sprintf(`{"chunks":[%s,%s],"digest":%q,"size":%d}`, refs[0], refs[1], chunkstore.Digest(whole), len(whole))
	if status, _, resp := c.do(t, leader, "POST", "/v1/tenants/acme/artifacts/doc/versions", manifest, adminAuth()); status != http.StatusCreated {
		t.Fatalf("publish over a corrupt copy: got %d %s, want 201", status, resp)
	}
	if got, err := c.nodes[leader].chunks.Get(second); err != nil || !bytes.Equal(got, parts[1]) {
		t.Fatalf("the leader's copy after the publish: %d bytes, %v; want the chunk repaired", len(got), err)
	}
	// The boundary between the two copies moved by a byte: together they
	// still hash to the content's digest, but neither is its chunk; the
	// sizes send the publish to the verified pass, which repairs both.
	first := chunkstore.Digest(parts[0])
	cut := len(parts[0]) - 1
	if err := c.nodes[leader].chunks.PutEncodedVerified(first, append([]byte{0}, parts[0][:cut]...)); err != nil {
		t.Fatal(err)
	}
	if err := c.nodes[leader].chunks.PutEncodedVerified(second, append(append([]byte{0}, parts[0][cut:]...), parts[1]...)); err != nil {
		t.Fatal(err)
	}
	if status, _, resp := c.do(t, leader, "POST", "/v1/tenants/acme/artifacts/moved/versions", manifest, adminAuth()); status != http.StatusCreated {
		t.Fatalf("publish over copies with a moved boundary: got %d %s, want 201", status, resp)
	}
	for i, d := range []string{first, second} {
		if got, err := c.nodes[leader].chunks.Get(d); err != nil || !bytes.Equal(got, parts[i]) {
			t.Fatalf("the leader's copy of chunk %d after the publish: %d bytes, %v; want it repaired", i, len(got), err)
		}
	}
	// A verified copy of another size than the manifest's ends the check:
	// a manifest naming one chunk many times with a size of 1 reads one
	// (before, the verified pass read and hashed every one: 11,000 names of
	// a 4 MiB chunk in a 1 MiB manifest, 45 GiB).
	small := fmt.Sprintf(`{"digest":%q,"size":1}`, first)
	thrice := fmt.Sprintf(`{"chunks":[%s,%s,%s],"digest":%q,"size":3}`, small, small, small, first)
	status, _, resp = c.do(t, leader, "POST", "/v1/tenants/acme/artifacts/lies/versions", thrice, adminAuth())
	if want := fmt.Sprintf("chunks[0] has size 1, the chunk holds %d bytes", len(parts[0])); status != http.StatusBadRequest || !bytes.Contains(resp, []byte(want)) {
		t.Fatalf("publish naming a chunk with the wrong size: got %d %s, want 400 %q", status, resp, want)
	}
}
