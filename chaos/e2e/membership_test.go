package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/chaos/faults"
	"github.com/baton-dev/baton/client"
)

// TestRemovedMemberThatMissedItsRemoval: a member that never receives the
// configuration entry removing it (hashicorp/raft's last append to it is
// best effort; here its Raft links to the leader are cut while the
// removal commits) still learns of the removal from the leader over HTTP
// and refuses to serve, and serves again once it is added back.
func TestRemovedMemberThatMissedItsRemoval(t *testing.T) {
	c := startCluster(t, 3, "--failpoints")
	ctx := ctxFor(t, 90*time.Second)
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gone := (leader + 1) % 3
	admin := nodeClient(t, c, leader, c.AdminToken())
	if _, err := admin.PutTenant(ctx, "before-removal"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitConverged(ctxFor(t, 15*time.Second)); err != nil {
		t.Fatal(err)
	}
	net := faults.Net{C: c}
	if err := net.CutBoth(ctx, leader, gone); err != nil {
		t.Fatal(err)
	}
	// Once gone has lost the leader, nothing of the removal can reach it.
	waitFor(t, 10*time.Second, c.ID(gone)+" to know no leader", func() bool {
		_, err := c.AdminCall(ctx, gone, "GET", "/readyz", nil)
		return err != nil && strings.Contains(err.Error(), "no known leader")
	})
	if err := admin.RemoveMember(ctx, c.ID(gone)); err != nil {
		t.Fatalf("RemoveMember(%s): %v", c.ID(gone), err)
	}
	// Raft is still cut both ways: only the leader's answer over HTTP
	// can tell gone that it was removed.
	staleRead := func(ctx context.Context) error {
		_, err := c.AdminCall(ctx, gone, "GET", "/v1/tenants?consistency=stale", nil)
		return err
	}
	waitFor(t, 15*time.Second, c.ID(gone)+" refusing a stale read as removed", func() bool {
		last := staleRead(ctx)
		return last != nil && strings.Contains(last.Error(), "503") && strings.Contains(last.Error(), `"reason":"removed"`)
	})
	if _, err := c.AdminCall(ctx, gone, "GET", "/readyz", nil); err == nil || !strings.Contains(err.Error(), "removed") {
		t.Errorf("/readyz of the removed %s: %v, want 503 naming the removal", c.ID(gone), err)
	}
	if _, err := admin.PutTenant(ctx, "after-removal"); err != nil {
		t.Fatal(err)
	}
	if err := net.Heal(ctx); err != nil {
		t.Fatal(err)
	}

	// Added back, it hears from the leader again, asks it, and serves once
	// the leader's committed configuration lists it.
	if err := admin.AddMember(ctx, client.Member{ID: c.ID(gone), RaftAddr: c.RaftAddr(gone), HTTPAddr: c.HTTPAddr(gone), Voter: true}); err != nil {
		t.Fatalf("AddMember(%s): %v", c.ID(gone), err)
	}
	if err := c.WaitReady(ctxFor(t, 20*time.Second), gone); err != nil {
		t.Fatal(err)
	}
	// A write after the configuration entry, which the state machine does
	// not apply, so that every member's applied index meets its commit.
	if _, err := admin.PutTenant(ctx, "after-add"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitConverged(ctxFor(t, 15*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := staleRead(ctx); err != nil {
		t.Errorf("stale read on %s after it was added back: %v", c.ID(gone), err)
	}
}
