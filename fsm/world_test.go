package fsm

import (
	"encoding/json"
	"testing"
)

// world applies commands one per log entry, at growing indexes and leader
// times, for the unit tests of each kind's semantics.
type world struct {
	t     testing.TB
	f     *FSM
	index uint64
	now   int64
}

// newWorld is an FSM holding tenant "acme".
func newWorld(t testing.TB) *world {
	w := &world{t: t, f: New(), now: 1_000_000}
	w.ok(KindTenantPut, "acme", &TenantPutArgs{Name: "acme"})
	return w
}

// do applies one command of kind for tenant, 10 ms after the last one.
func (w *world) do(kind Kind, tenant string, args any) *Result {
	w.t.Helper()
	w.index++
	w.now += 10
	return applyOne(w.t, w.f, w.index, NewCommand(kind, w.now, tenant, "", args))
}

// ok applies a command that must succeed.
func (w *world) ok(kind Kind, tenant string, args any) *Result {
	w.t.Helper()
	r := w.do(kind, tenant, args)
	if !r.OK() {
		w.t.Fatalf("%s %+v: got %s (%s %s), want success", kind, args, r.Code, r.Message, r.Details)
	}
	return r
}

// refused applies a command that must fail with code and change nothing
// but the clock; it returns the result's details.
func (w *world) refused(code string, kind Kind, tenant string, args any) map[string]any {
	w.t.Helper()
	before := w.f.Status().Keys
	beforeSum := w.f.st.sum
	r := w.do(kind, tenant, args)
	if r.Code != code {
		w.t.Fatalf("%s %+v: got %s, want %s", kind, args, describe(r), code)
	}
	if w.f.st.sum != beforeSum || w.f.Status().Keys != before {
		w.t.Fatalf("%s refused with %s changed the state", kind, code)
	}
	details := map[string]any{}
	if len(r.Details) > 0 {
		if err := json.Unmarshal(r.Details, &details); err != nil {
			w.t.Fatalf("%s: details %s: %v", kind, r.Details, err)
		}
	}
	return details
}

// claim claims task id (creating it first if needed) for owner, with a
// lease over by the next command, and returns the fencing token.
func (w *world) claim(tenant, id, owner string) uint64 {
	w.t.Helper()
	if t, _, ok := w.f.GetTask(tenant, id); !ok || t == nil {
		w.ok(KindTaskCreate, tenant, &TaskCreateArgs{ID: id, Queue: "q"})
	}
	r := w.ok(KindTaskClaim, tenant, &TaskClaimArgs{ID: id, Owner: owner, LeaseMs: 5}) // over by the next command
	return r.Obj.(*Task).FencingToken
}

// obj returns a result's body as JSON fields.
func obj(t testing.TB, r *Result) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.JSON(), &m); err != nil {
		t.Fatalf("result body %s: %v", r.JSON(), err)
	}
	return m
}
