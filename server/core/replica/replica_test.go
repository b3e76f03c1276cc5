package replica

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/goleak"

	"github.com/baton-dev/baton/fsm"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// logNode is a one-member log in memory: Apply encodes the command into an
// entry, as node.Node does, and applies it to the state machine at the next
// index. It records the version byte of every entry it writes.
type logNode struct {
	f        *fsm.FSM
	mu       sync.Mutex
	index    uint64
	versions []byte
	follower atomic.Bool
}

func (n *logNode) IsLeader() bool                         { return !n.follower.Load() }
func (n *logNode) ReadBarrier(ctx context.Context) error  { return ctx.Err() }
func (n *logNode) WriteBarrier(ctx context.Context) error { return ctx.Err() }

func (n *logNode) Apply(_ context.Context, cmd *fsm.Command) (*fsm.Result, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	entry := fsm.EncodeEntry([]*fsm.Command{cmd})
	n.index++
	n.versions = append(n.versions, entry[0])
	out := n.f.Apply(&raft.Log{Index: n.index, Type: raft.LogCommand, Data: entry})
	if err, ok := out.(error); ok {
		return nil, err
	}
	res := out.([]*fsm.Result)[0]
	res.Index = n.index
	return res, nil
}

func (n *logNode) lastVersion() byte {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.versions[len(n.versions)-1]
}

func newReplica(t *testing.T) (*Replica, *logNode) {
	t.Helper()
	n := &logNode{f: fsm.New()}
	r := New(Config{Node: n, FSM: n.f, IdempotencyTTL: time.Hour})
	if res, err := r.ProposeOwn(context.Background(), fsm.KindTenantPut, "acme", &fsm.TenantPutArgs{Name: "acme"}); err != nil || !res.OK() {
		t.Fatalf("tenant put: %v %+v", err, res)
	}
	return r, n
}

func (r *Replica) mustPropose(t *testing.T, kind fsm.Kind, args any) *fsm.Result {
	t.Helper()
	res, err := r.Propose(context.Background(), r.Command(Caller{Tenant: "acme"}, kind, args))
	if err != nil || !res.OK() {
		t.Fatalf("%s: %v %+v", kind, err, res)
	}
	return res
}

// TestCommandRetryIdentity: an Idempotency-Key wins over a session place,
// and each carries the fingerprint; without either the command has none.
func TestCommandRetryIdentity(t *testing.T) {
	r := New(Config{FSM: fsm.New(), IdempotencyTTL: time.Minute})
	fp := []byte("fp")
	both := r.Command(Caller{Tenant: "t", Principal: "p", IdemKey: "k", Session: 7, Seq: 2, Ack: 1, Fingerprint: fp}, fsm.KindKVPut, &fsm.KVPutArgs{})
	if both.IdemKey != "k" || string(both.IdemFP) != "fp" || both.IdemTTL != time.Minute.Milliseconds() || both.Session != 0 {
		t.Errorf("key and session: got key %q fp %q ttl %d session %d, want the key's", both.IdemKey, both.IdemFP, both.IdemTTL, both.Session)
	}
	sess := r.Command(Caller{Tenant: "t", Session: 7, Seq: 2, Ack: 1, Fingerprint: fp}, fsm.KindKVPut, &fsm.KVPutArgs{})
	if sess.Session != 7 || sess.Seq != 2 || sess.Ack != 1 || string(sess.IdemFP) != "fp" || sess.IdemKey != "" {
		t.Errorf("session: got %+v", sess)
	}
	plain := r.Command(Caller{Tenant: "t", Fingerprint: fp}, fsm.KindKVPut, &fsm.KVPutArgs{})
	if retried(plain) || plain.IdemFP != nil || plain.Now == 0 || plain.Tenant != "t" {
		t.Errorf("plain: got %+v", plain)
	}
}

// TestProposeStampsQueueClaims: the facade, not the caller, stamps a queue
// claim's entry version from the state (the command table's Stamp): a
// version 1 entry until a task with a lifecycle exists, EntryVersion4 after.
func TestProposeStampsQueueClaims(t *testing.T) {
	r, n := newReplica(t)
	claim := &fsm.QueueClaimArgs{Queue: "q", Owner: "w", LeaseMs: 1000, Statuses: []string{"pending"}}
	r.mustPropose(t, fsm.KindTaskQueueClaim, claim)
	if v := n.lastVersion(); v != fsm.EntryVersion {
		t.Fatalf("claim before any lifecycle task: entry version %d, want %d", v, fsm.EntryVersion)
	}
	r.mustPropose(t, fsm.KindTaskCreate, &fsm.TaskCreateArgs{ID: "a", Queue: "other", Status: "pending", MaxAttempts: 3})
	r.mustPropose(t, fsm.KindTaskQueueClaim, claim)
	if v := n.lastVersion(); v != fsm.EntryVersion4 {
		t.Fatalf("claim after a lifecycle task: entry version %d, want %d", v, fsm.EntryVersion4)
	}
}

// TestClaimQueueWaitsForATask: a long-polling claim proposes nothing while
// nothing is claimable, and claims the task created meanwhile.
func TestClaimQueueWaitsForATask(t *testing.T) {
	r, n := newReplica(t)
	args := &fsm.QueueClaimArgs{Queue: "q", Owner: "w", LeaseMs: 60000, Statuses: []string{"pending"}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type answer struct {
		c   Claim
		err error
	}
	done := make(chan answer, 1)
	go func() {
		c, err := r.ClaimQueue(ctx, Caller{Tenant: "acme"}, args, time.Minute)
		done <- answer{c, err}
	}()
	r.mustPropose(t, fsm.KindTaskCreate, &fsm.TaskCreateArgs{ID: "a", Queue: "q", Status: "pending"})
	a := <-done
	if a.err != nil || a.c.Res == nil || !a.c.Res.OK() {
		t.Fatalf("claim: %v %+v", a.err, a.c)
	}
	if task, _, _ := n.f.GetTask("acme", "a"); task.Owner != "w" {
		t.Fatalf("task a's owner is %q, want w", task.Owner)
	}
	if got := n.f.AppliedIndex(); got != 3 { // tenant, create, one claim
		t.Fatalf("applied index %d, want 3: the claim proposed only once a task was claimable", got)
	}
}

// TestClaimQueueEmpty: a claim that finds nothing writes nothing; a late
// duplicate of a keyed one gets the same remembered answer.
func TestClaimQueueEmpty(t *testing.T) {
	r, n := newReplica(t)
	args := &fsm.QueueClaimArgs{Queue: "q", Owner: "w", LeaseMs: 60000, Statuses: []string{"pending"}}
	before := n.f.AppliedIndex()
	keyed := Caller{Tenant: "acme", IdemKey: "k1", Fingerprint: []byte("fp")}
	for i, want := range []bool{false, true} {
		c, err := r.ClaimQueue(context.Background(), keyed, args, 0)
		if err != nil || c.Res != nil || c.Replay != want {
			t.Fatalf("keyed empty claim %d: %v %+v, want no result, replay %v", i, err, c, want)
		}
	}
	if after := n.f.AppliedIndex(); after != before {
		t.Fatalf("empty claims moved the applied index from %d to %d", before, after)
	}
}

// TestWaitClaimableLeadershipLost: a wait that ends on a node that no
// longer leads says so instead of claiming.
func TestWaitClaimableLeadershipLost(t *testing.T) {
	r, n := newReplica(t)
	n.follower.Store(true)
	_, changed := n.f.Changed()
	err := r.WaitClaimable(context.Background(), changed, time.Now(), 0)
	if !errors.Is(err, ErrLeadershipChanged) {
		t.Fatalf("got %v, want ErrLeadershipChanged", err)
	}
}
