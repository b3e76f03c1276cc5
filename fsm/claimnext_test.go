package fsm

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
)

// updateClaim finishes task (done, released, under its token) and claims
// the next task of "q" for owner w, setting it running, in one command.
func (l *lc) updateClaim(task *Task, token uint64) *Result {
	l.t.Helper()
	return l.do(NewCommand(KindTaskUpdateClaim, 0, "acme", "", &TaskUpdateClaimArgs{
		Update: TaskUpdateArgs{ID: task.ID, FencingToken: u64(token), Status: new("done"), Release: true},
		Claim:  QueueClaimArgs{Queue: "q", Owner: "w", LeaseMs: 1000, Statuses: []string{"pending"}, SetStatus: new("running"), Final: true},
	}))
}

func updateClaimAnswer(t *testing.T, r *Result) (*Task, *Task) {
	t.Helper()
	if !r.OK() {
		t.Fatalf("update_claim: %s %s", r.Code, r.Message)
	}
	a, ok := r.Obj.(*UpdateClaimAnswer)
	if !ok {
		t.Fatalf("update_claim answered %T", r.Obj)
	}
	return a.Task, resultTask(a.Next)
}

// TestUpdateClaim: one command finishes a task under its token and
// claims the best next one as a queue claim would (priority, a new larger
// token, a lease, set_status remembered in ClaimedFrom, statistics), and
// answers both.
func TestUpdateClaim(t *testing.T) {
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "a", Priority: 5})
	l.create(&TaskCreateArgs{ID: "low"})
	l.create(&TaskCreateArgs{ID: "high", Priority: 3})
	a := l.claim(1000)
	if a.ID != "a" {
		t.Fatalf("claimed %q first", a.ID)
	}
	done, next := updateClaimAnswer(t, l.updateClaim(a, a.FencingToken))
	if done.ID != "a" || done.Status != "done" || done.Owner != "" || done.LeaseUntil != 0 {
		t.Fatalf("updated: %+v", done)
	}
	if next == nil || next.ID != "high" || next.Owner != "w" || next.Status != "running" || next.ClaimedFrom != "pending" ||
		next.FencingToken <= a.FencingToken || next.LeaseUntil != l.now+1000 || next.Attempt != 1 {
		t.Fatalf("claimed next: %+v", next)
	}
	if got := l.get("high"); got.FencingToken != next.FencingToken || got.Version != next.Version {
		t.Fatalf("stored %+v, answered %+v", got, next)
	}
	s, _ := l.f.QueueStats("acme", "q")
	if s.Running != 1 || s.ByStatus["done"] != 1 || s.ByStatus["running"] != 1 || s.Waiting != 1 || s.ClaimsLastMinute != 2 {
		t.Fatalf("statistics: %+v", s)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(l.updateClaim(next, next.FencingToken).JSON(), &body); err != nil || len(body) != 2 ||
		body["task"] == nil || body["next"] == nil {
		t.Fatalf("answer %s: %v", body, err)
	}
	// The queue is empty now: next is null, the update is made.
	last := l.claimOrNil(1000)
	if last != nil {
		t.Fatalf("claimed %q from an empty queue", last.ID)
	}
	low := l.get("low")
	done, next = updateClaimAnswer(t, l.updateClaim(low, low.FencingToken))
	if done.Status != "done" || next != nil {
		t.Fatalf("on an empty queue: %+v, next %+v", done, next)
	}
	if r := l.updateClaim(low, low.FencingToken); string(r.JSON()) == "" || !r.OK() {
		t.Fatalf("again: %s %s", r.Code, r.Message)
	}
}

// TestUpdateClaimFenced: a stale token refuses the whole command: nothing
// is updated and nothing claimed.
func TestUpdateClaimFenced(t *testing.T) {
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "a", Priority: 1})
	l.create(&TaskCreateArgs{ID: "b"})
	a := l.claim(1000)
	l.now += 2000
	again := l.claim(1000) // a's lease ran out: someone else took it
	if again.ID != "a" {
		t.Fatalf("took %q again", again.ID)
	}
	r := l.updateClaim(a, a.FencingToken)
	if r.Code != CodeFenced {
		t.Fatalf("stale token: %s %s", r.Code, r.Message)
	}
	if got := l.get("a"); got.Status != "pending" || got.FencingToken != again.FencingToken {
		t.Fatalf("a after the refusal: %+v", got)
	}
	if got := l.get("b"); got.Owner != "" || got.FencingToken != 0 {
		t.Fatalf("b claimed by a refused command: %+v", got)
	}
	if r := l.updateClaim(again, again.FencingToken+1); r.Code != CodeFenced {
		t.Fatalf("a token never issued: %s", r.Code)
	}
}

// TestUpdateClaimFlowControl: the claim sees the update's release, so a
// worker at max_leased finishes its task and gets the next in one command;
// without a release the slot stays taken and nothing is claimed. The rate
// limit is spent by the claim part as by any claim.
func TestUpdateClaimFlowControl(t *testing.T) {
	l := newLC(t)
	l.flowPolicy(QueuePolicy{MaxLeased: 1})
	for _, id := range []string{"a", "b", "c"} {
		l.create(&TaskCreateArgs{ID: id})
	}
	a := l.claim(1000)
	if got := l.claimOrNil(1000); got != nil {
		t.Fatalf("a second claim at max_leased 1 took %q", got.ID)
	}
	_, next := updateClaimAnswer(t, l.updateClaim(a, a.FencingToken))
	if next == nil || next.ID != "b" {
		t.Fatalf("after the release at max_leased 1: %+v", next)
	}
	// An update that keeps the lease keeps the slot: nothing is claimed.
	r := l.do(NewCommand(KindTaskUpdateClaim, 0, "acme", "", &TaskUpdateClaimArgs{
		Update: TaskUpdateArgs{ID: "b", FencingToken: u64(next.FencingToken), Result: []byte(`1`)},
		Claim:  QueueClaimArgs{Queue: "q", Owner: "w", LeaseMs: 1000, Statuses: []string{"pending"}, Final: true},
	}))
	if upd, n := updateClaimAnswer(t, r); n != nil || string(upd.Result) != "1" || upd.Owner != "w" {
		t.Fatalf("without a release: %+v, next %+v", upd, n)
	}
	if s, _ := l.f.QueueStats("acme", "q"); s.Running != 1 {
		t.Fatalf("leased: %+v", s)
	}

	// A rate of one claim a second with a burst of one: the command's
	// claim spends it, the next within the second finds none.
	l = newLC(t)
	l.flowPolicy(QueuePolicy{ClaimsPerSecond: 1})
	for _, id := range []string{"a", "b", "c"} {
		l.create(&TaskCreateArgs{ID: id})
	}
	l.now += 1000
	a = l.claim(1000)
	l.now += 1000
	if _, next := updateClaimAnswer(t, l.updateClaim(a, a.FencingToken)); next == nil {
		t.Fatal("nothing claimed with a token in the bucket")
	}
	b := l.get("b")
	if _, next := updateClaimAnswer(t, l.updateClaim(b, b.FencingToken)); next != nil {
		t.Fatalf("claimed %q over the rate", next.ID)
	}
}

// TestUpdateClaimDependencies: the claim part takes no task that waits on
// dependencies, as a queue claim does; it sees the update's resolution of
// one, so finishing a task can hand its dependent to the same worker.
func TestUpdateClaimDependencies(t *testing.T) {
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "a"})
	l.create(&TaskCreateArgs{ID: "x", Status: "parked"})
	l.create(&TaskCreateArgs{ID: "after-x", DependsOn: []string{"x"}, Priority: 9})
	l.create(&TaskCreateArgs{ID: "after-a", DependsOn: []string{"a"}, Priority: 5})
	l.create(&TaskCreateArgs{ID: "b"})
	a := l.claim(1000)
	if a.ID != "a" {
		t.Fatalf("claimed %q", a.ID)
	}
	_, next := updateClaimAnswer(t, l.updateClaim(a, a.FencingToken))
	if next == nil || next.ID != "after-a" {
		t.Fatalf("after finishing a, claimed %+v, want after-a (after-x waits on x)", next)
	}
	_, next = updateClaimAnswer(t, l.updateClaim(next, next.FencingToken))
	if next == nil || next.ID != "b" {
		t.Fatalf("then claimed %+v, want b", next)
	}
}

// TestUpdateClaimReplay: a retry with the same Idempotency-Key gets the
// first answer again, both tasks, and claims nothing more.
func TestUpdateClaimReplay(t *testing.T) {
	l := newLC(t)
	for _, id := range []string{"a", "b", "c"} {
		l.create(&TaskCreateArgs{ID: id})
	}
	a := l.claim(1000)
	cmd := func() *Command {
		return idem(NewCommand(KindTaskUpdateClaim, 0, "acme", "", &TaskUpdateClaimArgs{
			Update: TaskUpdateArgs{ID: a.ID, FencingToken: u64(a.FencingToken), Status: new("done"), Release: true},
			Claim:  QueueClaimArgs{Queue: "q", Owner: "w", LeaseMs: 1000, Statuses: []string{"pending"}, Final: true},
		}), "", "k1", "fp", DefaultIdempotencyTTL)
	}
	first := l.do(cmd())
	_, next := updateClaimAnswer(t, first)
	second := l.do(cmd())
	if !second.Replay || string(second.JSON()) != string(first.JSON()) {
		t.Fatalf("retry: replay %v, %s, want %s", second.Replay, second.JSON(), first.JSON())
	}
	if got := l.get("c"); got.Owner != "" {
		t.Fatalf("the retry claimed c: %+v", got)
	}
	if got := l.get(next.ID); got.FencingToken != next.FencingToken {
		t.Fatalf("the retry changed %q: %+v", next.ID, got)
	}
}

// TestUpdateClaimEntryVersion: the kind is written in EntryVersion6
// entries only; a version 5 entry holding it is refused.
func TestUpdateClaimEntryVersion(t *testing.T) {
	c := NewCommand(KindTaskUpdateClaim, 1, "acme", "", &TaskUpdateClaimArgs{
		Update: TaskUpdateArgs{ID: "a"}, Claim: QueueClaimArgs{Queue: "q", Owner: "w", LeaseMs: 1}})
	e := EncodeEntry([]*Command{c})
	if e[0] != EntryVersion6 {
		t.Fatalf("entry version %d", e[0])
	}
	if _, err := DecodeEntry(append([]byte{EntryVersion5}, e[1:]...)); err == nil {
		t.Fatal("a version 5 entry with a task.update_claim decoded")
	}
}

// BenchmarkQueueTask measures what every replica does for one task of the
// queue workload (claim set running, then a fenced update to done with
// release), each command with an Idempotency-Key so that its answer is
// encoded and remembered as a session's would be: as two commands
// (queue claim, then update), and as one task.update_claim per task.
// go test -bench QueueTask -run '^$' ./fsm/
func BenchmarkQueueTask(b *testing.B) {
	const n = 100_000
	running, done := "running", "done"
	claimArgs := QueueClaimArgs{Queue: "q", Owner: "w", LeaseMs: 60_000, Statuses: []string{"pending"}, SetStatus: &running, Final: true}
	for _, mode := range []string{"two-commands", "update-claim"} {
		b.Run(mode, func(b *testing.B) {
			f := New()
			index := loadQueue(b, f, n)
			key := 0
			apply := func(kind Kind, args any) *Result {
				c := NewCommand(kind, 2, "b", "", args)
				key++
				c.IdemKey, c.IdemFP, c.IdemTTL = fmt.Sprintf("%032x", key), []byte("fingerprint-of-the-request-body!!"), DefaultIdempotencyTTL
				out := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: EncodeEntry([]*Command{c})})
				index++
				r := out.([]*Result)[0]
				if !r.OK() {
					b.Fatalf("%s: %s %s", kind, r.Code, r.Message)
				}
				r.JSON()
				return r
			}
			held := resultTask(apply(KindTaskQueueClaim, &claimArgs).Obj)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N && held != nil; i++ {
				tok := held.FencingToken
				update := TaskUpdateArgs{ID: held.ID, FencingToken: &tok, Status: &done, Release: true}
				if mode == "two-commands" {
					apply(KindTaskUpdate, &update)
					held = resultTask(apply(KindTaskQueueClaim, &claimArgs).Obj)
				} else {
					held = resultTask(apply(KindTaskUpdateClaim, &TaskUpdateClaimArgs{Update: update, Claim: claimArgs}).Obj.(*UpdateClaimAnswer).Next)
				}
			}
		})
	}
}
