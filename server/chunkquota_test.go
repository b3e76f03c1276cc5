package server

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/baton-dev/baton/server/core/chunkstore"
)

// TestChunkUploadOverQuotaStoresNothing: an upload that the tenant's quota
// or the cluster's refuses (507 resource_exhausted) is refused before its
// body is stored or copied: no node's chunk store holds it afterwards. An
// upload with room is stored on every node, as before.
func TestChunkUploadOverQuotaStoresNothing(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.WaitForLeader(t)
	follower := c.Followers(leader)[0]
	for _, name := range []string{"full", "roomy"} {
		if status, _, body := c.do(t, leader, "PUT", "/v1/tenants/"+name, nil, adminAuth()); status != http.StatusCreated {
			t.Fatalf("PUT tenant %s: got %d %s, want 201", name, status, body)
		}
	}
	// One byte: the tenant's own record already fills it.
	if status, _, body := c.do(t, leader, "PUT", "/v1/tenants/full/quota", `{"max_bytes":1,"max_keys":0}`, adminAuth()); status != http.StatusOK {
		t.Fatalf("PUT quota: got %d %s, want 200", status, body)
	}
	c.WaitConverged(t) // a node checks the quota against the state it applied
	cases := []struct {
		name, tenant string
		node         int
		wantStatus   int
	}{
		{"over the tenant's quota, on the leader", "full", leader, http.StatusInsufficientStorage},
		{"over the tenant's quota, on a follower", "full", follower, http.StatusInsufficientStorage},
		{"with room", "roomy", follower, http.StatusCreated},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := bytes.Repeat([]byte{byte(i + 1)}, 64<<10)
			digest := chunkstore.Digest(body)
			status, _, resp := c.do(t, tc.node, "PUT", "/v1/tenants/"+tc.tenant+"/chunks/"+digest, body, adminAuth())
			if status != tc.wantStatus {
				t.Fatalf("PUT chunk: got %d %s, want %d", status, resp, tc.wantStatus)
			}
			if status == http.StatusInsufficientStorage && errorCode(resp) != "resource_exhausted" {
				t.Errorf("PUT chunk: got %s, want resource_exhausted", resp)
			}
			for _, n := range c.nodes {
				has := n.chunks.Has(digest)
				switch {
				case status == http.StatusInsufficientStorage && has:
					t.Errorf("%s's chunk store holds the body of a refused upload", n.id)
				case status == http.StatusCreated && n == c.nodes[tc.node] && !has:
					t.Errorf("%s's chunk store lacks the body it accepted", n.id)
				}
			}
		})
	}
}
