package fsm

import (
	"strings"
	"testing"
)

// TestTxn: a transaction applies its ops in order, each seeing the ones
// before; the first failing op fails it with its op_index and nothing of
// it applies.
func TestTxn(t *testing.T) {
	w := newWorld(t)
	ops := func(ops ...TxnOp) *TxnArgs { return &TxnArgs{Ops: ops} }
	op := func(k Kind, args any) TxnOp { return TxnOp{Kind: k, Args: encode(args)} }

	r := w.ok(KindTxn, "acme", ops(
		op(KindTaskCreate, &TaskCreateArgs{ID: "t1", Queue: "q"}),
		op(KindTaskClaim, &TaskClaimArgs{ID: "t1", Owner: "w", LeaseMs: 1000}),
		op(KindKVPut, &KVPutArgs{Namespace: "ns", Key: "k", Value: []byte(`1`), ExpectVersion: ptr(uint64(0))}),
	))
	res := obj(t, r)["results"].([]any)
	if len(res) != 3 || res[1].(map[string]any)["owner"] != "w" || res[2].(map[string]any)["value"] != float64(1) {
		t.Fatalf("txn results: %v", res)
	}
	tk, _, _ := w.f.GetTask("acme", "t1")
	if tk.Owner != "w" {
		t.Errorf("task after the transaction: %+v", tk)
	}

	d := w.refused(CodeVersionMismatch, KindTxn, "acme", ops(
		op(KindTaskCreate, &TaskCreateArgs{ID: "t2", Queue: "q"}),
		op(KindKVDelete, &KVDeleteArgs{Namespace: "ns", Key: "k"}),
		op(KindKVPut, &KVPutArgs{Namespace: "ns", Key: "k", Value: []byte(`2`), ExpectVersion: ptr(uint64(5))}),
	))
	if d["op_index"] != float64(2) || d["current_version"] != float64(0) {
		t.Errorf("failed op's details: %v, want op_index 2 and its own current_version 0", d)
	}
	if _, _, ok := w.f.GetTask("acme", "t2"); ok {
		t.Errorf("a failed transaction's first op applied")
	}
	tok := tk.FencingToken
	d = w.refused(CodeFenced, KindTxn, "acme", ops(
		op(KindTaskUpdate, &TaskUpdateArgs{ID: "t1", FencingToken: &tok, Status: ptr("done")}),
		op(KindRefSet, &RefSetArgs{Ref: "r", ArtifactID: "sha256:a", Fence: &Fence{TaskID: "t1", Token: tok - 1}}),
	))
	if d["op_index"] != float64(1) {
		t.Errorf("fenced op: details %v, want op_index 1", d)
	}

	for _, bad := range []*TxnArgs{
		ops(),
		ops(op(KindKVPut, kvArgs("a", `1`)), op(KindTaskDelete, &TaskDeleteArgs{ID: "t1"})),
		ops(op(KindTxn, ops(op(KindKVPut, kvArgs("a", `1`))))),
		{Ops: make([]TxnOp, MaxTxnOps+1)},
	} {
		r := w.do(KindTxn, "acme", bad)
		if r.Code != CodeInvalidArgument {
			t.Errorf("txn of %d ops: %s, want invalid_argument", len(bad.Ops), describe(r))
		}
		if len(bad.Ops) == 2 && !strings.Contains(string(r.Details), `"op_index":1`) {
			t.Errorf("disallowed kind: details %s, want op_index 1", r.Details)
		}
	}
	if _, _, ok := w.f.GetKV("acme", "ns", "a", w.now); ok {
		t.Errorf("an invalid transaction applied an op")
	}
}
