package cluster

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Tests of real batond processes: the harness against the server.

// newReal starts a fast cluster of real batond processes, closed (and its
// logs shown, on failure) at the end of the test. BATON_TEST_TLS=1 runs
// every such test with TLS everywhere (Config.TLS).
func newReal(t *testing.T, nodes int) *Cluster {
	t.Helper()
	return newRealTLS(t, nodes, os.Getenv("BATON_TEST_TLS") == "1")
}

func newRealTLS(t *testing.T, nodes int, tls bool) *Cluster {
	t.Helper()
	c, err := New(Config{Binary: needBatond(t), Nodes: nodes, BaseDir: t.TempDir(), Fast: true, StopTimeout: 5 * time.Second, TLS: tls})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if t.Failed() {
			for i := range c.Size() {
				t.Logf("last lines of %s:\n%s", c.LogPath(i), c.LogTail(i, 40))
			}
		}
	})
	if err := c.Start(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return c
}

// putTenant creates a tenant through node i, retrying while the cluster
// answers 503 (as a client would after a leader change), and returns the
// write's index.
func putTenant(t *testing.T, c *Cluster, i int, tenant string) uint64 {
	t.Helper()
	var idx uint64
	err := poll(ctxFor(t, 10*time.Second), "PUT tenant "+tenant, func(ctx context.Context) (bool, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.URL(i)+"/v1/tenants/"+tenant, nil)
		if err != nil {
			return false, "", err
		}
		req.Header.Set("Authorization", "Bearer "+c.AdminToken())
		resp, err := c.client.Do(req)
		if err != nil {
			return false, err.Error(), nil
		}
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusServiceUnavailable:
			return false, "503 from " + c.ID(i), nil
		case http.StatusCreated, http.StatusOK:
		default:
			return false, "", fmt.Errorf("via %s: got %s, want 201 or 200", c.ID(i), resp.Status)
		}
		idx, err = strconv.ParseUint(resp.Header.Get("X-Baton-Index"), 10, 64)
		return err == nil, "", err
	})
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func waitLeader(t *testing.T, c *Cluster, among ...int) int {
	t.Helper()
	l, err := c.WaitLeader(ctxFor(t, 10*time.Second), among...)
	if err != nil {
		t.Fatalf("WaitLeader: %v", err)
	}
	return l
}

// waitConverged waits until every node reports the same applied index and
// digest at atLeast or later: just after a restart all nodes agree at 0,
// before they replay their logs, which is convergence but not the one
// wanted.
func waitConverged(t *testing.T, c *Cluster, atLeast uint64) uint64 {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	for {
		idx, err := c.WaitConverged(ctx)
		if err != nil {
			t.Fatalf("WaitConverged (want applied_index >= %d): %v", atLeast, err)
		}
		if idx >= atLeast {
			return idx
		}
		select {
		case <-ctx.Done():
			t.Fatalf("converged at applied_index %d, want >= %d", idx, atLeast)
		case <-time.After(PollInterval):
		}
	}
}

func others(c *Cluster, not int) []int {
	var idx []int
	for i := range c.Size() {
		if i != not {
			idx = append(idx, i)
		}
	}
	return idx
}

// TestLeaderKillFailoverAndRestart: kill the leader, a new one is elected
// within 2 s, writes go on, and the old leader catches up on restart.
func TestLeaderKillFailoverAndRestart(t *testing.T) {
	c := newReal(t, 3)
	old := waitLeader(t, c)
	for i := range c.Size() {
		if err := c.WaitReady(ctxFor(t, 10*time.Second), i); err != nil {
			t.Fatalf("WaitReady(%s): %v", c.ID(i), err)
		}
	}
	waitConverged(t, c, putTenant(t, c, old, "before"))

	if err := c.Kill(old); err != nil {
		t.Fatalf("Kill(%s): %v", c.ID(old), err)
	}
	killed := time.Now()
	leader := waitLeader(t, c)
	if took := time.Since(killed); took > 2*time.Second {
		t.Errorf("new leader after %v, want within 2s", took)
	}
	if leader == old {
		t.Fatalf("WaitLeader = killed node %s", c.ID(old))
	}
	t.Logf("leader %s killed, %s elected in %v", c.ID(old), c.ID(leader), time.Since(killed))

	during := putTenant(t, c, others(c, old)[0], "during")
	if err := c.Restart(ctxFor(t, 10*time.Second), old); err != nil {
		t.Fatalf("Restart(%s): %v", c.ID(old), err)
	}
	waitConverged(t, c, during)
	waitLeader(t, c) // all three, the restarted one included, agree
	st, err := c.Status(ctxFor(t, 5*time.Second), old)
	if err != nil {
		t.Fatalf("Status(%s): %v", c.ID(old), err)
	}
	if st.NodeID != c.ID(old) || len(st.Members) != 3 {
		t.Errorf("restarted node: node_id %q with %d members, want %s with 3", st.NodeID, len(st.Members), c.ID(old))
	}
}

// TestPausedFollowerAndCleanRestart: a paused follower does not stop
// progress and catches up when resumed; a SIGTERMed one resumes its data.
func TestPausedFollowerAndCleanRestart(t *testing.T) {
	c := newReal(t, 3)
	leader := waitLeader(t, c)
	f := others(c, leader)[0]
	if err := c.Pause(f); err != nil {
		t.Fatalf("Pause(%s): %v", c.ID(f), err)
	}
	idx := putTenant(t, c, leader, "while-paused")
	if got := waitLeader(t, c, others(c, f)...); got != leader {
		t.Logf("leader moved from %s to %s while %s was paused", c.ID(leader), c.ID(got), c.ID(f))
	}
	if err := c.Resume(f); err != nil {
		t.Fatalf("Resume(%s): %v", c.ID(f), err)
	}
	idx = waitConverged(t, c, idx)

	if err := c.StopNode(f); err != nil {
		t.Fatalf("StopNode(%s): %v", c.ID(f), err)
	}
	if err := c.Restart(ctxFor(t, 10*time.Second), f); err != nil {
		t.Fatalf("Restart(%s): %v", c.ID(f), err)
	}
	waitConverged(t, c, idx)
	select {
	case e := <-c.Exits():
		t.Errorf("unexpected exit: %v", e)
	default:
	}
}

// TestWipeAndRejoin: a follower that lost its data comes back through
// --join and receives the whole state.
func TestWipeAndRejoin(t *testing.T) {
	c := newReal(t, 3)
	leader := waitLeader(t, c)
	f := others(c, leader)[0]
	idx := putTenant(t, c, leader, "before-wipe")
	waitConverged(t, c, idx)
	if err := c.Wipe(f); err != nil {
		t.Fatalf("Wipe(%s): %v", c.ID(f), err)
	}
	idx = putTenant(t, c, leader, "after-wipe")
	if err := c.StartJoin(ctxFor(t, 10*time.Second), f, c.URL(leader)); err != nil {
		t.Fatalf("StartJoin(%s): %v", c.ID(f), err)
	}
	waitConverged(t, c, idx)
	if err := c.WaitReady(ctxFor(t, 10*time.Second), f); err != nil {
		t.Fatalf("WaitReady(%s): %v", c.ID(f), err)
	}
}

// TestStopAndStartWholeCluster: a full clean stop and start resumes the
// same data on the same ports.
func TestStopAndStartWholeCluster(t *testing.T) {
	c := newReal(t, 3)
	leader := waitLeader(t, c)
	idx := putTenant(t, c, leader, "kept")
	waitConverged(t, c, idx)
	endpoints := fmt.Sprint(c.Endpoints())
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := c.Start(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Start again: %v", err)
	}
	if got := fmt.Sprint(c.Endpoints()); got != endpoints {
		t.Errorf("endpoints after restart %s, want %s", got, endpoints)
	}
	waitLeader(t, c)
	waitConverged(t, c, idx)
}

// TestTLSRejoinAndRestart: a TLS cluster (certificates made by Start):
// https endpoints, a wiped follower rejoins through --join over mutual
// TLS, and a full stop and start keeps the same certificates.
func TestTLSRejoinAndRestart(t *testing.T) {
	c := newRealTLS(t, 3, true)
	if !strings.HasPrefix(c.URL(0), "https://") || c.CAFile() != filepath.Join(c.TLSDir(), "ca.pem") {
		t.Fatalf("URL %s, CA %q: want https and the CA in %s", c.URL(0), c.CAFile(), c.TLSDir())
	}
	ca, err := os.ReadFile(c.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	leader := waitLeader(t, c)
	f := others(c, leader)[0]
	idx := putTenant(t, c, leader, "before-wipe")
	waitConverged(t, c, idx)
	if err := c.Wipe(f); err != nil {
		t.Fatalf("Wipe(%s): %v", c.ID(f), err)
	}
	idx = putTenant(t, c, leader, "after-wipe")
	if err := c.StartJoin(ctxFor(t, 10*time.Second), f, c.URL(leader)); err != nil {
		t.Fatalf("StartJoin(%s): %v", c.ID(f), err)
	}
	waitConverged(t, c, idx)
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := c.Start(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Start again: %v", err)
	}
	waitLeader(t, c)
	waitConverged(t, c, idx)
	if again, err := os.ReadFile(c.CAFile()); err != nil || string(again) != string(ca) {
		t.Errorf("the CA changed across a restart (%v)", err)
	}
}
