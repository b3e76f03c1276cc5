package fsm

import "testing"

// TestOpLedger: op.begin is idempotent for the same params digest and
// refuses another; op.finish moves a started (or unknown) op once to a
// terminal state, a retried finish with the same outcome is answered
// again, and any other change to a terminal op is refused.
func TestOpLedger(t *testing.T) {
	w := newWorld(t)
	begin := func(digest string) *OpBeginArgs {
		return &OpBeginArgs{ID: "op1", Kind: "email", ParamsDigest: digest, TaskID: "t1"}
	}
	r := w.ok(KindOpBegin, "acme", begin("d1"))
	o := r.Obj.(*Op)
	if r.Outcome != OutcomeCreated || o.State != OpStarted || o.CreatedAt != w.now || o.Terminal() {
		t.Fatalf("begin: outcome %d op %+v, want a started op created now", r.Outcome, o)
	}
	created := o.CreatedAt
	r = w.ok(KindOpBegin, "acme", begin("d1"))
	if o := r.Obj.(*Op); r.Outcome != OutcomeOK || o.CreatedAt != created || o.State != OpStarted {
		t.Errorf("begin again: outcome %d op %+v, want the same op", r.Outcome, o)
	}
	if d := w.refused(CodeIdempotencyMismatch, KindOpBegin, "acme", begin("d2")); d["params_digest"] != "d1" {
		t.Errorf("begin with another digest: details %v, want params_digest d1", d)
	}

	w.refused(CodeNotFound, KindOpFinish, "acme", &OpFinishArgs{ID: "op2", State: OpSucceeded})
	w.ok(KindOpFinish, "acme", &OpFinishArgs{ID: "op1", State: OpUnknown}) // not terminal
	r = w.ok(KindOpFinish, "acme", &OpFinishArgs{ID: "op1", State: OpSucceeded, Result: []byte(`{"id":7}`)})
	o = r.Obj.(*Op)
	finished := o.UpdatedAt
	if !o.Terminal() || string(o.Result) != `{"id":7}` || finished != w.now {
		t.Fatalf("finish: %+v, want succeeded with the result, updated now", o)
	}
	r = w.ok(KindOpFinish, "acme", &OpFinishArgs{ID: "op1", State: OpSucceeded, Result: []byte(`{"id":7}`)})
	if o := r.Obj.(*Op); o.UpdatedAt != finished {
		t.Errorf("retried finish changed the op: updated %d, want %d", o.UpdatedAt, finished)
	}
	for _, a := range []*OpFinishArgs{
		{ID: "op1", State: OpSucceeded, Result: []byte(`{"id":8}`)},
		{ID: "op1", State: OpFailed, Result: []byte(`{"id":7}`)},
		{ID: "op1", State: OpUnknown},
	} {
		if d := w.refused(CodeVersionMismatch, KindOpFinish, "acme", a); d["current_state"] != OpSucceeded {
			t.Errorf("finish %s of a succeeded op: details %v, want current_state succeeded", a.State, d)
		}
	}
	// A begin of a finished op finds it as it is.
	if o := w.ok(KindOpBegin, "acme", begin("d1")).Obj.(*Op); o.State != OpSucceeded {
		t.Errorf("begin of a finished op: state %s, want succeeded", o.State)
	}
	got, _, ok := w.f.GetOp("acme", "op1")
	if !ok || got.State != OpSucceeded || got.TaskID != "t1" {
		t.Errorf("GetOp: %+v %v", got, ok)
	}
	m := obj(t, &Result{Obj: got})
	if m["op_id"] != "op1" || m["state"] != OpSucceeded || m["result"].(map[string]any)["id"] != float64(7) ||
		m["created_at"] != FormatMillis(created) {
		t.Errorf("op JSON: %v", m)
	}
	if _, _, ok := w.f.GetOp("beta", "op1"); ok {
		t.Errorf("another tenant sees acme's op")
	}
	// Ops are per tenant: beta's op1 is another op.
	w.ok(KindTenantPut, "beta", &TenantPutArgs{Name: "beta"})
	if r := w.ok(KindOpBegin, "beta", begin("d2")); r.Outcome != OutcomeCreated {
		t.Errorf("beta's op1: outcome %d, want created", r.Outcome)
	}
}
