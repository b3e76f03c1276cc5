package fsm

import (
	"encoding/json"
	"strings"
	"testing"
)

// claimMax is a queue claim of "q" for up to max tasks, stamped as the
// leader stamps it, set to running.
func (l *lc) claimMax(max int64) *Result {
	l.t.Helper()
	c := NewCommand(KindTaskQueueClaim, 0, "acme", "", &QueueClaimArgs{Queue: "q", Owner: "w", LeaseMs: 1000,
		Statuses: []string{"pending"}, SetStatus: new("running"), Max: max})
	l.f.Stamp(c)
	return l.do(c)
}

func batchTasks(t *testing.T, objs []any) []*Task {
	t.Helper()
	out := make([]*Task, len(objs))
	for i, o := range objs {
		if out[i] = resultTask(o); out[i] == nil {
			t.Fatalf("claimed %T", o)
		}
	}
	return out
}

// TestClaimMax: one command claims up to max tasks, best first, each with
// its own fencing token (all distinct, increasing) and its own lease, as
// that many single claims would; fewer when fewer are claimable, and no
// content when none is.
func TestClaimMax(t *testing.T) {
	l := newLC(t)
	for _, id := range []string{"a", "b", "c", "d"} {
		l.create(&TaskCreateArgs{ID: id})
	}
	l.create(&TaskCreateArgs{ID: "top", Priority: 9})
	r := l.claimMax(3)
	if !r.OK() || r.Outcome != OutcomeOK {
		t.Fatalf("claim max 3: %s %s", r.Code, r.Message)
	}
	got := batchTasks(t, r.Obj.(*ClaimBatch).Tasks)
	if len(got) != 3 || got[0].ID != "top" || got[1].ID != "a" || got[2].ID != "b" {
		t.Fatalf("claimed %d tasks: %+v", len(got), got)
	}
	for i, task := range got {
		stored := l.get(task.ID)
		if stored.Owner != "w" || stored.Status != "running" || stored.LeaseUntil != l.now+1000 || stored.Attempt != 1 ||
			stored.FencingToken != task.FencingToken {
			t.Fatalf("task %d stored %+v, answered %+v", i, stored, task)
		}
		if i > 0 && task.FencingToken <= got[i-1].FencingToken {
			t.Fatalf("tokens not increasing: %d then %d", got[i-1].FencingToken, task.FencingToken)
		}
	}
	var body map[string][]json.RawMessage
	if err := json.Unmarshal(r.JSON(), &body); err != nil || len(body["tasks"]) != 3 {
		t.Fatalf("answer %s: %v", r.JSON(), err)
	}
	// Two left, max 5: the two.
	r = l.claimMax(5)
	if got := batchTasks(t, r.Obj.(*ClaimBatch).Tasks); len(got) != 2 || got[0].ID != "c" || got[1].ID != "d" {
		t.Fatalf("claimed %+v", got)
	}
	if r = l.claimMax(5); !r.OK() || r.Outcome != OutcomeNoContent || r.Obj != nil {
		t.Fatalf("empty queue: %s %s %v %+v", r.Code, r.Message, r.Outcome, r.Obj)
	}
	// A completed one is finished under its own token, the others keep theirs.
	a := l.get("a")
	l.ok(NewCommand(KindTaskUpdate, 0, "acme", "", &TaskUpdateArgs{ID: "a", FencingToken: u64(a.FencingToken), Status: new("done"), Release: true}))
	if b := l.get("b"); b.Owner != "w" || b.Status != "running" {
		t.Fatalf("b after a's update: %+v", b)
	}
}

// TestClaimMaxBounds: max is 1 to MaxClaimBatch; a bad max writes nothing.
func TestClaimMaxBounds(t *testing.T) {
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "a"})
	for _, max := range []int64{-1, MaxClaimBatch + 1} {
		if r := l.claimMax(max); r.OK() || r.Code != CodeInvalidArgument {
			t.Fatalf("max %d: %s %s", max, r.Code, r.Message)
		}
	}
	if a := l.get("a"); a.Owner != "" || a.Version != 1 {
		t.Fatalf("a bad max wrote: %+v", a)
	}
	for i := range MaxClaimBatch + 10 {
		l.create(&TaskCreateArgs{ID: "t" + string(rune('A'+i/26)) + string(rune('a'+i%26))})
	}
	r := l.claimMax(MaxClaimBatch)
	if n := len(r.Obj.(*ClaimBatch).Tasks); n != MaxClaimBatch {
		t.Fatalf("max %d claimed %d", MaxClaimBatch, n)
	}
}

// TestClaimMaxFlow: a batch claim stops at the queue's max_leased as
// single claims would.
func TestClaimMaxFlow(t *testing.T) {
	l := newLC(t)
	l.flowPolicy(QueuePolicy{MaxLeased: 2})
	for _, id := range []string{"a", "b", "c"} {
		l.create(&TaskCreateArgs{ID: id})
	}
	r := l.claimMax(3)
	if got := batchTasks(t, r.Obj.(*ClaimBatch).Tasks); len(got) != 2 {
		t.Fatalf("at max_leased 2 claimed %d", len(got))
	}
}

// TestClaimMaxVersion: max is written in an EntryVersion6 entry; a claim
// without it stays the entry it was.
func TestClaimMaxVersion(t *testing.T) {
	with := NewCommand(KindTaskQueueClaim, 0, "acme", "", &QueueClaimArgs{Queue: "q", Owner: "w", LeaseMs: 1, Max: 2})
	without := NewCommand(KindTaskQueueClaim, 0, "acme", "", &QueueClaimArgs{Queue: "q", Owner: "w", LeaseMs: 1})
	if v := EncodeEntry([]*Command{with})[0]; v != EntryVersion6 {
		t.Fatalf("with max: entry version %d", v)
	}
	if v := EncodeEntry([]*Command{without})[0]; v != EntryVersion {
		t.Fatalf("without max: entry version %d", v)
	}
	back, err := DecodeEntry(EncodeEntry([]*Command{with}))
	if err != nil {
		t.Fatal(err)
	}
	var a QueueClaimArgs
	if err := decode(back[0].Args, &a); err != nil || a.Max != 2 {
		t.Fatalf("decoded %+v: %v", a, err)
	}
}

// batch is a task.update_batch of "acme" claiming up to max of "q" (0: no claim).
func (l *lc) batch(max int64, updates ...TaskUpdateArgs) *Result {
	l.t.Helper()
	a := &TaskUpdateBatchArgs{Updates: updates}
	if max != 0 {
		a.Claim = &QueueClaimArgs{Queue: "q", Owner: "w", LeaseMs: 1000, Statuses: []string{"pending"}, SetStatus: new("running"), Max: max, Final: true}
	}
	return l.do(NewCommand(KindTaskUpdateBatch, 0, "acme", "", a))
}

func done(task *Task, token uint64) TaskUpdateArgs {
	return TaskUpdateArgs{ID: task.ID, FencingToken: u64(token), Status: new("done"), Release: true}
}

// TestUpdateBatch: each update has its own outcome; a stale fencing token
// refuses its update alone, writes nothing of it, and the others and the
// claim go on; the claim sees the released tasks.
func TestUpdateBatch(t *testing.T) {
	l := newLC(t)
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		l.create(&TaskCreateArgs{ID: id})
	}
	l.flowPolicy(QueuePolicy{MaxLeased: 3})
	got := batchTasks(t, l.claimMax(3).Obj.(*ClaimBatch).Tasks)
	if len(got) != 3 {
		t.Fatalf("claimed %d", len(got))
	}
	bBefore := l.get("b")
	r := l.batch(3, done(got[0], got[0].FencingToken), done(got[1], got[1].FencingToken-1), done(got[2], got[2].FencingToken))
	if !r.OK() {
		t.Fatalf("batch: %s %s", r.Code, r.Message)
	}
	ans := r.Obj.(*UpdateBatchAnswer)
	if len(ans.Results) != 3 || ans.Results[0].Task == nil || ans.Results[0].Task.Status != "done" ||
		ans.Results[1].Error == nil || ans.Results[1].Error.Code != CodeFenced || ans.Results[1].Task != nil ||
		ans.Results[2].Task == nil || ans.Results[2].Task.Status != "done" {
		t.Fatalf("results: %s", r.JSON())
	}
	if b := l.get("b"); string(mustJSON(b)) != string(mustJSON(bBefore)) {
		t.Fatalf("a refused update wrote: %+v, was %+v", b, bBefore)
	}
	// Two released of max_leased 3 (b still leased): two claimed.
	next := batchTasks(t, ans.Next)
	if len(next) != 2 || next[0].ID != "d" || next[1].ID != "e" || next[0].FencingToken == next[1].FencingToken {
		t.Fatalf("next: %s", r.JSON())
	}
	var body struct {
		Results []map[string]json.RawMessage `json:"results"`
		Next    []json.RawMessage            `json:"next"`
	}
	if err := json.Unmarshal(r.JSON(), &body); err != nil || len(body.Results) != 3 || body.Results[1]["error"] == nil || len(body.Next) != 2 {
		t.Fatalf("answer %s: %v", r.JSON(), err)
	}
	// Nothing claimable: next is an empty list, the updates are made.
	d := l.get("d")
	r = l.batch(2, done(d, d.FencingToken))
	if ans := r.Obj.(*UpdateBatchAnswer); !r.OK() || len(ans.Next) != 0 || ans.Results[0].Task == nil || string(mustJSON(ans.Next)) != "[]" {
		t.Fatalf("on an empty queue: %s %s", r.Code, r.JSON())
	}
}

// TestUpdateBatchBounds: no updates and no claim, too many updates, a bad
// max or an invalid JSON result refuse the whole command, writing nothing.
func TestUpdateBatchBounds(t *testing.T) {
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "a"})
	a := l.claim(1000)
	ok := done(a, a.FencingToken)
	bad := ok
	bad.Result = []byte("{not json")
	many := make([]TaskUpdateArgs, MaxBatchUpdates+1)
	for i := range many {
		many[i] = ok
	}
	for name, r := range map[string]*Result{
		"empty":     l.batch(0),
		"too many":  l.batch(0, many...),
		"max":       l.batch(MaxClaimBatch+1, ok),
		"bad JSON":  l.batch(1, ok, bad),
		"max below": l.batch(-1, ok),
	} {
		if r.OK() || r.Code != CodeInvalidArgument {
			t.Fatalf("%s: %s %s", name, r.Code, r.Message)
		}
	}
	if got := l.get("a"); got.Status != "pending" || got.Owner != "w" || got.Version != a.Version {
		t.Fatalf("a refused batch wrote: %+v", got)
	}
}

// TestUpdateBatchAsSingles: a batch leaves the state that its updates
// sent alone, one after the other, then its claims, leave.
func TestUpdateBatchAsSingles(t *testing.T) {
	run := func(batched bool) []byte {
		l := newLC(t)
		for _, id := range []string{"a", "b", "c", "d"} {
			l.create(&TaskCreateArgs{ID: id, MaxAttempts: 2})
		}
		got := batchTasks(t, l.claimMax(2).Obj.(*ClaimBatch).Tasks)
		ups := []TaskUpdateArgs{done(got[0], got[0].FencingToken), done(got[1], 1)}
		if batched {
			l.batch(2, ups...)
		} else {
			for _, u := range ups {
				l.do(NewCommand(KindTaskUpdate, 0, "acme", "", &u))
			}
			l.claimMax(2)
		}
		var out []byte
		for _, id := range []string{"a", "b", "c", "d"} {
			task := l.get(id)
			task.FencingToken, task.Version = 0, 0 // positions differ by entry
			out = append(out, mustJSON(task)...)
		}
		return out
	}
	if a, b := run(true), run(false); string(a) != string(b) {
		t.Fatalf("batched:\n%s\nsingles:\n%s", a, b)
	}
}

// TestUpdateBatchGrants: a principal's update of a task of a queue its
// grants do not cover is refused alone with forbidden (the code
// docs/api.md names), as that update alone would be; the others apply.
// The server checks the grants before proposing; this is the state
// machine's own check, which decides when a grant changed in between.
func TestUpdateBatchGrants(t *testing.T) {
	w := newWorld(t)
	rw := []string{"read", "write", "delete"}
	w.ok(KindPrincipalCreate, "acme", &PrincipalCreateArgs{Name: "w", TokenHash: "hw", Grants: []Grant{{Resource: "tasks", Prefix: "research", Actions: rw}}})
	w.ok(KindTaskCreate, "acme", &TaskCreateArgs{ID: "mine", Queue: "research"})
	w.ok(KindTaskCreate, "acme", &TaskCreateArgs{ID: "theirs", Queue: "secret-q", Payload: []byte(`{"secret":1}`)})
	before, _, _ := w.f.GetTask("acme", "theirs")
	c := NewCommand(KindTaskUpdateBatch, w.now+10, "acme", "w", &TaskUpdateBatchArgs{Updates: []TaskUpdateArgs{
		{ID: "mine", Status: new("done")}, {ID: "theirs", Status: new("done")}}})
	w.index++
	w.now += 10
	r := applyOne(t, w.f, w.index, c)
	if !r.OK() {
		t.Fatalf("batch: %s", describe(r))
	}
	ans := r.Obj.(*UpdateBatchAnswer)
	if ans.Results[0].Task == nil || ans.Results[0].Task.Status != "done" || ans.Results[1].Error == nil ||
		ans.Results[1].Error.Code != "forbidden" || ans.Results[1].Task != nil || strings.Contains(string(r.JSON()), "secret") {
		t.Fatalf("results: %s", r.JSON())
	}
	if after, _, _ := w.f.GetTask("acme", "theirs"); string(mustJSON(after)) != string(mustJSON(before)) {
		t.Fatalf("a refused update wrote: %+v, was %+v", after, before)
	}
}

// TestClaimMaxLeaseLive: a claim of up to max tasks whose lease would not
// be live once made (lease 0: the server never sends one) is refused as
// invalid, whether alone, in a batch or in claim_next, with nothing
// written. Otherwise the task it claims is claimable again at once and
// the same command claims it again and again: one task answered five
// times with five tokens and five attempts.
func TestClaimMaxLeaseLive(t *testing.T) {
	l := newLC(t)
	l.create(&TaskCreateArgs{ID: "b"})
	b := l.claim(1000)
	l.create(&TaskCreateArgs{ID: "a"})
	claim := QueueClaimArgs{Queue: "q", Owner: "w", LeaseMs: 0, Statuses: []string{"pending"}, Max: 5}
	for _, c := range []*Command{
		NewCommand(KindTaskQueueClaim, 0, "acme", "", &claim),
		NewCommand(KindTaskUpdateBatch, 0, "acme", "", &TaskUpdateBatchArgs{Claim: &claim}),
		NewCommand(KindTaskUpdateClaim, 0, "acme", "", &TaskUpdateClaimArgs{Update: TaskUpdateArgs{ID: b.ID, FencingToken: u64(b.FencingToken), Release: true}, Claim: claim}),
	} {
		l.f.Stamp(c)
		before := l.f.st.sum
		if r := l.do(c); r.Code != CodeInvalidArgument || !strings.Contains(r.Message, "lease_ms") {
			t.Errorf("%s with lease 0: %s %s %s, want invalid_argument", c.Kind, r.Code, r.Message, r.JSON())
		}
		if l.f.st.sum != before {
			t.Errorf("%s with lease 0 changed the state", c.Kind)
		}
	}
	if a := l.get("a"); a.Attempt != 0 || a.Owner != "" {
		t.Errorf("task a: %+v, want unclaimed", a)
	}
}
