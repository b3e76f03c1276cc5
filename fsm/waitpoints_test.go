package fsm

import (
	"encoding/json"
	"testing"
)

func (l *lc) wp(kind Kind, args any) *Result {
	l.t.Helper()
	return l.do(NewCommand(kind, 0, "acme", "", args))
}

// TestWaitpointPark: a holder parks its task on a waitpoint: the lease
// ends with its token retired, no claim takes the task, and once the
// waitpoint completes the task is claimable again and its claim carries
// the payload. Completing again with the same payload changes nothing;
// with another it is refused.
func TestWaitpointPark(t *testing.T) {
	l := newLC(t)
	if r := l.wp(KindWaitpointCreate, &WaitpointCreateArgs{ID: "approve-1", TimeoutMs: 60_000}); !r.OK() {
		t.Fatalf("create: %s %s", r.Code, r.Message)
	}
	if r := l.wp(KindWaitpointCreate, &WaitpointCreateArgs{ID: "approve-1", TimeoutMs: 60_000}); r.Code != CodeAlreadyExists {
		t.Fatalf("create again: %s", r.Code)
	}
	l.create(&TaskCreateArgs{ID: "a"})
	held := l.claim(10_000)
	if r := l.wp(KindTaskWait, &TaskWaitArgs{ID: "a", FencingToken: held.FencingToken + 1, WaitpointID: "approve-1"}); r.Code != CodeFenced {
		t.Fatalf("park with a stale token: %s", r.Code)
	}
	if r := l.wp(KindTaskWait, &TaskWaitArgs{ID: "a", FencingToken: held.FencingToken, WaitpointID: "nope"}); r.Code != CodeNotFound {
		t.Fatalf("park on a missing waitpoint: %s", r.Code)
	}
	parked := l.ok(NewCommand(KindTaskWait, 0, "acme", "", &TaskWaitArgs{ID: "a", FencingToken: held.FencingToken, WaitpointID: "approve-1"}))
	if !parked.Parked || parked.Owner != "" || parked.FencingToken <= held.FencingToken || !parked.blocked() {
		t.Fatalf("parked: %+v", parked)
	}
	if r := l.do(NewCommand(KindTaskUpdate, 0, "acme", "", &TaskUpdateArgs{ID: "a", FencingToken: u64(held.FencingToken), Result: []byte(`1`)})); r.Code != CodeFenced {
		t.Fatalf("write under the parked lease's token: %s", r.Code)
	}
	if got := l.claimOrNil(1000); got != nil {
		t.Fatal("a queue claim took a parked task")
	}
	if r := l.do(NewCommand(KindTaskClaim, 0, "acme", "", &TaskClaimArgs{ID: "a", Owner: "w", LeaseMs: 1000})); r.Code != CodeVersionMismatch {
		t.Fatalf("claim by id of a parked task: %s", r.Code)
	}
	if r := l.wp(KindWaitpointComplete, &WaitpointCompleteArgs{ID: "approve-1", Payload: []byte(`{"approved":true}`)}); !r.OK() {
		t.Fatalf("complete: %s %s", r.Code, r.Message)
	}
	v := l.get("a").Version
	if r := l.wp(KindWaitpointComplete, &WaitpointCompleteArgs{ID: "approve-1", Payload: []byte(`{"approved":true}`)}); !r.OK() || l.get("a").Version != v {
		t.Fatalf("the same completion again: %s", r.Code)
	}
	if r := l.wp(KindWaitpointComplete, &WaitpointCompleteArgs{ID: "approve-1", Payload: []byte(`{"approved":false}`)}); r.Code != CodeVersionMismatch {
		t.Fatalf("another completion: %s", r.Code)
	}
	r, body := l.claimByID("a")
	if !r.OK() {
		t.Fatalf("claim after the completion: %s %s", r.Code, r.Message)
	}
	var ans struct {
		WP waitpointOutput `json:"waitpoint"`
	}
	if err := json.Unmarshal(body, &ans); err != nil || ans.WP.State != WaitpointCompleted || string(ans.WP.Payload) != `{"approved":true}` {
		t.Fatalf("claim answer: %s", body)
	}
}

// TestWaitpointTimeout: a waitpoint that times out resumes its parked
// task with state timed_out, and can no longer be completed.
func TestWaitpointTimeout(t *testing.T) {
	l := newLC(t)
	l.wp(KindWaitpointCreate, &WaitpointCreateArgs{ID: "w", TimeoutMs: 1000})
	l.create(&TaskCreateArgs{ID: "a"})
	held := l.claim(10_000)
	l.ok(NewCommand(KindTaskWait, 0, "acme", "", &TaskWaitArgs{ID: "a", FencingToken: held.FencingToken, WaitpointID: "w"}))
	if next := l.f.NextWaitpointTimeout(); next != l.now+1000 {
		t.Fatalf("NextWaitpointTimeout %d", next)
	}
	l.wp(KindWaitpointExpire, &WaitpointExpireArgs{Max: 10}) // not yet
	if w, _, _ := l.f.GetWaitpoint("acme", "w"); w.State != WaitpointPending {
		t.Fatalf("expired early: %+v", w)
	}
	l.now += 1000
	l.wp(KindWaitpointExpire, &WaitpointExpireArgs{Max: 10})
	if w, _, _ := l.f.GetWaitpoint("acme", "w"); w.State != WaitpointTimedOut || l.f.NextWaitpointTimeout() != 0 {
		t.Fatalf("after the timeout: %+v", w)
	}
	if got := l.claimOrNil(1000); got == nil || got.ID != "a" {
		t.Fatal("the task is not claimable after its waitpoint timed out")
	}
	if r := l.wp(KindWaitpointComplete, &WaitpointCompleteArgs{ID: "w", Payload: []byte(`1`)}); r.Code != CodeVersionMismatch {
		t.Fatalf("complete after the timeout: %s", r.Code)
	}
	// Parking on a waitpoint that already resolved releases at once.
	held = l.claimOrNil(1000)
	if held != nil {
		t.Fatal("claimed twice")
	}
}

// TestWaitpointVersioning: the kinds are version 6 only, and a state with
// a parked task is snapshotFormat5.
func TestWaitpointVersioning(t *testing.T) {
	for _, c := range []*Command{
		NewCommand(KindWaitpointCreate, 1, "acme", "", &WaitpointCreateArgs{ID: "w", TimeoutMs: 1}),
		NewCommand(KindWaitpointComplete, 1, "acme", "", &WaitpointCompleteArgs{ID: "w", Payload: []byte(`1`)}),
		NewCommand(KindWaitpointExpire, 1, "", "", &WaitpointExpireArgs{Max: 1}),
		NewCommand(KindTaskWait, 1, "acme", "", &TaskWaitArgs{ID: "a", WaitpointID: "w"}),
	} {
		e := EncodeEntry([]*Command{c})
		if _, err := DecodeEntry(append([]byte{EntryVersion5}, e[1:]...)); e[0] != EntryVersion6 || err == nil {
			t.Fatalf("%s: written as version %d, accepted in version 5: %v", c.Kind, e[0], err == nil)
		}
	}
	l := newLC(t)
	l.wp(KindWaitpointCreate, &WaitpointCreateArgs{ID: "w", TimeoutMs: 60_000})
	l.create(&TaskCreateArgs{ID: "a"})
	held := l.claim(10_000)
	l.ok(NewCommand(KindTaskWait, 0, "acme", "", &TaskWaitArgs{ID: "a", FencingToken: held.FencingToken, WaitpointID: "w"}))
	if f := snapshotFormatOf(l.f.st); f != snapshotFormat5 {
		t.Fatalf("format %d", f)
	}
}
