package server

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/baton-dev/baton/fsm/wire"
)

// GET /v1/internal/configuration: the leader answers as the leader, a
// follower as a follower, each with every member; a tenant's
// principal, even with an admin grant, is refused.
func TestInternalConfiguration(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.WaitForLeader(t)
	var ids []string
	for _, tn := range c.nodes {
		ids = append(ids, tn.id)
	}
	slices.Sort(ids)
	for i := range c.nodes {
		status, _, body := c.do(t, i, "GET", "/v1/internal/configuration", nil, adminAuth())
		if status != http.StatusOK {
			t.Fatalf("%s: got %d %s, want 200", c.nodes[i].id, status, body)
		}
		var conf wire.Configuration
		decodeBody(t, body, &conf)
		want := wire.Configuration{NodeID: c.nodes[i].id, Leader: i == leader, Servers: ids}
		slices.Sort(conf.Servers)
		if conf.NodeID != want.NodeID || conf.Leader != want.Leader || !slices.Equal(conf.Servers, want.Servers) {
			t.Errorf("%s: got %+v, want %+v", c.nodes[i].id, conf, want)
		}
	}
	if status, _, body := c.do(t, leader, "PUT", "/v1/tenants/acme", nil, adminAuth()); status != http.StatusCreated {
		t.Fatalf("PUT /v1/tenants/acme: got %d %s", status, body)
	}
	status, _, resp := c.do(t, leader, "POST", "/v1/tenants/acme/principals",
		`{"name":"ops","grants":[{"resource":"admin","prefix":"","actions":["read","write","delete"]}]}`, adminAuth())
	if status != http.StatusCreated {
		t.Fatalf("POST principal: got %d %s", status, resp)
	}
	var p wire.PrincipalWithToken
	decodeBody(t, resp, &p)
	if status, _, body := c.do(t, leader, "GET", "/v1/internal/configuration", nil, bearer(p.Token)); status != http.StatusForbidden {
		t.Errorf("a tenant admin's token: got %d %s, want 403", status, body)
	}
}

// A leader that holds a word of its removal (taken from a leader whose
// removal of it was never committed, or before it was added back) reads
// its own configuration, which lists it, and serves again: asked over
// HTTP, it would refuse itself as removed and keep leading a cluster
// that refuses every request.
func TestLeaderForgetsARemovalItsConfigurationDenies(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.WaitForLeader(t)
	c.nodes[leader].node.LearnRemoval()
	if !c.nodes[leader].node.Removed() {
		t.Fatal("LearnRemoval: the node does not count itself removed")
	}
	follower := c.Followers(leader)[0]
	i := 0
	waitFor(t, "the leader to serve again", func() string {
		i++
		status, _, body := c.do(t, follower, "PUT", fmt.Sprintf("/v1/tenants/t%d", i), nil, adminAuth())
		if status != http.StatusCreated || c.Leader() != leader || c.nodes[leader].node.Removed() {
			return fmt.Sprintf("a write through a follower got %d %s; leader %d (was %d), removed %v",
				status, body, c.Leader(), leader, c.nodes[leader].node.Removed())
		}
		return ""
	})
}
