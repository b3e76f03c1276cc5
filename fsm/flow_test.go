package fsm

import (
	"fmt"
	"testing"
)

func (l *lc) flowPolicy(p QueuePolicy) {
	l.t.Helper()
	if r := l.do(NewCommand(KindQueuePolicy, 0, "acme", "", &QueuePolicyArgs{Queue: "q", Policy: p})); !r.OK() {
		l.t.Fatalf("policy: %s %s", r.Code, r.Message)
	}
}

func (l *lc) claimByIDResult(id string) *Result {
	l.t.Helper()
	return l.do(NewCommand(KindTaskClaim, 0, "acme", "", &TaskClaimArgs{ID: id, Owner: "w", LeaseMs: 1000}))
}

// TestFlowMaxLeased: at max_leased no claim takes a task without an owner,
// by id or from the queue (a transaction's claims counted too), until one
// is released; a lease that ran out keeps its slot and can be taken again.
func TestFlowMaxLeased(t *testing.T) {
	l := newLC(t)
	l.flowPolicy(QueuePolicy{MaxLeased: 2})
	for i := range 5 {
		l.create(&TaskCreateArgs{ID: fmt.Sprintf("t%d", i)})
	}
	a, b := l.claim(1000), l.claim(1000)
	if got := l.claimOrNil(1000); got != nil {
		t.Fatalf("a third claim at max_leased 2 took %q", got.ID)
	}
	if r := l.claimByIDResult("t4"); r.Code != CodeRateLimitedForTest {
		t.Fatalf("claim by id at the limit: %s", r.Code)
	}
	if ok, _ := l.f.Claimable("acme", "q", []string{"pending"}, l.now); ok {
		t.Fatal("Claimable says yes at the limit")
	}
	l.now += 2000 // both leases ran out: their slots stay, and they can be taken again
	again := l.claimOrNil(1000)
	if again == nil || (again.ID != a.ID && again.ID != b.ID) {
		t.Fatalf("at the limit with run-out leases: claimed %+v, want one of them again", again)
	}
	l.ok(NewCommand(KindTaskUpdate, 0, "acme", "", &TaskUpdateArgs{ID: again.ID, FencingToken: u64(again.FencingToken), Release: true,
		Status: new("done")}))
	if got := l.claimOrNil(1000); got == nil {
		t.Fatal("no claim after a release under the limit")
	}
	// A transaction of two claims by id with one slot free is refused whole.
	txn := NewCommand(KindTxn, 0, "acme", "", &TxnArgs{Ops: []TxnOp{
		{Kind: KindTaskClaim, Args: EncodeArgs(&TaskClaimArgs{ID: "t3", Owner: "w", LeaseMs: 1000})},
		{Kind: KindTaskClaim, Args: EncodeArgs(&TaskClaimArgs{ID: "t4", Owner: "w", LeaseMs: 1000})},
	}})
	if s, _ := l.f.QueueStats("acme", "q"); s.Running+s.LeaseExpired != 1 {
		t.Fatalf("leased before the transaction: %+v", s)
	}
	if r := l.do(txn); r.OK() {
		t.Fatal("a transaction claimed past max_leased")
	}
}

// TestFlowConcurrencyKey: at most concurrency_key_limit tasks of a key are
// leased at once; tasks of other keys, and without one, are claimed past
// them.
func TestFlowConcurrencyKey(t *testing.T) {
	l := newLC(t)
	l.flowPolicy(QueuePolicy{KeyLimit: 1})
	l.create(&TaskCreateArgs{ID: "a1", ConcurrencyKey: "cust-a", Priority: 9})
	l.create(&TaskCreateArgs{ID: "a2", ConcurrencyKey: "cust-a", Priority: 9})
	l.create(&TaskCreateArgs{ID: "b1", ConcurrencyKey: "cust-b"})
	l.create(&TaskCreateArgs{ID: "free"})
	var got []string
	for {
		c := l.claimOrNil(10_000)
		if c == nil {
			break
		}
		got = append(got, c.ID)
	}
	if fmt.Sprint(got) != "[a1 b1 free]" {
		t.Fatalf("claimed %v, want a1 b1 free (a2 waits for a1's key)", got)
	}
	if r := l.claimByIDResult("a2"); r.Code != CodeRateLimitedForTest {
		t.Fatalf("claim by id of a full key: %s", r.Code)
	}
	a1 := l.get("a1")
	l.ok(NewCommand(KindTaskUpdate, 0, "acme", "", &TaskUpdateArgs{ID: "a1", FencingToken: u64(a1.FencingToken), Status: new("done"), Release: true}))
	if c := l.claimOrNil(1000); c == nil || c.ID != "a2" {
		t.Fatalf("after a1 ended: %+v", c)
	}
}

// TestFlowRate: claims_per_second with a burst: the burst is claimed at
// once, then one claim per 1/rate; refused claims write nothing.
func TestFlowRate(t *testing.T) {
	l := newLC(t)
	l.flowPolicy(QueuePolicy{ClaimsPerSecond: 2, ClaimBurst: 2})
	for i := range 6 {
		l.create(&TaskCreateArgs{ID: fmt.Sprintf("t%d", i)})
	}
	l.claim(60_000)
	l.claim(60_000)
	if got := l.claimOrNil(60_000); got != nil {
		t.Fatal("a claim past the burst")
	}
	if ok, next := l.f.Claimable("acme", "q", []string{"pending"}, l.now); ok || next != l.now+500 {
		t.Fatalf("Claimable over the rate: %v, next %d (now %d)", ok, next, l.now)
	}
	l.now += 499
	if got := l.claimOrNil(60_000); got != nil {
		t.Fatal("a claim before a token came back")
	}
	l.now++
	if got := l.claimOrNil(60_000); got == nil {
		t.Fatal("no claim once a token came back")
	}
}

// TestFlowVersioning: flow fields need version 6 entries and make the
// snapshot format 5.
func TestFlowVersioning(t *testing.T) {
	for _, c := range []*Command{
		NewCommand(KindQueuePolicy, 1, "acme", "", &QueuePolicyArgs{Queue: "q", Policy: QueuePolicy{MaxLeased: 1}}),
		NewCommand(KindTaskCreate, 1, "acme", "", &TaskCreateArgs{ID: "a", Queue: "q", ConcurrencyKey: "k"}),
	} {
		if e := EncodeEntry([]*Command{c}); e[0] != EntryVersion6 {
			t.Fatalf("%s written as version %d", c.Kind, e[0])
		}
	}
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "a", ConcurrencyKey: "k"})
	if f := snapshotFormatOf(l.f.st); f != snapshotFormat5 {
		t.Fatalf("format %d", f)
	}
}

const CodeRateLimitedForTest = "rate_limited"
