package runner

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/cmd/batond/cluster"
)

// Regressions: product bugs the chaos suite found, each pinned by the
// smallest deterministic reproduction; chaos/README.md lists them with the
// seed of the run that found them.

// startTestCluster starts a fast three-node cluster for a regression test.
func startTestCluster(t *testing.T) (*cluster.Cluster, *client.Client) {
	t.Helper()
	c, err := cluster.New(cluster.Config{Binary: needBatond(t), BaseDir: t.TempDir(), Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i := range c.Size() {
				t.Logf("--- log of %s:\n%s", c.ID(i), c.LogTail(i, 30))
			}
		}
		c.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	cl, err := client.New(client.Config{Endpoints: c.Endpoints(), Token: c.AdminToken(), HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	return c, cl
}

// TestRegressionQueueClaimRetryIsReplayed: a queue claim retried with the
// same Idempotency-Key after its first attempt was applied must get the
// first answer again (the task and its token), not 204. Found by seed 16
// of `go run ./chaos/cmd/chaos` (a follower that forwarded the claim was
// killed; the client retried on another node and was told nothing was
// claimable while the task was leased to it).
func TestRegressionQueueClaimRetryIsReplayed(t *testing.T) {
	_, cl := startTestCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cl.PutTenant(ctx, "reg"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateTask(ctx, "reg", client.CreateTaskRequest{TaskID: "only", Queue: "q"}); err != nil {
		t.Fatal(err)
	}
	req := client.QueueClaimRequest{Owner: "w1", Lease: 60 * time.Second}
	key := client.IdempotencyKey("queue-claim-retry")
	first, err := cl.ClaimQueue(ctx, "reg", "q", req, key)
	if err != nil || first == nil {
		t.Fatalf("first claim: got %v, %v; want the task", first, err)
	}
	// The answer to the first attempt is lost; the client retries.
	var meta client.Meta
	again, err := cl.ClaimQueue(ctx, "reg", "q", req, key, client.CaptureMeta(&meta))
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if again == nil {
		t.Fatalf("retry with the same Idempotency-Key: got %d (nothing claimable), want the first answer replayed: task %s, token %d",
			meta.Status, first.TaskID, first.FencingToken)
	}
	if again.TaskID != first.TaskID || again.FencingToken != first.FencingToken || !meta.Replay {
		t.Errorf("retry: got task %s token %d replay=%v, want task %s token %d replayed",
			again.TaskID, again.FencingToken, meta.Replay, first.TaskID, first.FencingToken)
	}
}
