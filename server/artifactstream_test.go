package server

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/baton-dev/baton/server/core/chunkstore"
)

// TestDownloadReadsAheadInOrder: a download, whose chunks are read ahead
// of the one being sent, gives the content in order; when a chunk past the
// first is lost on every node, the body stops short of Content-Length
// before it, and the bytes sent are the content's own.
func TestDownloadReadsAheadInOrder(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.WaitForLeader(t)
	if status, _, body := c.do(t, leader, "PUT", "/v1/tenants/acme", nil, adminAuth()); status != http.StatusCreated {
		t.Fatalf("PUT tenant: got %d %s", status, body)
	}
	var content []byte
	var refs []string
	var chunks [][]byte
	for i := range 12 {
		chunk := bytes.Repeat([]byte(fmt.Sprintf("chunk %02d ", i)), 3000+100*i)
		if status, _, resp := c.do(t, leader, "PUT", "/v1/tenants/acme/chunks/"+chunkstore.Digest(chunk), chunk, adminAuth()); status != http.StatusCreated {
			t.Fatalf("PUT chunk %d: got %d %s", i, status, resp)
		}
		refs = append(refs, fmt.Sprintf(`{"digest":%q,"size":%d}`, chunkstore.Digest(chunk), len(chunk)))
		content = append(content, chunk...)
		chunks = append(chunks, chunk)
	}
	manifest := fmt.Sprintf(`{"chunks":[%s],"digest":%q,"size":%d}`, strings.Join(refs, ","), chunkstore.Digest(content), len(content))
	if status, _, resp := c.do(t, leader, "POST", "/v1/tenants/acme/artifacts/doc/versions", manifest, adminAuth()); status != http.StatusCreated {
		t.Fatalf("publish: got %d %s, want 201", status, resp)
	}
	get := func() (int, []byte, error) {
		req, _ := http.NewRequest("GET", "http://"+c.nodes[leader].httpAddr+"/v1/tenants/acme/artifacts/doc/versions/1/content", nil)
		req.Header.Set("Authorization", adminAuth()["Authorization"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, body, err
	}
	if status, body, err := get(); status != http.StatusOK || err != nil || !bytes.Equal(body, content) {
		t.Fatalf("download: status %d, %d of %d bytes, equal %v, err %v", status, len(body), len(content), bytes.Equal(body, content), err)
	}
	lost := 7
	prefix := len(bytes.Join(chunks[:lost], nil))
	for _, n := range c.nodes {
		if err := n.chunks.Remove(chunkstore.Digest(chunks[lost])); err != nil {
			t.Fatal(err)
		}
	}
	status, body, err := get()
	if status != http.StatusOK || err == nil || len(body) > prefix || !bytes.Equal(body, content[:len(body)]) {
		t.Fatalf("download with chunk %d lost: status %d, %d bytes (the first %d are intact), err %v; want a body cut short at most at byte %d, a prefix of the content",
			lost, status, len(body), prefix, err, prefix)
	}
}
