package fsm

import (
	"strings"
	"testing"
)

func (l *lc) cancel(a *TaskCancelArgs) *Result {
	l.t.Helper()
	return l.do(NewCommand(KindTaskCancel, 0, "acme", "", a))
}

func u64(v uint64) *uint64 { return &v }

// TestCancelUnleased: a task without a live lease is cancelled at once,
// with its fencing token retired, and a second cancel changes nothing.
func TestCancelUnleased(t *testing.T) {
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "a"})
	r := l.cancel(&TaskCancelArgs{ID: "a", Reason: "not needed"})
	if !r.OK() {
		t.Fatalf("cancel: %s %s", r.Code, r.Message)
	}
	got := l.get("a")
	if got.Status != StatusCancelled || got.Owner != "" || got.CancelRequested || got.Life == nil || got.Life.LastError != "not needed" {
		t.Fatalf("after cancel: %+v", got)
	}
	if again := l.cancel(&TaskCancelArgs{ID: "a"}); !again.OK() || l.get("a").Version != got.Version {
		t.Fatalf("second cancel: %s %s, version %d (was %d)", again.Code, again.Message, l.get("a").Version, got.Version)
	}
	if l.claimOrNil(1000) != nil {
		t.Fatal("a queue claim took a cancelled task")
	}

	// A lease that ran out is no lease: cancelled at once, and the old
	// holder's token is refused everywhere from then on.
	l.create(&TaskCreateArgs{ID: "b"})
	held := l.claim(1000)
	l.now += 2000
	if r := l.cancel(&TaskCancelArgs{ID: "b"}); !r.OK() || l.get("b").Status != StatusCancelled {
		t.Fatalf("cancel after the lease ran out: %s %s, %+v", r.Code, r.Message, l.get("b"))
	}
	if l.get("b").FencingToken <= held.FencingToken {
		t.Fatalf("token %d not retired (new %d)", held.FencingToken, l.get("b").FencingToken)
	}
	done := "done"
	if r := l.do(NewCommand(KindTaskUpdate, 0, "acme", "", &TaskUpdateArgs{ID: "b", FencingToken: u64(held.FencingToken), Status: &done})); r.Code != CodeFenced {
		t.Fatalf("update under the cancelled lease's token: %s %s, want fenced", r.Code, r.Message)
	}
	if r := l.do(NewCommand(KindKVPut, 0, "acme", "", &KVPutArgs{Namespace: "ns", Key: "k", Value: []byte(`1`),
		Fence: &Fence{TaskID: "b", Token: held.FencingToken}})); r.Code != CodeFenced {
		t.Fatalf("fenced KV put under the cancelled lease's token: %s %s, want fenced", r.Code, r.Message)
	}

	// Ended tasks are not cancelled; a missing one is not found.
	l.create(&TaskCreateArgs{ID: "c", Status: "done"})
	if r := l.cancel(&TaskCancelArgs{ID: "c"}); r.Code != CodeVersionMismatch || l.get("c").Status != "done" {
		t.Fatalf("cancel of a done task: %s %s", r.Code, r.Message)
	}
	if r := l.cancel(&TaskCancelArgs{ID: "nope"}); r.Code != CodeNotFound {
		t.Fatalf("cancel of a missing task: %s", r.Code)
	}
	if r := l.cancel(&TaskCancelArgs{ID: "c", ExpectVersion: u64(99)}); r.Code != CodeVersionMismatch {
		t.Fatalf("cancel with a wrong expect_version: %s", r.Code)
	}
}

// TestCancelLeased: a leased task gets cancel_requested, which its holder
// sees on renew; it is cancelled when the holder acknowledges, and the
// token is then retired.
func TestCancelLeased(t *testing.T) {
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "a"})
	held := l.claim(10_000)
	if r := l.cancel(&TaskCancelArgs{ID: "a", Reason: "user stop"}); !r.OK() {
		t.Fatalf("cancel: %s %s", r.Code, r.Message)
	}
	got := l.get("a")
	if !got.CancelRequested || got.Owner != "w" || got.Status != StatusPending || got.FencingToken != held.FencingToken {
		t.Fatalf("after a cancel of a leased task: %+v", got)
	}
	renewed := l.ok(NewCommand(KindTaskRenew, 0, "acme", "", &TaskRenewArgs{ID: "a", FencingToken: held.FencingToken, LeaseMs: 10_000}))
	if !renewed.CancelRequested {
		t.Fatal("renew does not show cancel_requested")
	}
	if b, _ := renewed.MarshalJSON(); !jsonHas(b, `"cancel_requested":true`) {
		t.Fatalf("wire form lacks cancel_requested: %s", b)
	}
	// Nobody claims it meanwhile, by id either.
	if r := l.do(NewCommand(KindTaskClaim, 0, "acme", "", &TaskClaimArgs{ID: "a", Owner: "w", LeaseMs: 1000})); r.Code != CodeVersionMismatch {
		t.Fatalf("claim by id of a task being cancelled: %s", r.Code)
	}
	// A wrong token does not acknowledge.
	if r := l.cancel(&TaskCancelArgs{ID: "a", FencingToken: u64(held.FencingToken + 1)}); r.Code != CodeFenced {
		t.Fatalf("ack with a wrong token: %s", r.Code)
	}
	if r := l.cancel(&TaskCancelArgs{ID: "a", FencingToken: u64(held.FencingToken)}); !r.OK() {
		t.Fatalf("ack: %s %s", r.Code, r.Message)
	}
	got = l.get("a")
	if got.Status != StatusCancelled || got.Owner != "" || got.CancelRequested || got.FencingToken <= held.FencingToken {
		t.Fatalf("after the ack: %+v", got)
	}
	if r := l.do(NewCommand(KindTaskRenew, 0, "acme", "", &TaskRenewArgs{ID: "a", FencingToken: held.FencingToken, LeaseMs: 1000})); r.Code != CodeFenced {
		t.Fatalf("renew after the ack: %s", r.Code)
	}
	if l.f.NextCancelDue() != 0 {
		t.Fatal("the cancellation index keeps an acknowledged task")
	}
}

// TestCancelLeaseRunsOut: once the lease of a task with a cancellation
// requested runs out, no write under its token succeeds, a queue claim
// does not take it, and the sweep cancels it.
func TestCancelLeaseRunsOut(t *testing.T) {
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "a"})
	held := l.claim(1000)
	l.cancel(&TaskCancelArgs{ID: "a"})
	if due := l.f.NextCancelDue(); due != held.LeaseUntil {
		t.Fatalf("NextCancelDue %d, want the lease's end %d", due, held.LeaseUntil)
	}
	// A sweep before the lease ran out does nothing.
	l.do(NewCommand(KindTaskCancelSweep, 0, "", "", &TaskCancelSweepArgs{Max: 10}))
	if !l.get("a").CancelRequested {
		t.Fatal("swept before the lease ran out")
	}
	l.now = held.LeaseUntil // a lease is live while lease_until > now
	for _, c := range []*Command{
		NewCommand(KindTaskRenew, 0, "acme", "", &TaskRenewArgs{ID: "a", FencingToken: held.FencingToken, LeaseMs: 1000}),
		NewCommand(KindTaskFail, 0, "acme", "", &TaskFailArgs{ID: "a", FencingToken: held.FencingToken}),
		NewCommand(KindTaskUpdate, 0, "acme", "", &TaskUpdateArgs{ID: "a", FencingToken: u64(held.FencingToken), Result: []byte(`1`)}),
		NewCommand(KindTaskCancel, 0, "acme", "", &TaskCancelArgs{ID: "a", FencingToken: u64(held.FencingToken)}),
		NewCommand(KindKVPut, 0, "acme", "", &KVPutArgs{Namespace: "ns", Key: "k", Value: []byte(`1`),
			Fence: &Fence{TaskID: "a", Token: held.FencingToken}}),
	} {
		if r := l.do(c); r.Code != CodeFenced {
			t.Fatalf("%s after the lease ran out: %s %s, want fenced", c.Kind, r.Code, r.Message)
		}
	}
	if l.claimOrNil(1000) != nil {
		t.Fatal("a queue claim took a task whose cancellation took effect")
	}
	l.do(NewCommand(KindTaskCancelSweep, 0, "", "", &TaskCancelSweepArgs{Max: 10}))
	got := l.get("a")
	if got.Status != StatusCancelled || got.Owner != "" || got.FencingToken <= held.FencingToken {
		t.Fatalf("after the sweep: %+v", got)
	}
	if l.f.NextCancelDue() != 0 {
		t.Fatal("the cancellation index keeps a swept task")
	}
}

// TestCancelHolderGivesUp: a release or a failed attempt of a task with a
// cancellation requested ends it cancelled (not claimable again), unless
// the holder's write sets a terminal status; a retry revives it with the
// token retired.
func TestCancelHolderGivesUp(t *testing.T) {
	l := newLC(t)
	for _, id := range []string{"rel", "fail", "done", "retry"} {
		l.create(&TaskCreateArgs{ID: id})
	}
	tok := map[string]uint64{}
	for range 4 {
		c := l.claim(10_000)
		tok[c.ID] = c.FencingToken
		l.cancel(&TaskCancelArgs{ID: c.ID})
	}
	l.ok(NewCommand(KindTaskUpdate, 0, "acme", "", &TaskUpdateArgs{ID: "rel", FencingToken: u64(tok["rel"]), Release: true}))
	l.ok(NewCommand(KindTaskFail, 0, "acme", "", &TaskFailArgs{ID: "fail", FencingToken: tok["fail"], Error: "x"}))
	done := "done"
	l.ok(NewCommand(KindTaskUpdate, 0, "acme", "", &TaskUpdateArgs{ID: "done", FencingToken: u64(tok["done"]), Status: &done, Release: true}))
	for id, want := range map[string]string{"rel": StatusCancelled, "fail": StatusCancelled, "done": "done"} {
		got := l.get(id)
		if got.Status != want || got.CancelRequested || got.FencingToken <= tok[id] {
			t.Errorf("%s: status %q (want %q), cancel_requested %v, token %d (held %d)", id, got.Status, want,
				got.CancelRequested, got.FencingToken, tok[id])
		}
	}
	l.now += 20_000 // the lease of "retry" ran out; retry before the sweep
	l.ok(NewCommand(KindTaskRetry, 0, "acme", "", &TaskRetryArgs{ID: "retry"}))
	got := l.get("retry")
	if got.Status != StatusPending || got.CancelRequested || got.FencingToken <= tok["retry"] {
		t.Fatalf("retry of a task being cancelled: %+v", got)
	}
	if r := l.do(NewCommand(KindTaskUpdate, 0, "acme", "", &TaskUpdateArgs{ID: "retry", FencingToken: u64(tok["retry"]), Result: []byte(`1`)})); r.Code != CodeFenced {
		t.Fatalf("update under the old token after the retry: %s", r.Code)
	}
}

// TestCancelMarksSnapshot: a state that held a cancel_requested task is
// written in snapshotFormat5, which a member that would drop the field
// refuses.
func TestCancelMarksSnapshot(t *testing.T) {
	l := newLC(t)
	if f := snapshotFormatOf(l.f.st); f >= snapshotFormat5 {
		t.Fatalf("format %d before any cancellation", f)
	}
	l.create(&TaskCreateArgs{ID: "a"})
	l.claim(10_000)
	l.cancel(&TaskCancelArgs{ID: "a"})
	if f := snapshotFormatOf(l.f.st); f != snapshotFormat5 {
		t.Fatalf("format %d after a cancellation request, want %d", f, snapshotFormat5)
	}
	// The record round-trips through the codec with the field.
	raw, _ := l.f.st.getStored(taskKey("acme", "a"))
	var back Task
	if decode(unpackVal(raw), &back) != nil || !back.CancelRequested {
		t.Fatalf("stored record lost CancelRequested: %+v", back)
	}
}

// TestCancelEntryVersion: the kinds are refused in entries older than
// version 6.
func TestCancelEntryVersion(t *testing.T) {
	for _, c := range []*Command{
		NewCommand(KindTaskCancel, 1, "acme", "", &TaskCancelArgs{ID: "a"}),
		NewCommand(KindTaskCancelSweep, 1, "", "", &TaskCancelSweepArgs{Max: 1}),
	} {
		e := EncodeEntry([]*Command{c})
		if e[0] != EntryVersion6 {
			t.Fatalf("%s written as version %d", c.Kind, e[0])
		}
		if _, err := DecodeEntry(append([]byte{EntryVersion5}, e[1:]...)); err == nil {
			t.Fatalf("%s accepted in a version 5 entry", c.Kind)
		}
	}
}

// TestQueueStatsRunning: leased tasks are counted apart from waiting ones,
// live leases as running, run-out ones apart.
func TestQueueStatsRunning(t *testing.T) {
	l := newLC(t)
	for _, id := range []string{"a", "b", "c"} {
		l.create(&TaskCreateArgs{ID: id})
	}
	l.claim(1000)
	l.claim(5000)
	s, _ := l.f.QueueStats("acme", "q")
	if s.Running != 2 || s.LeaseExpired != 0 || s.Waiting != 1 {
		t.Fatalf("two claimed of three: running %d, lease_expired %d, waiting %d", s.Running, s.LeaseExpired, s.Waiting)
	}
	l.now += 2000
	l.create(&TaskCreateArgs{ID: "d"}) // any command moves the stats' clock
	s, _ = l.f.QueueStats("acme", "q")
	if s.Running != 1 || s.LeaseExpired != 1 || s.Waiting != 2 {
		t.Fatalf("one lease ran out: running %d, lease_expired %d, waiting %d", s.Running, s.LeaseExpired, s.Waiting)
	}
}

func jsonHas(b []byte, s string) bool { return strings.Contains(string(b), s) }

// claimOrNil is a queue claim of "q", nil when nothing is claimable.
func (l *lc) claimOrNil(leaseMs int64) *Task {
	l.t.Helper()
	c := NewCommand(KindTaskQueueClaim, 0, "acme", "", &QueueClaimArgs{Queue: "q", Owner: "w", LeaseMs: leaseMs, Statuses: []string{"pending"}})
	l.f.Stamp(c)
	r := l.do(c)
	if !r.OK() {
		l.t.Fatalf("queue claim: %s %s", r.Code, r.Message)
	}
	return resultTask(r.Obj)
}
