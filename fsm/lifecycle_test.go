package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// lc is a small driver for lifecycle tests: one tenant, a log index and
// a clock that the test moves.
type lc struct {
	t     *testing.T
	f     *FSM
	index uint64
	now   int64
}

func newLC(t *testing.T) *lc {
	l := &lc{t: t, f: New(), now: 1_000_000}
	l.do(tenantPut(l.now, "acme"))
	return l
}

func (l *lc) do(c *Command) *Result {
	l.t.Helper()
	l.index++
	c.Now = l.now
	return applyOne(l.t, l.f, l.index, c)
}

func (l *lc) ok(c *Command) *Task {
	l.t.Helper()
	r := l.do(c)
	if !r.OK() {
		l.t.Fatalf("%s: %s %s", c.Kind, r.Code, r.Message)
	}
	return resultTask(r.Obj)
}

func (l *lc) create(a *TaskCreateArgs) *Task {
	l.t.Helper()
	if a.Queue == "" {
		a.Queue = "q"
	}
	return l.ok(NewCommand(KindTaskCreate, 0, "acme", "", a))
}

// claim is a queue claim of "q", stamped as the leader stamps it; nil when
// nothing is claimable.
func (l *lc) claim(leaseMs int64) *Task {
	l.t.Helper()
	c := NewCommand(KindTaskQueueClaim, 0, "acme", "", &QueueClaimArgs{Queue: "q", Owner: "w", LeaseMs: leaseMs, Statuses: []string{"pending"}})
	l.f.Stamp(c)
	return l.ok(c)
}

// claimV1 is a queue claim as a leader from before EntryVersion4 wrote it.
func (l *lc) claimV1(leaseMs int64) *Task {
	l.t.Helper()
	c := NewCommand(KindTaskQueueClaim, 0, "acme", "", &QueueClaimArgs{Queue: "q", Owner: "w", LeaseMs: leaseMs, Statuses: []string{"pending"}})
	back, err := DecodeEntry(append([]byte{EntryVersion}, EncodeEntry([]*Command{c})[1:]...))
	if err != nil {
		l.t.Fatal(err)
	}
	return l.ok(back[0])
}

func (l *lc) fail(task *Task, msg string, nonRetryable bool, rnd uint64) *Task {
	l.t.Helper()
	return l.ok(NewCommand(KindTaskFail, 0, "acme", "", &TaskFailArgs{ID: task.ID, FencingToken: task.FencingToken,
		Error: msg, NonRetryable: nonRetryable, Rand: rnd}))
}

func (l *lc) get(id string) *Task {
	l.t.Helper()
	task, _, ok := l.f.GetTask("acme", id)
	if !ok {
		l.t.Fatalf("task %q not found", id)
	}
	return task
}

// TestFailBackoffAndDead: each failed attempt makes the task claimable
// only after its backoff, drawn from [d/2, d] with d doubling from the
// initial delay up to the maximum; after exactly max_attempts claims the
// task is dead, keeps the last error and no queue claim takes it.
func TestFailBackoffAndDead(t *testing.T) {
	for _, rnd := range []uint64{0, 1 << 40, ^uint64(0), 12345} {
		l := newLC(t)
		l.create(&TaskCreateArgs{ID: "t1", MaxAttempts: 5, BackoffInitialMs: 100, BackoffMaxMs: 800})
		d := int64(100)
		var prevGap int64
		for attempt := uint64(1); attempt <= 5; attempt++ {
			c := l.claim(60_000)
			if c == nil || c.Attempt != attempt {
				t.Fatalf("rnd %d: claim %d: got %+v", rnd, attempt, c)
			}
			failedAt := l.now
			f := l.fail(c, "boom "+string(rune('0'+attempt)), false, rnd)
			if attempt == 5 {
				if f.Status != StatusDead || f.Life.AvailableAt != 0 || f.Life.Failures != 5 {
					t.Fatalf("rnd %d: after the last attempt: status %q, life %+v; want dead", rnd, f.Status, f.Life)
				}
				break
			}
			if f.Status != "pending" || f.Owner != "" || f.LeaseUntil != 0 {
				t.Fatalf("rnd %d: after a failed attempt: %+v", rnd, f)
			}
			gap := f.Life.AvailableAt - failedAt
			if gap < d/2 || gap > d {
				t.Errorf("rnd %d: backoff after attempt %d is %d ms, want within [%d, %d]", rnd, attempt, gap, d/2, d)
			}
			if gap < prevGap {
				t.Errorf("rnd %d: backoff after attempt %d (%d ms) is shorter than the one before (%d ms)", rnd, attempt, gap, prevGap)
			}
			prevGap = gap
			d *= 2
			// Not claimable one millisecond before, claimable at its time.
			l.now = f.Life.AvailableAt - 1
			if c := l.claim(60_000); c != nil {
				t.Fatalf("rnd %d: claimed %d ms before available_at", rnd, 1)
			}
			if ok, next := l.f.Claimable("acme", "q", []string{"pending"}, l.now); ok || next != f.Life.AvailableAt {
				t.Errorf("rnd %d: Claimable before available_at: %v, next %d; want false, %d", rnd, ok, next, f.Life.AvailableAt)
			}
			l.now++
		}
		l.now += 10_000_000
		if c := l.claim(60_000); c != nil {
			t.Fatalf("rnd %d: a dead task was claimed: %+v", rnd, c)
		}
		dead := l.get("t1")
		if dead.Life.LastError != "boom 5" || dead.Attempt != 5 {
			t.Errorf("rnd %d: dead task: attempt %d, last error %q", rnd, dead.Attempt, dead.Life.LastError)
		}
		if r := l.do(NewCommand(KindTaskClaim, 0, "acme", "", &TaskClaimArgs{ID: "t1", Owner: "w", LeaseMs: 1000})); r.Code != CodeVersionMismatch {
			t.Errorf("claim by id of a dead task: got %s, want %s", describe(r), CodeVersionMismatch)
		}
		tasks, _, _ := l.f.ListTasks("acme", TaskFilter{Queue: "q", Status: StatusDead, Limit: 10})
		if len(tasks) != 1 || tasks[0].ID != "t1" {
			t.Errorf("list status=dead: got %d tasks", len(tasks))
		}
	}
}

// TestBackoffJitterFromCommand: the same log gives the same backoff on
// every replica (the jitter is the command's), and different draws give
// different delays.
func TestBackoffJitterFromCommand(t *testing.T) {
	got := map[int64]bool{}
	for _, rnd := range []uint64{1, 2, 3, 1000, 77777} {
		var at [2]int64
		for i := range at {
			l := newLC(t)
			l.create(&TaskCreateArgs{ID: "t1", MaxAttempts: 3, BackoffInitialMs: 10_000})
			at[i] = l.fail(l.claim(1000), "x", false, rnd).Life.AvailableAt
		}
		if at[0] != at[1] {
			t.Fatalf("rnd %d: replicas disagree: %d vs %d", rnd, at[0], at[1])
		}
		got[at[0]] = true
	}
	if len(got) < 2 {
		t.Errorf("five random draws all gave the same backoff")
	}
}

func TestNonRetryableGoesDead(t *testing.T) {
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "t1", MaxAttempts: 10})
	f := l.fail(l.claim(1000), "bad input", true, 0)
	if f.Status != StatusDead || f.Attempt != 1 || f.Life.LastError != "bad input" {
		t.Fatalf("non-retryable failure: status %q attempt %d error %q", f.Status, f.Attempt, f.Life.LastError)
	}
	// Without max_attempts too.
	l.create(&TaskCreateArgs{ID: "t2"})
	if f := l.fail(l.claim(1000), "bad", true, 0); f.Status != StatusDead {
		t.Fatalf("non-retryable failure of a task without max_attempts: status %q", f.Status)
	}
}

// TestFailWithoutPolicyBacksOff: a task created without any lifecycle
// field still backs off after a failure (the default policy), and is
// never dead from attempts.
func TestFailWithoutPolicyBacksOff(t *testing.T) {
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "t1"})
	for i := range 12 {
		c := l.claim(1000)
		if c == nil {
			t.Fatalf("round %d: nothing claimable", i)
		}
		f := l.fail(c, "x", false, uint64(i))
		if f.Status != "pending" || f.Life.AvailableAt-l.now < DefaultBackoffInitialMs/2 {
			t.Fatalf("round %d: status %q, available in %d ms", i, f.Status, f.Life.AvailableAt-l.now)
		}
		if f.Life.AvailableAt-l.now > DefaultBackoffMaxMs {
			t.Fatalf("round %d: backoff %d ms over the default maximum", i, f.Life.AvailableAt-l.now)
		}
		l.now = f.Life.AvailableAt
	}
}

func TestFailFenced(t *testing.T) {
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "t1", MaxAttempts: 3})
	c := l.claim(1000)
	stale := *c
	stale.FencingToken--
	if r := l.do(NewCommand(KindTaskFail, 0, "acme", "", &TaskFailArgs{ID: "t1", FencingToken: stale.FencingToken})); r.Code != CodeFenced {
		t.Fatalf("fail with a stale token: got %s, want fenced", describe(r))
	}
	l.fail(c, "x", false, 0)
	// The token is spent: the lease is gone.
	if r := l.do(NewCommand(KindTaskFail, 0, "acme", "", &TaskFailArgs{ID: "t1", FencingToken: c.FencingToken})); r.Code != CodeFenced {
		t.Fatalf("a second fail with the same token: got %s, want fenced", describe(r))
	}
	if r := l.do(NewCommand(KindTaskFail, 0, "acme", "", &TaskFailArgs{ID: "nope"})); r.Code != CodeNotFound {
		t.Fatalf("fail of a missing task: got %s, want not_found", describe(r))
	}
}

// TestExpiredLeaseCountsAsAttempt: leases that run out count; one that
// runs out on the last attempt makes the next queue claim move the task to
// dead instead of taking it a fourth time.
func TestExpiredLeaseCountsAsAttempt(t *testing.T) {
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "t1", MaxAttempts: 3})
	for attempt := uint64(1); attempt <= 3; attempt++ {
		c := l.claim(1000)
		if c == nil || c.Attempt != attempt {
			t.Fatalf("claim %d: got %+v", attempt, c)
		}
		l.now += 1000 // the lease runs out
	}
	if ok, _ := l.f.Claimable("acme", "q", []string{"pending"}, l.now); !ok {
		t.Errorf("Claimable with a lease out on its last attempt: false, want true (the claim makes it dead)")
	}
	if c := l.claim(1000); c != nil {
		t.Fatalf("a fourth attempt was claimed: %+v", c)
	}
	d := l.get("t1")
	if d.Status != StatusDead || d.Owner != "" || d.Life.Failures != 1 || !strings.Contains(d.Life.LastError, "lease expired") {
		t.Fatalf("after the last lease ran out: status %q owner %q life %+v", d.Status, d.Owner, d.Life)
	}
	if ok, _ := l.f.Claimable("acme", "q", []string{"pending"}, l.now); ok {
		t.Errorf("Claimable after the task went dead: true")
	}
}

// TestReleasedOnLastAttemptGoesDead: a task released (given back without
// a failure) on its last attempt, at once or after a delay, is not claimed
// a time more: the next queue claim makes it dead, as it does a lease out
// on the last attempt, and takes the next task instead. (The chaos
// lifecycle checker found a fourth claim of a max_attempts 3 task.)
func TestReleasedOnLastAttemptGoesDead(t *testing.T) {
	for _, delayMs := range []int64{0, 500} {
		l := newLC(t)
		l.create(&TaskCreateArgs{ID: "t1", MaxAttempts: 2, Priority: 9})
		l.create(&TaskCreateArgs{ID: "t2"})
		for attempt := uint64(1); attempt <= 2; attempt++ {
			c := l.claim(60_000)
			if c == nil || c.ID != "t1" || c.Attempt != attempt {
				t.Fatalf("delay %d: claim %d: got %+v", delayMs, attempt, c)
			}
			l.ok(NewCommand(KindTaskUpdate, 0, "acme", "", &TaskUpdateArgs{ID: "t1", FencingToken: ptr(c.FencingToken), Release: true, DelayMs: delayMs}))
			l.now += delayMs
		}
		if c := l.claim(60_000); c == nil || c.ID != "t2" {
			t.Fatalf("delay %d: the claim after t1's last attempt was released took %+v, want t2", delayMs, c)
		}
		d := l.get("t1")
		if d.Status != StatusDead || d.Attempt != 2 || !strings.Contains(d.Life.LastError, "released on attempt 2 of 2") {
			t.Fatalf("delay %d: t1 after its last attempt was released: status %q attempt %d life %+v", delayMs, d.Status, d.Attempt, d.Life)
		}
		if c := l.claim(60_000); c != nil {
			t.Fatalf("delay %d: a dead task was claimed: %+v", delayMs, c)
		}
	}
}

// TestQueueClaimVersions: a leader writes queue claims in version 4
// entries once a task has a lifecycle, and only then; a version 1 claim
// is applied as members before version 4 apply it (a task released on its
// last attempt is claimed again), so that a log an older leader wrote
// gives one state on every member.
func TestQueueClaimVersions(t *testing.T) {
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "plain"})
	c := NewCommand(KindTaskQueueClaim, 0, "acme", "", &QueueClaimArgs{Queue: "q", Owner: "w", LeaseMs: 1})
	if l.f.Stamp(c); EncodeEntry([]*Command{c})[0] != EntryVersion {
		t.Fatalf("a claim with no lifecycle task in the state: entry version %d, want %d", EncodeEntry([]*Command{c})[0], EntryVersion)
	}
	l.create(&TaskCreateArgs{ID: "t1", MaxAttempts: 1, Priority: 9})
	if l.f.Stamp(c); EncodeEntry([]*Command{c})[0] != EntryVersion4 {
		t.Fatalf("a claim once a lifecycle task exists: entry version %d, want %d", EncodeEntry([]*Command{c})[0], EntryVersion4)
	}
	got := l.claimV1(60_000)
	l.ok(NewCommand(KindTaskUpdate, 0, "acme", "", &TaskUpdateArgs{ID: "t1", FencingToken: ptr(got.FencingToken), Release: true}))
	if again := l.claimV1(60_000); again == nil || again.ID != "t1" || again.Attempt != 2 {
		t.Fatalf("a version 1 claim after t1's last attempt was released: %+v, want t1 at attempt 2 (as before version 4)", again)
	}
}

// TestDeadCapLeavesClaimableWork: a claim that meets more tasks that used
// their attempts than it makes dead still takes the claimable task behind
// them; the next claims make the rest dead.
func TestDeadCapLeavesClaimableWork(t *testing.T) {
	l := newLC(t)
	n := maxDeadPerClaim + 6
	for i := range n { // each claimed by id and released: spent, not yet dead
		id := fmt.Sprintf("x%03d", i)
		l.create(&TaskCreateArgs{ID: id, MaxAttempts: 1, Priority: 5})
		c := l.ok(NewCommand(KindTaskClaim, 0, "acme", "", &TaskClaimArgs{ID: id, Owner: "w", LeaseMs: 60_000}))
		l.ok(NewCommand(KindTaskUpdate, 0, "acme", "", &TaskUpdateArgs{ID: c.ID, FencingToken: ptr(c.FencingToken), Release: true}))
	}
	l.create(&TaskCreateArgs{ID: "work"})
	if c := l.claim(60_000); c == nil || c.ID != "work" {
		t.Fatalf("the claim behind %d spent tasks took %+v, want task work", n, c)
	}
	dead := 0
	for i := range n {
		if l.get(fmt.Sprintf("x%03d", i)).Status == StatusDead {
			dead++
		}
	}
	if dead != maxDeadPerClaim {
		t.Fatalf("one claim made %d tasks dead, want %d", dead, maxDeadPerClaim)
	}
	if c := l.claim(60_000); c != nil {
		t.Fatalf("a claim with only spent tasks left took %+v", c)
	}
	for i := range n {
		if s := l.get(fmt.Sprintf("x%03d", i)).Status; s != StatusDead {
			t.Fatalf("x%03d is %q after the second claim, want dead", i, s)
		}
	}
}

// TestRetryResets: retry revives a dead task with its attempts reset, and
// refuses a task with a live lease.
func TestRetryResets(t *testing.T) {
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "t1", MaxAttempts: 1})
	c := l.claim(1000)
	if r := l.do(NewCommand(KindTaskRetry, 0, "acme", "", &TaskRetryArgs{ID: "t1"})); r.Code != CodeLeaseHeld {
		t.Fatalf("retry of a leased task: got %s, want lease_held", describe(r))
	}
	if f := l.fail(c, "x", false, 0); f.Status != StatusDead {
		t.Fatalf("after the only attempt: status %q", f.Status)
	}
	v := l.get("t1").Version + 1
	if r := l.do(NewCommand(KindTaskRetry, 0, "acme", "", &TaskRetryArgs{ID: "t1", ExpectVersion: &v})); r.Code != CodeVersionMismatch {
		t.Fatalf("retry with a wrong expect_version: got %s", describe(r))
	}
	r := l.ok(NewCommand(KindTaskRetry, 0, "acme", "", &TaskRetryArgs{ID: "t1", DelayMs: 500}))
	if r.Status != "pending" || r.Attempt != 0 || r.Life.Failures != 0 || r.Life.AvailableAt != l.now+500 || r.Life.MaxAttempts != 1 {
		t.Fatalf("after retry: %+v %+v", r, r.Life)
	}
	if c := l.claim(1000); c != nil {
		t.Fatalf("claimed before the retry's delay")
	}
	l.now += 500
	c = l.claim(1000)
	if c == nil || c.Attempt != 1 || c.Life.AvailableAt != 0 {
		t.Fatalf("claim after retry: %+v", c)
	}
	if r := l.do(NewCommand(KindTaskRetry, 0, "acme", "", &TaskRetryArgs{ID: "nope"})); r.Code != CodeNotFound {
		t.Fatalf("retry of a missing task: %s", describe(r))
	}
}

// TestDelayedTasks: a delayed task is not claimed before its time, by
// available_at or delay_ms (the later wins), on create and on release;
// among due tasks priority and age still decide.
func TestDelayedTasks(t *testing.T) {
	l := newLC(t)
	start := l.now
	l.create(&TaskCreateArgs{ID: "late", Priority: 9, AvailableAt: start + 2000})
	l.create(&TaskCreateArgs{ID: "later", Priority: 9, AvailableAt: start + 1000, DelayMs: 3000})
	l.create(&TaskCreateArgs{ID: "now", Priority: 1})
	if c := l.claim(100_000); c == nil || c.ID != "now" {
		t.Fatalf("first claim: %+v, want the undelayed task", c)
	}
	if c := l.claim(100_000); c != nil {
		t.Fatalf("claimed %q before its time", c.ID)
	}
	if ok, next := l.f.Claimable("acme", "q", []string{"pending"}, l.now); ok || next != start+2000 {
		t.Errorf("Claimable: %v, next %d; want false, %d", ok, next, start+2000)
	}
	l.now = start + 1999
	if c := l.claim(100_000); c != nil {
		t.Fatalf("claimed %q 1 ms early", c.ID)
	}
	l.now = start + 2999
	if c := l.claim(100_000); c == nil || c.ID != "late" {
		t.Fatalf("claim at +2999: %+v, want late", c)
	}
	if c := l.claim(100_000); c != nil {
		t.Fatalf("claimed %q before +3000", c.ID)
	}
	l.now = start + 3000
	c := l.claim(100_000)
	if c == nil || c.ID != "later" {
		t.Fatalf("claim at +3000: %+v, want later", c)
	}
	// Release with a delay.
	rel := l.ok(NewCommand(KindTaskUpdate, 0, "acme", "", &TaskUpdateArgs{ID: "later", FencingToken: &c.FencingToken, Release: true, DelayMs: 700}))
	if rel.Life.AvailableAt != l.now+700 || rel.Owner != "" {
		t.Fatalf("release with delay_ms: %+v", rel)
	}
	l.now += 699
	if c := l.claim(100_000); c != nil {
		t.Fatalf("claimed %q before the release's delay", c.ID)
	}
	l.now++
	if c := l.claim(100_000); c == nil || c.ID != "later" {
		t.Fatalf("claim after the release's delay: %+v", c)
	}
	// Due delayed tasks compete by priority and age with ready ones.
	l.create(&TaskCreateArgs{ID: "a-ready", Priority: 1})
	l.create(&TaskCreateArgs{ID: "b-due", Priority: 5, DelayMs: 10})
	l.now += 10
	if c := l.claim(1000); c == nil || c.ID != "b-due" {
		t.Fatalf("due delayed task of higher priority: got %+v", c)
	}
}

// TestLifecycleRecordsAndEntries: tasks and entries that use no lifecycle
// field are the bytes they were before (16-field records, version 1
// entries); those that do are version 3 entries, which DecodeEntry reads
// back, and a lifecycle kind in an older entry is refused.
func TestLifecycleRecordsAndEntries(t *testing.T) {
	plain := NewCommand(KindTaskCreate, 1, "acme", "", &TaskCreateArgs{ID: "t1", Queue: "q"})
	if e := EncodeEntry([]*Command{plain}); e[0] != EntryVersion {
		t.Errorf("a plain create: entry version %d, want %d", e[0], EntryVersion)
	}
	upd := NewCommand(KindTaskUpdate, 1, "acme", "", &TaskUpdateArgs{ID: "t1", Release: true})
	if e := EncodeEntry([]*Command{upd}); e[0] != EntryVersion {
		t.Errorf("a plain update: entry version %d, want %d", e[0], EntryVersion)
	}
	for name, c := range map[string]*Command{
		"create with max_attempts": NewCommand(KindTaskCreate, 1, "acme", "", &TaskCreateArgs{ID: "t1", Queue: "q", MaxAttempts: 3}),
		"create with delay":        NewCommand(KindTaskCreate, 1, "acme", "", &TaskCreateArgs{ID: "t1", Queue: "q", DelayMs: 3}),
		"release with delay":       NewCommand(KindTaskUpdate, 1, "acme", "", &TaskUpdateArgs{ID: "t1", Release: true, DelayMs: 5}),
		"fail":                     NewCommand(KindTaskFail, 1, "acme", "", &TaskFailArgs{ID: "t1"}),
		"retry":                    NewCommand(KindTaskRetry, 1, "acme", "", &TaskRetryArgs{ID: "t1"}),
		"txn with a delayed create": NewCommand(KindTxn, 1, "acme", "", &TxnArgs{Ops: []TxnOp{
			{Kind: KindKVPut, Args: EncodeArgs(&KVPutArgs{Namespace: "n", Key: "k", Value: []byte("1")})},
			{Kind: KindTaskCreate, Args: EncodeArgs(&TaskCreateArgs{ID: "t1", Queue: "q", AvailableAt: 9})}}}),
	} {
		e := EncodeEntry([]*Command{plain, c})
		if e[0] != EntryVersion3 {
			t.Errorf("%s: entry version %d, want %d", name, e[0], EntryVersion3)
			continue
		}
		back, err := DecodeEntry(e)
		if err != nil || len(back) != 2 || back[1].Kind != c.Kind || !bytes.Equal(back[1].Args, c.Args) {
			t.Errorf("%s: DecodeEntry: %v", name, err)
		}
	}
	// A lifecycle kind in a version 1 entry (only a faulty writer makes one).
	bad := append([]byte{EntryVersion}, EncodeEntry([]*Command{NewCommand(KindTaskFail, 1, "acme", "", &TaskFailArgs{ID: "t1"})})[1:]...)
	if _, err := DecodeEntry(bad); !errors.Is(err, ErrBadEntry) {
		t.Errorf("task.fail in a version 1 entry: %v, want ErrBadEntry", err)
	}
	// Records: a task without a lifecycle part encodes as appendTask does.
	task := &Task{Tenant: "acme", ID: "t1", Queue: "q", Status: "pending", Version: 1}
	if !bytes.Equal(encode(task), appendTask(nil, task)) || !isTaskRecord(encode(task)) {
		t.Errorf("a task without a lifecycle part is not the 16-field record")
	}
	task.Life = &TaskLife{MaxAttempts: 3, AvailableAt: 7, LastError: "e"}
	var back Task
	if err := decode(encode(task), &back); err != nil || back.Life == nil || *back.Life != *task.Life {
		t.Errorf("a task with a lifecycle part does not round-trip: %v %+v", err, back.Life)
	}
	if isTaskRecord(encode(task)) {
		t.Errorf("a task with a lifecycle part is taken for a 16-field record")
	}
	// And through the stored form.
	st := newStore()
	st.Put("x", encode(task))
	if got, ok := getTaskAt(st, "x"); !ok || got.Life == nil || *got.Life != *task.Life {
		t.Errorf("a stored task with a lifecycle part: %+v", got)
	}
}

func getTaskAt(st *Store, key string) (*Task, bool) {
	raw, ok := st.getStored(key)
	if !ok {
		return nil, false
	}
	var t Task
	if !decodeStoredTask(raw, &t) && decode(unpackVal(raw), &t) != nil {
		return nil, false
	}
	return &t, true
}

// TestLifecycleSnapshot: a state with lifecycle records round-trips
// through a snapshot (format 2), fields and queue indexes included; a state
// without any writes format 1 as before.
func TestLifecycleSnapshot(t *testing.T) {
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "plain"})
	if hdr := snapshotHeader(t, persist(t, l.f)); hdr.Format != snapshotFormat {
		t.Errorf("a state without lifecycles: snapshot format %d, want %d", hdr.Format, snapshotFormat)
	}
	l.create(&TaskCreateArgs{ID: "t1", MaxAttempts: 2, BackoffInitialMs: 100, DelayMs: 5000})
	snap := persist(t, l.f)
	if hdr := snapshotHeader(t, snap); hdr.Format != snapshotFormat2 {
		t.Errorf("a state with lifecycles: snapshot format %d, want %d", hdr.Format, snapshotFormat2)
	}
	g := New()
	restoreFrom(t, g, snap)
	if a, b := l.f.Status().StateDigest, g.Status().StateDigest; a != b {
		t.Fatalf("restored digest %s, want %s", b, a)
	}
	task, _, ok := g.GetTask("acme", "t1")
	if !ok || task.Life == nil || task.Life.MaxAttempts != 2 || task.Life.AvailableAt != l.now+5000 {
		t.Fatalf("restored task: %+v", task)
	}
	// The delayed index came along: nothing but "plain" is claimable now,
	// t1 is at its time.
	if ok, next := g.Claimable("acme", "q", []string{"pending"}, l.now+4999); !ok || next != 0 {
		t.Errorf("restored Claimable: %v %d", ok, next)
	}
	js, _ := json.Marshal(task)
	if !strings.Contains(string(js), `"max_attempts":2`) || !strings.Contains(string(js), `"available_at":"`) {
		t.Errorf("task JSON lacks the lifecycle fields: %s", js)
	}
}

func snapshotHeader(t *testing.T, b []byte) snapHeader {
	t.Helper()
	_, hdr, err := readSnapshot(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return hdr
}

// TestBackoffCapped: the delay doubles up to the maximum and stays there.
func TestBackoffCapped(t *testing.T) {
	l := &TaskLife{BackoffInitialMs: 100, BackoffMaxMs: 500}
	for n, want := range map[uint64]int64{1: 100, 2: 200, 3: 400, 4: 500, 60: 500, 1 << 40: 500} {
		if got := backoffMs(l, n, uint64(want-want/2)); got != want {
			t.Errorf("attempt %d, top draw: %d ms, want %d", n, got, want)
		}
		if got := backoffMs(l, n, 0); got != want/2 {
			t.Errorf("attempt %d, bottom draw: %d ms, want %d", n, got, want/2)
		}
	}
}

// TestQueuePolicyDefaults: a queue's policy fills the lifecycle fields a
// create leaves unset, for tasks created after it; clearing it stops that.
func TestQueuePolicyDefaults(t *testing.T) {
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "before"})
	pol := NewCommand(KindQueuePolicy, 0, "acme", "", &QueuePolicyArgs{Queue: "q", Policy: QueuePolicy{MaxAttempts: 2, BackoffInitialMs: 70, BackoffMaxMs: 900}})
	if e := EncodeEntry([]*Command{pol}); e[0] != EntryVersion3 {
		t.Errorf("queue.policy in entry version %d, want %d", e[0], EntryVersion3)
	}
	l.ok(pol)
	if p, _ := l.f.QueuePolicy("acme", "q"); p.MaxAttempts != 2 {
		t.Fatalf("QueuePolicy: %+v", p)
	}
	if l.get("before").Life != nil {
		t.Errorf("a task created before the policy changed")
	}
	d := l.create(&TaskCreateArgs{ID: "default"})
	if d.Life == nil || *d.Life != (TaskLife{MaxAttempts: 2, BackoffInitialMs: 70, BackoffMaxMs: 900}) {
		t.Fatalf("task created under the policy: %+v", d.Life)
	}
	own := l.create(&TaskCreateArgs{ID: "own", MaxAttempts: 7})
	if own.Life.MaxAttempts != 7 || own.Life.BackoffInitialMs != 70 {
		t.Errorf("a create's own max_attempts: %+v", own.Life)
	}
	other := l.create(&TaskCreateArgs{ID: "other", Queue: "elsewhere"})
	if other.Life != nil {
		t.Errorf("a task of another queue took the policy: %+v", other.Life)
	}
	l.ok(NewCommand(KindQueuePolicy, 0, "acme", "", &QueuePolicyArgs{Queue: "q"}))
	if l.create(&TaskCreateArgs{ID: "after"}).Life != nil {
		t.Errorf("a task created after the policy was cleared took it")
	}
	if r := l.do(NewCommand(KindQueuePolicy, 0, "nope", "", &QueuePolicyArgs{Queue: "q", Policy: QueuePolicy{MaxAttempts: 1}})); r.Code != CodeNotFound {
		t.Errorf("policy of a missing tenant: %s", describe(r))
	}
}
