package fsm

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func (l *lc) update(id string, a *TaskUpdateArgs) *Task {
	l.t.Helper()
	a.ID = id
	return l.ok(NewCommand(KindTaskUpdate, 0, "acme", "", a))
}

func (l *lc) purge() int {
	l.t.Helper()
	r := l.do(NewCommand(KindTaskPurge, 0, "", "", &TaskPurgeArgs{Max: 100}))
	if !r.OK() {
		l.t.Fatalf("purge: %s", r.Message)
	}
	return r.Obj.(map[string]int)["purged"]
}

func (l *lc) policy(p QueuePolicy) {
	l.t.Helper()
	l.ok(NewCommand(KindQueuePolicy, 0, "acme", "", &QueuePolicyArgs{Queue: "q", Policy: p}))
}

func (l *lc) exists(id string) bool {
	_, _, ok := l.f.GetTask("acme", id)
	return ok
}

func expiryKeys(f *FSM) []string {
	var keys []string
	f.st.Scan(taskExpiryPrefix, "", func(k string, _ []byte) bool { keys = append(keys, k); return true })
	return keys
}

// TestRetentionDeletesAfterPeriod: a task that enters a terminal status
// gets the expiry of the command's time plus the queue's period; a purge
// before it keeps the task, one at it deletes the task, its index entries
// and says so to watchers.
func TestRetentionDeletesAfterPeriod(t *testing.T) {
	l := newLC(t)
	l.policy(QueuePolicy{RetentionMs: 1000})
	l.create(&TaskCreateArgs{ID: "t1"})
	l.create(&TaskCreateArgs{ID: "keep"})
	if l.get("t1").expiresAt() != 0 || len(expiryKeys(l.f)) != 0 {
		t.Fatal("a pending task has an expiry")
	}
	l.now += 50
	doneAt := l.now
	done := l.update("t1", &TaskUpdateArgs{Status: ptr(StatusDone)})
	if done.expiresAt() != doneAt+1000 {
		t.Fatalf("expires_at %d, want %d", done.expiresAt(), doneAt+1000)
	}
	js, _ := json.Marshal(done)
	if !strings.Contains(string(js), `"expires_at":"`) {
		t.Errorf("task JSON lacks expires_at: %s", js)
	}
	// Another terminal status keeps the expiry it got on entering.
	l.now += 300
	if got := l.update("t1", &TaskUpdateArgs{Status: ptr(StatusCancelled)}); got.expiresAt() != doneAt+1000 {
		t.Fatalf("done -> cancelled moved the expiry to %d", got.expiresAt())
	}
	l.now = doneAt + 999
	if n := l.purge(); n != 0 || !l.exists("t1") {
		t.Fatalf("purge before the expiry deleted %d", n)
	}
	from := l.index // events after every one of the last entry
	l.now = doneAt + 1000
	if n := l.purge(); n != 1 || l.exists("t1") || !l.exists("keep") {
		t.Fatalf("purge at the expiry: %d deleted, t1 there: %v", n, l.exists("t1"))
	}
	if keys := expiryKeys(l.f); len(keys) != 0 {
		t.Fatalf("expiry index left: %v", keys)
	}
	evs, _ := l.f.History().Since(from, -1, 10)
	if len(evs) != 1 || evs[0].Type != EventDelete || evs[0].Key != "t1" || evs[0].Resource != ResourceTasks {
		t.Fatalf("watch events of the purge: %+v", evs)
	}
	if st, _ := l.f.QueueStats("acme", "q"); st.Tasks != 1 || st.ByStatus[StatusCancelled] != 0 {
		t.Fatalf("queue stats after the purge: %+v", st)
	}
}

// TestRetentionOffByDefault: without a period nothing gets an expiry.
func TestRetentionOffByDefault(t *testing.T) {
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "t1"})
	l.update("t1", &TaskUpdateArgs{Status: ptr(StatusDone)})
	l.now += 1 << 40
	if n := l.purge(); n != 0 || !l.exists("t1") || l.get("t1").expiresAt() != 0 {
		t.Fatalf("a task without retention was purged (%d) or got an expiry", n)
	}
}

// TestRetentionTaskOwnWinsAndStatusSet: a task's own period wins over its
// queue's; only done, dead and cancelled start it; created terminal, the
// clock starts at the create.
func TestRetentionTaskOwnWinsAndStatusSet(t *testing.T) {
	l := newLC(t)
	l.policy(QueuePolicy{RetentionMs: 10_000})
	own := l.create(&TaskCreateArgs{ID: "own", RetentionMs: 200, Status: StatusDone})
	if own.expiresAt() != l.now+200 {
		t.Fatalf("created done with its own period: expires %d, want %d", own.expiresAt(), l.now+200)
	}
	l.create(&TaskCreateArgs{ID: "other"})
	if got := l.update("other", &TaskUpdateArgs{Status: ptr("finished")}); got.expiresAt() != 0 {
		t.Fatalf("a status outside the terminal set got an expiry")
	}
	l.create(&TaskCreateArgs{ID: "d"})
	c := l.claim(1000)
	if d := l.fail(c, "boom", true, 0); d.Status != StatusDead || d.expiresAt() != l.now+10_000 {
		t.Fatalf("dead by task.fail: %s, expires %d", d.Status, d.expiresAt())
	}
	l.now += 200
	if n := l.purge(); n != 1 || l.exists("own") || !l.exists("d") {
		t.Fatalf("purge at 200 ms: %d", n)
	}
}

// TestRetentionDroppedOnLeavingTerminal: task.retry (and an update to a
// non-terminal status) takes the expiry and its index entry away.
func TestRetentionDroppedOnLeavingTerminal(t *testing.T) {
	l := newLC(t)
	l.policy(QueuePolicy{RetentionMs: 100})
	l.create(&TaskCreateArgs{ID: "t1"})
	l.fail(l.claim(1000), "x", true, 0)
	if len(expiryKeys(l.f)) != 1 {
		t.Fatal("dead task without an expiry")
	}
	r := l.ok(NewCommand(KindTaskRetry, 0, "acme", "", &TaskRetryArgs{ID: "t1"}))
	if r.expiresAt() != 0 || len(expiryKeys(l.f)) != 0 {
		t.Fatalf("after retry: expires %d, index %v", r.expiresAt(), expiryKeys(l.f))
	}
	l.update("t1", &TaskUpdateArgs{Status: ptr(StatusDone)})
	l.update("t1", &TaskUpdateArgs{Status: ptr("rework")})
	l.now += 1000
	if n := l.purge(); n != 0 || !l.exists("t1") || len(expiryKeys(l.f)) != 0 {
		t.Fatalf("a task that left the terminal set was purged (%d)", n)
	}
}

// TestRetentionPurgeBounded: one purge deletes at most its Max, oldest
// expiry first.
func TestRetentionPurgeBounded(t *testing.T) {
	l := newLC(t)
	for i := range 5 {
		l.now++
		l.create(&TaskCreateArgs{ID: fmt.Sprintf("t%d", i), Status: StatusDone, RetentionMs: 10})
	}
	l.now += 100
	r := l.do(NewCommand(KindTaskPurge, 0, "", "", &TaskPurgeArgs{Max: 2}))
	if n := r.Obj.(map[string]int)["purged"]; n != 2 || l.exists("t0") || l.exists("t1") || !l.exists("t2") {
		t.Fatalf("bounded purge deleted %d", n)
	}
}

// TestRetentionRollbackInFailedTxn: a transaction whose later op fails
// leaves neither the expiry nor the queue figures of its earlier ops.
func TestRetentionRollbackInFailedTxn(t *testing.T) {
	l := newLC(t)
	l.policy(QueuePolicy{RetentionMs: 100})
	l.create(&TaskCreateArgs{ID: "t1"})
	before, _ := l.f.QueueStats("acme", "q")
	digest := l.f.Status().StateDigest
	l.now += 10
	r := l.do(NewCommand(KindTxn, 0, "acme", "", &TxnArgs{Ops: []TxnOp{
		{Kind: KindTaskUpdate, Args: EncodeArgs(&TaskUpdateArgs{ID: "t1", Status: ptr(StatusDone)})},
		{Kind: KindTaskCreate, Args: EncodeArgs(&TaskCreateArgs{ID: "t2", Queue: "q2"})},
		{Kind: KindTaskClaim, Args: EncodeArgs(&TaskClaimArgs{ID: "missing", Owner: "w", LeaseMs: 10})},
	}}))
	if r.OK() {
		t.Fatal("the transaction succeeded")
	}
	if got := l.get("t1"); got.Status != StatusPending || got.expiresAt() != 0 || len(expiryKeys(l.f)) != 0 {
		t.Fatalf("after the failed txn: %+v, index %v", got, expiryKeys(l.f))
	}
	after, _ := l.f.QueueStats("acme", "q")
	before.AsOf, after.AsOf = 0, 0
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("queue stats moved: %+v, was %+v", after, before)
	}
	if qs, _, _ := l.f.ListQueues("acme", "", 10, nil); len(qs) != 1 {
		t.Fatalf("the failed txn's queue is listed: %+v", qs)
	}
	if l.f.Status().StateDigest == digest {
		t.Fatal("the clock did not move (the test needs it to)")
	}
}

// TestRetentionSnapshot: expiries survive a snapshot (format 3, which a
// member that predates retention refuses), and the restored replica
// purges as the original does.
func TestRetentionSnapshot(t *testing.T) {
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "t1", RetentionMs: 500, Status: StatusDone})
	l.create(&TaskCreateArgs{ID: "t2", DelayMs: 300})
	snap := persist(t, l.f)
	if hdr := snapshotHeader(t, snap); hdr.Format != snapshotFormat3 {
		t.Fatalf("snapshot format %d, want %d", hdr.Format, snapshotFormat3)
	}
	g := New()
	restoreFrom(t, g, snap)
	if !reflect.DeepEqual(dumpQueueIndex(g.queues), dumpQueueIndex(l.f.queues)) {
		t.Fatalf("restored queue index %v, want %v", dumpQueueIndex(g.queues), dumpQueueIndex(l.f.queues))
	}
	l.now += 500
	l.purge()
	applyOne(t, g, l.index, &Command{Kind: KindTaskPurge, Now: l.now, Args: EncodeArgs(&TaskPurgeArgs{Max: 100})})
	if _, _, ok := g.GetTask("acme", "t1"); ok {
		t.Fatal("the restored replica kept the retained task")
	}
	if a, b := l.f.Status().StateDigest, g.Status().StateDigest; a != b {
		t.Fatalf("digests differ after the purge: %s, %s", a, b)
	}
}

// TestRetentionSnapshotMarkedBeforeAnyExpiry: a state that holds a
// retention period anywhere (a queue policy's, or a task's own on a task
// not yet in a terminal status) is a format 3 snapshot, so that an older
// member refuses it rather than drop the period and later disagree on
// whether a task expires.
func TestRetentionSnapshotMarkedBeforeAnyExpiry(t *testing.T) {
	policy := newLC(t)
	policy.ok(NewCommand(KindQueuePolicy, 0, "acme", "", &QueuePolicyArgs{Queue: "q", Policy: QueuePolicy{RetentionMs: 500}}))
	own := newLC(t)
	own.create(&TaskCreateArgs{ID: "t1", RetentionMs: 500})
	for name, l := range map[string]*lc{"a queue policy's": policy, "a pending task's own": own} {
		if hdr := snapshotHeader(t, persist(t, l.f)); hdr.Format != snapshotFormat3 {
			t.Errorf("%s retention: snapshot format %d, want %d", name, hdr.Format, snapshotFormat3)
		}
	}
}

// TestRetentionEntryVersions: the new kind and fields go in version 4
// entries only, a plain create or policy stays as it was.
func TestRetentionEntryVersions(t *testing.T) {
	for name, c := range map[string]*Command{
		"purge":                  NewCommand(KindTaskPurge, 1, "", "", &TaskPurgeArgs{Max: 1}),
		"create with retention":  NewCommand(KindTaskCreate, 1, "acme", "", &TaskCreateArgs{ID: "t", Queue: "q", RetentionMs: 5}),
		"policy with retention":  NewCommand(KindQueuePolicy, 1, "acme", "", &QueuePolicyArgs{Queue: "q", Policy: QueuePolicy{RetentionMs: 5}}),
		"txn creating with one":  NewCommand(KindTxn, 1, "acme", "", &TxnArgs{Ops: []TxnOp{{Kind: KindTaskCreate, Args: EncodeArgs(&TaskCreateArgs{ID: "t", Queue: "q", RetentionMs: 5})}}}),
		"create, delay and both": NewCommand(KindTaskCreate, 1, "acme", "", &TaskCreateArgs{ID: "t", Queue: "q", DelayMs: 1, RetentionMs: 5}),
	} {
		if e := EncodeEntry([]*Command{c}); e[0] != EntryVersion4 {
			t.Errorf("%s: entry version %d, want %d", name, e[0], EntryVersion4)
		}
	}
	p := NewCommand(KindQueuePolicy, 1, "acme", "", &QueuePolicyArgs{Queue: "q", Policy: QueuePolicy{MaxAttempts: 2}})
	if e := EncodeEntry([]*Command{p}); e[0] != EntryVersion3 {
		t.Errorf("a policy without retention: entry version %d, want %d", e[0], EntryVersion3)
	}
	if b, _ := json.Marshal(&QueuePolicy{MaxAttempts: 2}); strings.Contains(string(b), "retention") {
		t.Errorf("a policy without retention encodes it: %s", b)
	}
	if b, _ := json.Marshal(&Task{ID: "t", Life: &TaskLife{MaxAttempts: 2}}); strings.Contains(string(b), "retention") || strings.Contains(string(b), "expires") {
		t.Errorf("a task without retention encodes it: %s", b)
	}
}

// TestQueueStats: counts by status, waiting and due later, the oldest
// claimable task's time, and claims of the last minute by command time.
func TestQueueStats(t *testing.T) {
	l := newLC(t)
	t0 := l.now
	l.create(&TaskCreateArgs{ID: "a", Priority: 5})
	l.now += 10
	l.create(&TaskCreateArgs{ID: "b", Priority: 1}) // lower priority, newer
	l.now += 10
	l.create(&TaskCreateArgs{ID: "c", DelayMs: 1000})
	l.create(&TaskCreateArgs{ID: "d", Status: "review"})
	st, _ := l.f.QueueStats("acme", "q")
	want := QueueStats{Queue: "q", Tasks: 4, ByStatus: map[string]int64{"pending": 3, "review": 1}, Waiting: 3, DueLater: 1,
		OldestWaitingSince: t0, AsOf: l.now}
	if !reflect.DeepEqual(st, want) {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	// A claim takes the highest priority, "a": the oldest is now "b".
	l.now += 5
	l.claim(60_000)
	l.now += 2000 // c became due at t0+1020; its since is its available_at
	l.claim(60_000)
	st, _ = l.f.QueueStats("acme", "q")
	if st.Waiting != 1 || st.DueLater != 0 || st.ClaimsLastMinute != 2 || st.OldestWaitingSince != t0+20+1000 {
		t.Fatalf("after two claims: %+v", st)
	}
	// The minute is the commands': a minute later by a command's time,
	// the claims are out of it.
	l.now += 61_000
	l.create(&TaskCreateArgs{ID: "e", Queue: "other"})
	if st, _ = l.f.QueueStats("acme", "q"); st.ClaimsLastMinute != 0 {
		t.Fatalf("claims a minute later: %d", st.ClaimsLastMinute)
	}
	qs, next, _ := l.f.ListQueues("acme", "", 1, nil)
	if len(qs) != 1 || qs[0].Queue != "other" || next != "other" {
		t.Fatalf("first page: %+v %q", qs, next)
	}
	if qs, next, _ = l.f.ListQueues("acme", next, 1, nil); len(qs) != 1 || qs[0].Queue != "q" || next != "" {
		t.Fatalf("second page: %+v %q", qs, next)
	}
}

// dumpQueueIndex is the index in a comparable form.
func dumpQueueIndex(q *queueIndex) map[string]string {
	out := map[string]string{"clock": fmt.Sprint(q.clock), "later": fmt.Sprint(q.later.Len()), "live": fmt.Sprint(q.live.Len())}
	for tn, tq := range q.tenants {
		if tq.names.Len() != len(tq.queues) {
			out[tn] = "names and queues differ"
		}
		for name, qc := range tq.queues {
			out[tn+"/"+name] = fmt.Sprintf("total=%d statuses=%v ready=%v delayed=%d later=%d leased=%d live=%d blocked=%d keys=%v",
				qc.total, qc.statuses, qc.ready, qc.delayed, qc.later, qc.leased, qc.live, qc.blocked, qc.keys)
		}
	}
	return out
}

// TestQueueIndexMatchesState: after random logs (every task command,
// failed ones and transactions, retention purges), the index each replica
// kept is the one rebuilt from its state, and its figures are those a
// full listing of the tasks gives.
func TestQueueIndexMatchesState(t *testing.T) {
	purged := 0
	for seed := range uint64(5) {
		f := New()
		for _, l := range randomLog(seed, 300) {
			cmds, _ := DecodeEntry(l.Data)
			res, _ := f.Apply(l).([]*Result)
			for i, c := range cmds {
				if c.Kind == KindTaskPurge && res[i].OK() && !res[i].Replay {
					purged += res[i].Obj.(map[string]int)["purged"]
				}
			}
		}
		kept := dumpQueueIndex(f.queues)
		rebuilt := newQueueIndex()
		rebuilt.rebuild(f.st, f.clock)
		if got := dumpQueueIndex(rebuilt); !reflect.DeepEqual(kept, got) {
			t.Fatalf("seed %d: kept index\n%v\nrebuilt\n%v", seed, kept, got)
		}
		for _, tn := range f.Tenants() {
			checkStatsAgainstListing(t, f, tn)
		}
	}
	if purged == 0 {
		t.Fatal("no purge deleted a task: the generated logs exercise too little")
	}
}

// checkStatsAgainstListing compares every queue's figures with what a
// full listing of the tenant's tasks says.
func checkStatsAgainstListing(t *testing.T, f *FSM, tenant string) {
	t.Helper()
	tasks, _, _ := f.ListTasks(tenant, TaskFilter{Limit: 1 << 30})
	want := map[string]*QueueStats{}
	clock := f.queues.clock
	for _, task := range tasks {
		w := want[task.Queue]
		if w == nil {
			w = &QueueStats{Queue: task.Queue, ByStatus: map[string]int64{}, AsOf: clock}
			want[task.Queue] = w
		}
		w.Tasks++
		w.ByStatus[task.Status]++
		switch {
		case task.Owner == "":
		case task.LeaseUntil > clock:
			w.Running++
		default:
			w.LeaseExpired++
		}
		if task.blocked() {
			if !TerminalStatus(task.Status) {
				w.Blocked++
			}
			continue
		}
		if task.Status != StatusPending || task.Owner != "" || task.LeaseUntil != 0 {
			continue
		}
		w.Waiting++
		since := task.CreatedAt
		if at := task.availableAt(); at != 0 {
			since = at
		}
		if since > clock {
			w.DueLater++
		} else if w.OldestWaitingSince == 0 || since < w.OldestWaitingSince {
			w.OldestWaitingSince = since
		}
	}
	qs, _, _ := f.ListQueues(tenant, "", 1<<30, nil)
	if len(qs) != len(want) {
		t.Fatalf("%s: %d queues listed, %d hold tasks", tenant, len(qs), len(want))
	}
	for _, got := range qs {
		got.ClaimsLastMinute = 0
		if !reflect.DeepEqual(got, *want[got.Queue]) {
			t.Fatalf("%s/%s: stats %+v, listing says %+v", tenant, got.Queue, got, *want[got.Queue])
		}
	}
}
