package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/concurrency"
	"github.com/baton-dev/baton/cmd/batond/cluster"
)

// Black-box tests of tasks, fencing tokens, transactions and concurrency.Worker
// against real three-node clusters (docs/api.md "Tasks", "Fencing guards",
// "Transactions").

const tasksTenant = "acme"

// tasksAdmin creates the tenant and returns an admin client over all nodes.
func tasksAdmin(t *testing.T, ctx context.Context, c *cluster.Cluster) *client.Client {
	t.Helper()
	admin := adminClient(t, c)
	if _, err := admin.PutTenant(ctx, tasksTenant); err != nil {
		t.Fatalf("PutTenant: %v", err)
	}
	return admin
}

func tasksCreate(t *testing.T, ctx context.Context, cl *client.Client, id, queue string) *client.Task {
	t.Helper()
	task, err := cl.CreateTask(ctx, tasksTenant, client.CreateTaskRequest{TaskID: id, Queue: queue})
	if err != nil {
		t.Fatalf("CreateTask %s: %v", id, err)
	}
	return task
}

// tasksNodeClient talks to node i only, retrying 503s and refused
// connections for up to 5s (nodeClient makes one attempt). Its idle
// connections are closed before the cluster stops: batond's SIGTERM waits
// up to 5s for connections that never sent a request.
func tasksNodeClient(t *testing.T, c *cluster.Cluster, i int) *client.Client {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = e2eTLSConfig()
	hc := &http.Client{Transport: tr}
	t.Cleanup(hc.CloseIdleConnections)
	cl, err := client.New(client.Config{Endpoints: []string{c.URL(i)}, Token: c.AdminToken(), HTTPClient: hc,
		MaxRetry: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// TestTaskFiftyConcurrentClaims: fifty owners claim one task at once
// through all three nodes; exactly one claim wins and the forty-nine others
// are refused with lease_held, and the task shows the winner.
func TestTaskFiftyConcurrentClaims(t *testing.T) {
	c := startCluster(t, 3)
	ctx := ctxFor(t, 20*time.Second)
	admin := tasksAdmin(t, ctx, c)
	tasksCreate(t, ctx, admin, "contested", "q")
	nodes := []*client.Client{tasksNodeClient(t, c, 0), tasksNodeClient(t, c, 1), tasksNodeClient(t, c, 2)}

	const n = 50
	tasks := make([]*client.Task, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			tasks[i], errs[i] = nodes[i%3].ClaimTask(ctx, tasksTenant, "contested",
				client.ClaimRequest{Owner: fmt.Sprintf("owner-%02d", i), Lease: 60 * time.Second})
		})
	}
	close(start)
	wg.Wait()

	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("claims %d and %d both succeeded (tokens %d, %d)", winner, i, tasks[winner].FencingToken, tasks[i].FencingToken)
		case err == nil:
			winner = i
		case !errors.Is(err, client.ErrLeaseHeld):
			t.Errorf("claim %d through node %d: got %v, want lease_held", i, i%3, err)
		}
	}
	if winner < 0 {
		t.Fatal("no claim succeeded, want exactly one")
	}
	got, err := admin.GetTask(ctx, tasksTenant, "contested")
	if err != nil {
		t.Fatal(err)
	}
	want := tasks[winner]
	if got.Owner != want.Owner || got.FencingToken != want.FencingToken || got.Attempt != 1 || got.Version != 2 {
		t.Errorf("task after the race: got owner %q token %d attempt %d version %d, want %q %d 1 2",
			got.Owner, got.FencingToken, got.Attempt, got.Version, want.Owner, want.FencingToken)
	}
}

// TestTaskStaleWorkerFenced: A's lease runs out without renewal and B
// claims; then A's update, renewal and fenced transaction are all refused
// as fenced, B's work is intact and B's token is larger than A's.
func TestTaskStaleWorkerFenced(t *testing.T) {
	c := startCluster(t, 3)
	ctx := ctxFor(t, 20*time.Second)
	admin := tasksAdmin(t, ctx, c)
	tasksCreate(t, ctx, admin, "job", "q")

	a, err := admin.ClaimTask(ctx, tasksTenant, "job", client.ClaimRequest{Owner: "worker-a", Lease: 300 * time.Millisecond})
	if err != nil {
		t.Fatalf("A claims: %v", err)
	}
	tasksWaitLeaseExpired(t, ctx, admin, "job")
	b, err := admin.ClaimTask(ctx, tasksTenant, "job", client.ClaimRequest{Owner: "worker-b", Lease: 60 * time.Second})
	if err != nil {
		t.Fatalf("B claims after A's lease ran out: %v", err)
	}
	if b.FencingToken <= a.FencingToken {
		t.Fatalf("B's token %d is not larger than A's %d", b.FencingToken, a.FencingToken)
	}
	bWork, err := admin.UpdateTask(ctx, tasksTenant, "job", client.UpdateTaskRequest{FencingToken: &b.FencingToken,
		Status: new("reviewed"), Result: []byte(`{"by":"b"}`)})
	if err != nil {
		t.Fatalf("B's update: %v", err)
	}

	stale := map[string]func() error{
		"update": func() error {
			_, err := admin.UpdateTask(ctx, tasksTenant, "job", client.UpdateTaskRequest{FencingToken: &a.FencingToken,
				Status: new("done"), Result: []byte(`{"by":"a"}`)})
			return err
		},
		"renew": func() error {
			_, err := admin.RenewTask(ctx, tasksTenant, "job", client.RenewRequest{FencingToken: a.FencingToken, Lease: 60 * time.Second})
			return err
		},
		"txn": func() error {
			_, err := admin.Txn(ctx, tasksTenant, []client.TxnOp{client.TxnUpdateTask("job", client.UpdateTaskRequest{
				FencingToken: &a.FencingToken, Result: []byte(`{"by":"a"}`), Release: new(true)})})
			return err
		},
	}
	for name, write := range stale {
		err := write()
		var e *client.Error
		if !errors.Is(err, client.ErrFenced) || !errors.As(err, &e) || e.Status != http.StatusConflict {
			t.Errorf("A's stale %s: got %v, want 409 fenced", name, err)
			continue
		}
		if cur, ok := e.DetailUint("current_token"); !ok || cur != b.FencingToken {
			t.Errorf("A's stale %s: current_token %d (%v), want B's %d", name, cur, ok, b.FencingToken)
		}
	}

	got, err := admin.GetTask(ctx, tasksTenant, "job")
	if err != nil {
		t.Fatal(err)
	}
	if got.Owner != "worker-b" || got.FencingToken != b.FencingToken || got.Status != "reviewed" ||
		string(got.Result) != `{"by":"b"}` || got.Version != bWork.Version {
		t.Errorf("after A's stale writes: got owner %q token %d status %q result %s version %d; want B's: %q %d %q %s %d",
			got.Owner, got.FencingToken, got.Status, got.Result, got.Version,
			"worker-b", b.FencingToken, "reviewed", `{"by":"b"}`, bWork.Version)
	}
}

// tasksWaitLeaseExpired polls the task until its lease_until, stamped by the
// leader, is in the past by this machine's clock (the nodes run here too).
func tasksWaitLeaseExpired(t *testing.T, ctx context.Context, cl *client.Client, id string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		task, err := cl.GetTask(ctx, tasksTenant, id)
		if err != nil {
			t.Fatalf("GetTask %s: %v", id, err)
		}
		if task.LeaseUntil == nil || time.Now().After(*task.LeaseUntil) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease of %s still live 5s later: lease_until %v", id, task.LeaseUntil)
		}
		wait := time.NewTimer(min(time.Until(*task.LeaseUntil)+time.Millisecond, 50*time.Millisecond))
		select {
		case <-ctx.Done():
			wait.Stop()
			t.Fatalf("waiting for the lease of %s to run out: %v", id, ctx.Err())
		case <-wait.C:
		}
	}
}

// tasksTokenLog records every fencing token issued for one task and checks that
// each is larger than all before it.
type tasksTokenLog struct {
	t      *testing.T
	cl     *client.Client
	id     string
	tokens []uint64
}

// claim claims the task (always as the same owner, so a live lease does
// not refuse it) and records the new token.
func (l *tasksTokenLog) claim(ctx context.Context, phase string) {
	l.t.Helper()
	task, err := l.cl.ClaimTask(ctx, tasksTenant, l.id, client.ClaimRequest{Owner: "tokens", Lease: 60 * time.Second})
	if err != nil {
		l.t.Fatalf("%s: claim %d: %v", phase, len(l.tokens)+1, err)
	}
	if n := len(l.tokens); n > 0 && task.FencingToken <= l.tokens[n-1] {
		l.t.Fatalf("%s: claim %d got token %d, not larger than the previous %d (all: %v)",
			phase, n+1, task.FencingToken, l.tokens[n-1], l.tokens)
	}
	l.tokens = append(l.tokens, task.FencingToken)
}

// checkKept asserts the task still carries the last token issued: nothing
// acknowledged was lost.
func (l *tasksTokenLog) checkKept(ctx context.Context, phase string) {
	l.t.Helper()
	task, err := l.cl.GetTask(ctx, tasksTenant, l.id)
	if err != nil {
		l.t.Fatalf("%s: GetTask: %v", phase, err)
	}
	if last := l.tokens[len(l.tokens)-1]; task.FencingToken != last {
		l.t.Fatalf("%s: task carries token %d, want the last issued %d", phase, task.FencingToken, last)
	}
}

// TestTokensStrictlyIncrease: every token issued for one task is larger
// than all before it, across (a) a SIGKILL of the leader and its restart,
// (b) a SIGKILL and restart of every node, (c) a restart of every node
// from snapshots (each node reports restored_snapshot_index > 0).
func TestTokensStrictlyIncrease(t *testing.T) {
	c := startCluster(t, 3, "--snapshot-threshold=32", "--trailing-logs=16", "--snapshot-interval=100ms")
	ctx := ctxFor(t, 40*time.Second)
	admin := tasksAdmin(t, ctx, c)
	tasksCreate(t, ctx, admin, "tok", "q")
	log := &tasksTokenLog{t: t, cl: admin, id: "tok"}
	for range 3 {
		log.claim(ctx, "start")
	}

	// (a) The leader crashes; claims go on through the others, then it
	// comes back.
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		log.claim(ctx, "leader killed")
	}
	if err := c.Restart(ctx, leader); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReady(ctx, leader); err != nil {
		t.Fatal(err)
	}
	log.checkKept(ctx, "leader restarted")
	for range 3 {
		log.claim(ctx, "leader restarted")
	}

	// (b) Every node crashes and restarts.
	tasksRestartAll(t, ctx, c)
	log.checkKept(ctx, "all restarted")
	for range 3 {
		log.claim(ctx, "all restarted")
	}

	// (c) Claim until every node has a snapshot taken after this point,
	// then restart every node: each restores its snapshot.
	from, err := admin.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tasksWaitSnapshots(t, ctx, c, from.CommitIndex, func() { log.claim(ctx, "before snapshots") })
	tasksRestartAll(t, ctx, c)
	for i := range c.Size() {
		st, err := c.Status(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		if st.RestoredSnapshotIndex <= from.CommitIndex {
			t.Fatalf("%s restored snapshot index %d, want one above %d", c.ID(i), st.RestoredSnapshotIndex, from.CommitIndex)
		}
	}
	log.checkKept(ctx, "restored from snapshots")
	for range 3 {
		log.claim(ctx, "restored from snapshots")
	}
	t.Logf("%d tokens, strictly increasing: %v", len(log.tokens), log.tokens)
}

// tasksRestartAll SIGKILLs every node, restarts them and waits for a
// leader and for every node to be ready.
func tasksRestartAll(t *testing.T, ctx context.Context, c *cluster.Cluster) {
	t.Helper()
	for i := range c.Size() {
		if err := c.Kill(i); err != nil {
			t.Fatal(err)
		}
	}
	for i := range c.Size() {
		if err := c.Restart(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range c.Size() {
		if err := c.WaitReady(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
}

// tasksWaitSnapshots calls write until every node reports a snapshot above
// index, at most 15s.
func tasksWaitSnapshots(t *testing.T, ctx context.Context, c *cluster.Cluster, index uint64, write func()) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		behind := []string{}
		for i := range c.Size() {
			st, err := c.Status(ctx, i)
			if err != nil || st.LastSnapshotIndex <= index {
				behind = append(behind, fmt.Sprintf("%s (%v)", c.ID(i), tasksSnapshotOf(st, err)))
			}
		}
		if len(behind) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot above index %d after 15s on %s", index, strings.Join(behind, ", "))
		}
		write()
	}
}

func tasksSnapshotOf(st *cluster.NodeStatus, err error) any {
	if err != nil {
		return err
	}
	return st.LastSnapshotIndex
}

// TestTxnAllOrNothing: a transaction whose second op fails returns that
// op's error with op_index 1 and applies nothing (the first op's task does
// not exist); the same transaction with a valid second op applies both.
func TestTxnAllOrNothing(t *testing.T) {
	c := startCluster(t, 3)
	ctx := ctxFor(t, 20*time.Second)
	admin := tasksAdmin(t, ctx, c)
	tasksCreate(t, ctx, admin, "guarded", "q")
	first, err := admin.ClaimTask(ctx, tasksTenant, "guarded", client.ClaimRequest{Owner: "w", Lease: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	current, err := admin.ClaimTask(ctx, tasksTenant, "guarded", client.ClaimRequest{Owner: "w", Lease: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name    string
		second  client.TxnOp
		wantErr error
	}{
		{"update of a missing task", client.TxnUpdateTask("no-such-task", client.UpdateTaskRequest{Status: new("x")}),
			client.ErrNotFound},
		{"stale fencing token", client.TxnUpdateTask("guarded", client.UpdateTaskRequest{
			FencingToken: &first.FencingToken, Status: new("handoff")}), client.ErrFenced},
		{"valid", client.TxnUpdateTask("guarded", client.UpdateTaskRequest{
			FencingToken: &current.FencingToken, Status: new("handoff")}), nil},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, err := admin.GetTask(ctx, tasksTenant, "guarded")
			if err != nil {
				t.Fatal(err)
			}
			created := fmt.Sprintf("next-stage-%d", i)
			results, err := admin.Txn(ctx, tasksTenant, []client.TxnOp{
				client.TxnCreateTask(client.CreateTaskRequest{TaskID: created, Queue: "next"}), tc.second})
			after, gerr := admin.GetTask(ctx, tasksTenant, "guarded")
			if gerr != nil {
				t.Fatal(gerr)
			}
			_, cerr := admin.GetTask(ctx, tasksTenant, created)
			if tc.wantErr == nil {
				if err != nil || len(results) != 2 {
					t.Fatalf("txn: got %d results, %v; want 2, nil", len(results), err)
				}
				if cerr != nil || after.Status != "handoff" {
					t.Errorf("after the txn: created task: %v, guarded status %q; want both applied", cerr, after.Status)
				}
				return
			}
			var e *client.Error
			if !errors.Is(err, tc.wantErr) || !errors.As(err, &e) {
				t.Fatalf("txn: got %v, want %v", err, tc.wantErr)
			}
			if idx, ok := e.OpIndex(); !ok || idx != 1 {
				t.Errorf("op_index: got %d (present %v), want 1", idx, ok)
			}
			if !errors.Is(cerr, client.ErrNotFound) {
				t.Errorf("task of op 0 after the failed txn: got %v, want not_found", cerr)
			}
			if after.Version != before.Version || after.Status != before.Status {
				t.Errorf("guarded task changed by the failed txn: version %d→%d, status %q→%q",
					before.Version, after.Version, before.Status, after.Status)
			}
		})
	}
}

// tasksTransport counts the worker's requests by kind (claim, renew,
// update) as they leave for the server, and can drop renewals before they
// are sent, as a network that loses them would.
type tasksTransport struct {
	base      http.RoundTripper
	dropRenew atomic.Bool
	mu        sync.Mutex
	sent      map[string]int
	dropped   int
}

func newTasksTransport() *tasksTransport {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.TLSClientConfig = e2eTLSConfig()
	return &tasksTransport{base: base, sent: map[string]int{}}
}

func (c *tasksTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	kind := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	c.mu.Lock()
	if kind == "renew" && c.dropRenew.Load() {
		c.dropped++
		c.mu.Unlock()
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, errors.New("test: renewal dropped")
	}
	c.sent[kind]++
	c.mu.Unlock()
	return c.base.RoundTrip(r)
}

func (c *tasksTransport) count(kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent[kind]
}

func (c *tasksTransport) droppedRenewals() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped
}

// tasksWorkerRun is one RunOnce in the background; fn reports its Lease on
// started and waits for proceed (closed by the test) before it writes.
type tasksWorkerRun struct {
	started chan *concurrency.Lease
	proceed chan struct{}
	done    chan error
	cause   error // context.Cause of fn's ctx once it ended
	write   error // fn's write after the loss
	before  int   // updates sent before that write
	after   int   // updates sent after it
}

// tasksStartWorker runs w.RunOnce with an fn that waits for its ctx to
// end (or, with writeFirst, writes once first, after proceed), then waits
// for proceed and writes through the lease.
func tasksStartWorker(t *testing.T, ctx context.Context, w *concurrency.Worker, tr *tasksTransport, writeFirst bool) *tasksWorkerRun {
	t.Helper()
	run := &tasksWorkerRun{started: make(chan *concurrency.Lease, 1), proceed: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		claimed, err := w.RunOnce(ctx, func(fctx context.Context, l *concurrency.Lease) error {
			run.started <- l
			if writeFirst {
				select {
				case <-run.proceed:
				case <-ctx.Done():
					return ctx.Err()
				}
				if _, err := l.Update(fctx, client.UpdateTaskRequest{Status: new("working")}); !errors.Is(err, client.ErrFenced) {
					return fmt.Errorf("first write after the takeover: got %v, want fenced from the server", err)
				}
			}
			select {
			case <-fctx.Done():
			case <-ctx.Done():
				return ctx.Err()
			}
			run.cause = context.Cause(fctx)
			select {
			case <-run.proceed:
			case <-ctx.Done():
				return ctx.Err()
			}
			run.before = tr.count("update")
			_, run.write = l.Update(context.Background(), client.UpdateTaskRequest{Status: new("stale-write"),
				Result: []byte(`{"by":"stale worker"}`)})
			run.after = tr.count("update")
			return nil
		})
		if err == nil && !claimed {
			err = errors.New("RunOnce claimed nothing")
		}
		run.done <- err
	}()
	return run
}

func (run *tasksWorkerRun) lease(t *testing.T) *concurrency.Lease {
	t.Helper()
	select {
	case l := <-run.started:
		return l
	case err := <-run.done:
		t.Fatalf("worker ended before fn started: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("worker did not start fn within 10s")
	}
	return nil
}

// finish lets fn write, waits for RunOnce and checks that the cause of fn's
// ctx matches want and that the write after the loss was refused with it,
// without a request.
func (run *tasksWorkerRun) finish(t *testing.T, want error) {
	t.Helper()
	close(run.proceed)
	var err error
	select {
	case err = <-run.done:
	case <-time.After(10 * time.Second):
		t.Fatal("RunOnce did not return within 10s")
	}
	if !errors.Is(err, concurrency.ErrLeaseLost) || !errors.Is(err, want) {
		t.Errorf("RunOnce: got %v, want lease lost: %v", err, want)
	}
	if !errors.Is(run.cause, concurrency.ErrLeaseLost) || !errors.Is(run.cause, want) {
		t.Errorf("cause of fn's ctx: got %v, want lease lost: %v", run.cause, want)
	}
	if !errors.Is(run.write, want) {
		t.Errorf("write after the loss: got %v, want %v", run.write, want)
	}
	if run.after != run.before {
		t.Errorf("write after the loss sent %d request(s), want none", run.after-run.before)
	}
}

// TestWorkerContextCancelledOnTakeover runs concurrency.Worker against a real
// cluster. In every case fn's ctx ends with a cause saying why the lease
// was lost, and fn's next write through the Lease is refused without
// reaching the server; the successor's task is untouched.
func TestWorkerContextCancelledOnTakeover(t *testing.T) {
	c := startCluster(t, 3)
	ctx := ctxFor(t, 60*time.Second)
	admin := tasksAdmin(t, ctx, c)
	tr := newTasksTransport()
	t.Cleanup(tr.base.(*http.Transport).CloseIdleConnections)
	wc, err := client.New(client.Config{Endpoints: c.Endpoints(), Token: c.AdminToken(),
		HTTPClient: &http.Client{Transport: tr}, Timeout: 2 * time.Second, MaxRetry: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	newWorker := func(queue string, cfg concurrency.WorkerConfig) *concurrency.Worker {
		tasksCreate(t, ctx, admin, queue+"-task", queue)
		cfg.Tenant, cfg.Queue, cfg.Owner, cfg.Wait = tasksTenant, queue, "agent-1", 2*time.Second
		w, err := concurrency.NewWorker(wc, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	// checkSuccessor asserts the task is the successor's and the stale
	// worker wrote nothing to it.
	checkSuccessor := func(t *testing.T, id string, succ *client.Task) {
		t.Helper()
		got, err := admin.GetTask(ctx, tasksTenant, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.FencingToken != succ.FencingToken || got.Owner != succ.Owner || got.Version != succ.Version ||
			got.Status != succ.Status || string(got.Result) != "null" {
			t.Errorf("successor's task: got token %d owner %q version %d status %q result %s; want %d %q %d %q null",
				got.FencingToken, got.Owner, got.Version, got.Status, got.Result,
				succ.FencingToken, succ.Owner, succ.Version, succ.Status)
		}
	}

	// A second incarnation of the agent (same owner) claims the task while
	// the worker holds it: the worker's next renewal is fenced.
	t.Run("renewal fenced", func(t *testing.T) {
		w := newWorker("fenced", concurrency.WorkerConfig{Lease: 3 * time.Second, RenewEvery: 100 * time.Millisecond})
		run := tasksStartWorker(t, ctx, w, tr, false)
		l := run.lease(t)
		succ, err := admin.ClaimTask(ctx, tasksTenant, "fenced-task", client.ClaimRequest{Owner: "agent-1", Lease: 60 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if succ.FencingToken <= l.Token() {
			t.Errorf("successor's token %d is not larger than the worker's %d", succ.FencingToken, l.Token())
		}
		run.finish(t, client.ErrFenced)
		checkSuccessor(t, "fenced-task", succ)
	})

	// The same takeover, noticed by a guarded write instead: the server's
	// 409 fenced ends the lease, and the write after it is not sent.
	t.Run("write fenced", func(t *testing.T) {
		w := newWorker("write", concurrency.WorkerConfig{Lease: 60 * time.Second})
		run := tasksStartWorker(t, ctx, w, tr, true)
		l := run.lease(t)
		succ, err := admin.ClaimTask(ctx, tasksTenant, "write-task", client.ClaimRequest{Owner: "agent-1", Lease: 60 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		sent := tr.count("update")
		run.finish(t, client.ErrFenced)
		if got := tr.count("update") - sent; got != 1 {
			t.Errorf("worker sent %d updates after the takeover, want 1 (the fenced one)", got)
		}
		if succ.FencingToken <= l.Token() {
			t.Errorf("successor's token %d is not larger than the worker's %d", succ.FencingToken, l.Token())
		}
		checkSuccessor(t, "write-task", succ)
	})

	// The worker's renewals are lost on the way; it deems the lease lost
	// at its local deadline, before the server lets another owner claim.
	t.Run("expired then taken over", func(t *testing.T) {
		w := newWorker("expire", concurrency.WorkerConfig{Lease: 1500 * time.Millisecond, RenewEvery: 100 * time.Millisecond,
			SafetyMargin: 700 * time.Millisecond})
		run := tasksStartWorker(t, ctx, w, tr, false)
		l := run.lease(t)
		tr.dropRenew.Store(true)
		defer tr.dropRenew.Store(false)
		tasksWaitLeaseExpired(t, ctx, admin, "expire-task")
		succ, err := admin.ClaimTask(ctx, tasksTenant, "expire-task", client.ClaimRequest{Owner: "agent-2", Lease: 60 * time.Second})
		if err != nil {
			t.Fatalf("claim after the lease ran out: %v", err)
		}
		select {
		case <-l.Lost():
		default:
			t.Error("another owner claimed the task before the worker deemed its lease lost")
		}
		run.finish(t, concurrency.ErrLeaseExpired)
		if errors.Is(run.cause, client.ErrFenced) {
			t.Errorf("cause: got %v, want expiry, not fenced", run.cause)
		}
		if tr.droppedRenewals() == 0 {
			t.Error("no renewal was attempted (and dropped) before the lease was deemed lost")
		}
		checkSuccessor(t, "expire-task", succ)
	})
}
