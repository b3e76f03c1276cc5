package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/cmd/batond/cluster"
)

// Black-box tests of retention and queue statistics (docs/api.md
// "Retention", "Queues") against real clusters.

// TestRetentionDoneTaskDisappearsOnEveryNode: a done task of a queue with
// a retention period is deleted on every node once the period has passed,
// and on none before: a node's own (stale) read that finds it gone
// answered no earlier than its expires_at (the purge is stamped with the
// leader's clock, which on loopback is this machine's). A done task of a
// queue without retention stays.
func TestRetentionDoneTaskDisappearsOnEveryNode(t *testing.T) {
	c := startCluster(t, 3)
	ctx := ctxFor(t, 60*time.Second)
	admin := tasksAdmin(t, ctx, c)
	const period = 3 * time.Second
	if _, err := admin.SetQueuePolicy(ctx, tasksTenant, "ret", client.QueuePolicy{Retention: period}); err != nil {
		t.Fatal(err)
	}
	tasksCreate(t, ctx, admin, "r1", "ret")
	tasksCreate(t, ctx, admin, "keep", "plain")
	claimed, err := admin.ClaimQueue(ctx, tasksTenant, "ret", client.QueueClaimRequest{Owner: "w", Lease: time.Minute})
	if err != nil || claimed == nil {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	done := "done"
	finished, err := admin.UpdateTask(ctx, tasksTenant, "r1", client.UpdateTaskRequest{FencingToken: &claimed.FencingToken,
		Status: &done, Release: ptrTo(true)})
	if err != nil {
		t.Fatal(err)
	}
	if finished.ExpiresAt == nil || !finished.ExpiresAt.Equal(finished.UpdatedAt.Add(period)) {
		t.Fatalf("done task: expires_at %v, want updated_at %v + %v", finished.ExpiresAt, finished.UpdatedAt, period)
	}
	if _, err := admin.UpdateTask(ctx, tasksTenant, "keep", client.UpdateTaskRequest{Status: &done}); err != nil {
		t.Fatal(err)
	}
	expires := *finished.ExpiresAt

	nodes := []*client.Client{tasksNodeClient(t, c, 0), tasksNodeClient(t, c, 1), tasksNodeClient(t, c, 2)}
	gone := make([]bool, len(nodes))
	sawPresent := make([]bool, len(nodes))
	deadline := expires.Add(20 * time.Second)
	for remaining := len(nodes); remaining > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("20s past its expiry the task is still on some node (gone: %v)", gone)
		}
		for i, n := range nodes {
			if gone[i] {
				continue
			}
			_, err := n.GetTask(ctx, tasksTenant, "r1", client.Stale())
			answered := time.Now()
			switch {
			case err == nil:
				sawPresent[i] = true
			case errors.Is(err, client.ErrNotFound):
				if answered.Before(expires) {
					t.Fatalf("node %d: the task was gone at %v, before its expiry %v", i, answered, expires)
				}
				gone[i] = true
				remaining--
			default:
				t.Fatalf("node %d: %v", i, err)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i, n := range nodes {
		if !sawPresent[i] {
			t.Errorf("node %d never showed the task before it expired", i)
		}
		if _, err := n.GetTask(ctx, tasksTenant, "keep", client.Stale()); err != nil {
			t.Errorf("node %d: the task without retention: %v", i, err)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestQueueStatsAgreeWithListingUnderConcurrentClaims: while workers claim
// and finish or fail tasks through every node, the queue's statistics and
// a full listing of its tasks read at the same index agree; once they
// stop, every node gives the same figures, whose claims per minute is the
// number of claims made.
func TestQueueStatsAgreeWithListingUnderConcurrentClaims(t *testing.T) {
	c := startCluster(t, 3)
	ctx := ctxFor(t, 90*time.Second)
	admin := tasksAdmin(t, ctx, c)
	const queue, tasks, delayed = "qs", 60, 5
	for i := range tasks {
		req := client.CreateTaskRequest{TaskID: fmt.Sprintf("s%02d", i), Queue: queue, MaxAttempts: 2,
			BackoffInitial: 200 * time.Millisecond, BackoffMax: 200 * time.Millisecond}
		if i < delayed {
			req.Delay = time.Hour
		}
		if _, err := admin.CreateTask(ctx, tasksTenant, req); err != nil {
			t.Fatal(err)
		}
	}
	nodes := []*client.Client{tasksNodeClient(t, c, 0), tasksNodeClient(t, c, 1), tasksNodeClient(t, c, 2)}

	var claims atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			n := nodes[w%3]
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				task, err := n.ClaimQueue(ctx, tasksTenant, queue, client.QueueClaimRequest{Owner: fmt.Sprintf("w%d", w),
					Lease: time.Minute, Wait: 200 * time.Millisecond})
				if err != nil {
					t.Errorf("worker %d: claim: %v", w, err)
					return
				}
				if task == nil {
					continue
				}
				claims.Add(1)
				if k%3 == 0 { // fail it: back later, or dead on its second attempt
					_, err = n.FailTask(ctx, tasksTenant, task.TaskID, client.FailTaskRequest{FencingToken: task.FencingToken, Error: "x"})
				} else {
					done := "done"
					_, err = n.UpdateTask(ctx, tasksTenant, task.TaskID, client.UpdateTaskRequest{FencingToken: &task.FencingToken,
						Status: &done, Release: ptrTo(true)})
				}
				if err != nil {
					t.Errorf("worker %d: finish %s: %v", w, task.TaskID, err)
					return
				}
			}
		})
	}

	// While they work: pairs read at the same index agree.
	matched := 0
	for try := 0; (matched < 5 || claims.Load() < 40) && try < 2000 && !t.Failed(); try++ {
		if ok := compareStatsWithListing(t, ctx, admin, queue, false); ok {
			matched++
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d reads at one index while %d claims were made", matched, claims.Load())
	if matched < 5 {
		t.Fatalf("only %d reads of the statistics and the listing at the same index while claims ran", matched)
	}

	// Quiet: the same figures on every node, claims per minute included.
	index := waitSameIndex(t, ctx, c, admin)
	var first *client.QueueStats
	for i := range nodes {
		var m client.Meta
		st, err := nodes[i].GetQueueStats(ctx, tasksTenant, queue, client.Stale(), client.CaptureMeta(&m))
		if err != nil || m.Index != index {
			t.Fatalf("node %d: %v at index %d, want %d", i, err, m.Index, index)
		}
		if first == nil {
			first = st
			continue
		}
		if st.Tasks != first.Tasks || !maps.Equal(st.ByStatus, first.ByStatus) || st.Waiting != first.Waiting ||
			st.DueLater != first.DueLater || st.ClaimsPerMinute != first.ClaimsPerMinute || !st.AsOf.Equal(first.AsOf) {
			t.Fatalf("node %d: %+v, node 0: %+v", i, st, first)
		}
	}
	// The delayed tasks, and those failed last (back after their backoff).
	if first.ClaimsPerMinute != claims.Load() || first.DueLater < delayed || first.Tasks != tasks {
		t.Fatalf("final stats %+v; %d claims made, %d tasks, %d delayed", first, claims.Load(), tasks, delayed)
	}
	if !compareStatsWithListing(t, ctx, admin, queue, true) {
		t.Fatal("the quiet cluster's statistics and listing were read at different indexes")
	}
	list, err := admin.ListQueues(ctx, tasksTenant, client.ListQueuesOptions{})
	if err != nil || len(list.Queues) != 1 || list.Queues[0].Queue != queue || list.Queues[0].Tasks != tasks {
		t.Fatalf("ListQueues: %+v %v", list, err)
	}
}

// compareStatsWithListing reads the queue's statistics, then every task
// of the queue, then the statistics again; if the three were answered at
// the same index (no write between them), it checks the figures against
// the listing and reports true.
func compareStatsWithListing(t *testing.T, ctx context.Context, cl *client.Client, queue string, must bool) bool {
	t.Helper()
	var m1, m2, m3 client.Meta
	st, err := cl.GetQueueStats(ctx, tasksTenant, queue, client.CaptureMeta(&m1))
	if err != nil {
		t.Fatal(err)
	}
	list, err := cl.ListTasks(ctx, tasksTenant, client.ListTasksOptions{Queue: queue, Limit: 1000}, client.CaptureMeta(&m2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.GetQueueStats(ctx, tasksTenant, queue, client.CaptureMeta(&m3)); err != nil {
		t.Fatal(err)
	}
	if m1.Index != m2.Index || m2.Index != m3.Index {
		if must {
			t.Errorf("indexes %d, %d, %d", m1.Index, m2.Index, m3.Index)
		}
		return false
	}
	byStatus := map[string]int64{}
	var waiting, dueLater int64
	var oldest *time.Time
	for _, task := range list.Tasks {
		byStatus[task.Status]++
		if task.Status != "pending" || task.Owner != "" || task.LeaseUntil != nil {
			continue
		}
		waiting++
		since := task.CreatedAt
		if task.AvailableAt != nil {
			since = *task.AvailableAt
		}
		if since.After(st.AsOf) {
			dueLater++
		} else if oldest == nil || since.Before(*oldest) {
			oldest = &since
		}
	}
	if st.Tasks != int64(len(list.Tasks)) || !maps.Equal(st.ByStatus, byStatus) || st.Waiting != waiting ||
		st.DueLater != dueLater || st.Dead != byStatus["dead"] ||
		(oldest == nil) != (st.OldestPendingAt == nil) || (oldest != nil && !oldest.Equal(*st.OldestPendingAt)) {
		t.Fatalf("at index %d: stats %+v; the listing says %d tasks %v, %d waiting, %d due later, oldest %v",
			m1.Index, st, len(list.Tasks), byStatus, waiting, dueLater, oldest)
	}
	return true
}

// waitSameIndex waits until every node has applied the same index, and
// returns it.
func waitSameIndex(t *testing.T, ctx context.Context, c *cluster.Cluster, cl *client.Client) uint64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var idx []uint64
		for i := range 3 {
			st, err := cl.ClusterAt(ctx, c.URL(i))
			if err != nil {
				t.Fatal(err)
			}
			idx = append(idx, st.AppliedIndex)
		}
		if idx[0] == idx[1] && idx[1] == idx[2] {
			return idx[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes did not converge: applied %v", idx)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
