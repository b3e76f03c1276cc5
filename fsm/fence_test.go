package fsm

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

// TestFenceGuardsEveryWrite: every write that takes a fence applies with
// the task's current token and is refused, as fenced with the current
// token in the details and no change to the state, with a stale token,
// with the token of a task that was claimed again, and with a fence naming
// a task that does not exist (current_token 0) or is in another tenant.
func TestFenceGuardsEveryWrite(t *testing.T) {
	chunk := ChunkRef{Digest: fmt.Sprintf("sha256:%064x", 1), Size: 5}
	cases := []struct {
		kind Kind
		args func(fc *Fence, artifact string) any
	}{
		{KindKVPut, func(fc *Fence, _ string) any {
			return &KVPutArgs{Namespace: "ns", Key: "k", Value: []byte(`2`), Fence: fc}
		}},
		{KindKVDelete, func(fc *Fence, _ string) any { return &KVDeleteArgs{Namespace: "ns", Key: "k", Fence: fc} }},
		{KindCheckpointPut, func(fc *Fence, _ string) any {
			return &CheckpointPutArgs{Thread: "th", ID: "c2", ParentID: "c1", Fence: fc}
		}},
		{KindCheckpointWrites, func(fc *Fence, _ string) any {
			return &CheckpointWritesArgs{Thread: "th", ID: "c1", TaskID: "t1", Writes: []byte(`[]`), Fence: fc}
		}},
		{KindThreadDelete, func(fc *Fence, _ string) any { return &ThreadDeleteArgs{Thread: "th", Fence: fc} }},
		{KindOpBegin, func(fc *Fence, _ string) any {
			return &OpBeginArgs{ID: "op2", Kind: "email", ParamsDigest: "d", Fence: fc}
		}},
		{KindOpFinish, func(fc *Fence, _ string) any {
			return &OpFinishArgs{ID: "op1", State: OpSucceeded, Fence: fc}
		}},
		{KindArtifactPublish, func(fc *Fence, _ string) any {
			return &ArtifactPublishArgs{Name: "b", Digest: "sha256:b", Size: 5, Chunks: []ChunkRef{chunk}, Fence: fc}
		}},
		{KindRefSet, func(fc *Fence, artifact string) any {
			return &RefSetArgs{Ref: "r", ArtifactID: artifact, Fence: fc}
		}},
	}
	for _, tc := range cases {
		t.Run(string(tc.kind), func(t *testing.T) {
			w := newWorld(t)
			w.ok(KindTenantPut, "other", &TenantPutArgs{Name: "other"})
			old := w.claim("acme", "t1", "w1")
			cur := w.claim("acme", "t1", "w2") // claimed again: old is stale
			otherTok := w.claim("other", "t1", "w3")
			if cur <= old {
				t.Fatalf("a later claim's token %d is not above the earlier %d", cur, old)
			}
			// What each guarded write needs to succeed.
			w.ok(KindKVPut, "acme", &KVPutArgs{Namespace: "ns", Key: "k", Value: []byte(`1`)})
			w.ok(KindCheckpointPut, "acme", &CheckpointPutArgs{Thread: "th", ID: "c1"})
			w.ok(KindOpBegin, "acme", &OpBeginArgs{ID: "op1", Kind: "email", ParamsDigest: "d"})
			w.ok(KindChunkHeld, "acme", &ChunkHeldArgs{Digest: chunk.Digest, Size: chunk.Size})
			art := w.ok(KindArtifactPublish, "acme", &ArtifactPublishArgs{Name: "a", Digest: "sha256:a", Size: 5,
				Chunks: []ChunkRef{chunk}}).Obj.(*Manifest).ArtifactID

			for _, bad := range []struct {
				fc   *Fence
				want float64
			}{
				{&Fence{TaskID: "t1", Token: old}, float64(cur)},
				{&Fence{TaskID: "t1", Token: cur + 1}, float64(cur)},
				{&Fence{TaskID: "t1", Token: 0}, float64(cur)},
				{&Fence{TaskID: "t1", Token: otherTok}, float64(cur)}, // another tenant's task of the same id
				{&Fence{TaskID: "nope", Token: cur}, 0},
			} {
				d := w.refused(CodeFenced, tc.kind, "acme", tc.args(bad.fc, art))
				if d["current_token"] != bad.want {
					t.Errorf("fence %+v: current_token %v, want %v", *bad.fc, d["current_token"], bad.want)
				}
			}
			w.ok(tc.kind, "acme", tc.args(&Fence{TaskID: "t1", Token: cur}, art))
		})
	}
}

// TestFenceFollowsTheTask: a task update or release does not change the
// token, a new claim does, and a deleted task fences everyone out.
func TestFenceFollowsTheTask(t *testing.T) {
	w := newWorld(t)
	tok := w.claim("acme", "t1", "w1")
	put := func(tok uint64) *KVPutArgs {
		return &KVPutArgs{Namespace: "ns", Key: "k", Value: []byte(`1`), Fence: &Fence{TaskID: "t1", Token: tok}}
	}
	w.ok(KindTaskRenew, "acme", &TaskRenewArgs{ID: "t1", FencingToken: tok, LeaseMs: 1000})
	w.ok(KindKVPut, "acme", put(tok))
	w.ok(KindTaskUpdate, "acme", &TaskUpdateArgs{ID: "t1", FencingToken: &tok, Release: true})
	w.ok(KindKVPut, "acme", put(tok)) // released, not re-claimed: the token still holds
	next := w.claim("acme", "t1", "w2")
	w.refused(CodeFenced, KindKVPut, "acme", put(tok))
	w.ok(KindKVPut, "acme", put(next))
	w.ok(KindTaskDelete, "acme", &TaskDeleteArgs{ID: "t1"})
	if d := w.refused(CodeFenced, KindKVPut, "acme", put(next)); d["current_token"] != float64(0) {
		t.Errorf("fence on a deleted task: current_token %v, want 0", d["current_token"])
	}
}

// TestFenceHidesTasksOutsideGrant: in a version 5 entry, a principal's
// fence naming a task it may not read is refused as if the task did not
// exist (current_token 0, one message for both), whatever the token, also
// inside a transaction; a task it may read is guarded as before, and so is
// everything in older entries and for the admin.
func TestFenceHidesTasksOutsideGrant(t *testing.T) {
	w := newWorld(t)
	w.ok(KindPrincipalCreate, "acme", &PrincipalCreateArgs{Name: "spy", TokenHash: "hs", Grants: []Grant{
		{Resource: "kv", Prefix: "", Actions: []string{"read", "write"}},
		{Resource: "tasks", Prefix: "research", Actions: []string{"read"}}}})
	secret := w.claim("acme", "secret-1", "w") // in queue "q"
	w.ok(KindTaskCreate, "acme", &TaskCreateArgs{ID: "r-1", Queue: "research"})
	research := w.ok(KindTaskClaim, "acme", &TaskClaimArgs{ID: "r-1", Owner: "w", LeaseMs: 60_000}).Obj.(*Task).FencingToken
	put := func(fc *Fence) *KVPutArgs {
		return &KVPutArgs{Namespace: "ns", Key: "k", Value: []byte(`1`), Fence: fc}
	}
	txn := func(fc *Fence) *TxnArgs {
		return &TxnArgs{Ops: []TxnOp{{Kind: KindKVPut, Args: EncodeArgs(put(fc))}}}
	}
	const hidden = `fence names task "%s", which does not exist or is outside the caller's task grants`
	cases := []struct {
		name      string
		principal string
		kind      Kind
		args      any
		oldEntry  bool // written as before version 5
		wantCode  string
		wantToken float64
		wantMsg   string
	}{
		{"current token outside the grant", "spy", KindKVPut, put(&Fence{TaskID: "secret-1", Token: secret}), false, CodeFenced, 0, fmt.Sprintf(hidden, "secret-1")},
		{"stale token outside the grant", "spy", KindKVPut, put(&Fence{TaskID: "secret-1", Token: secret + 1}), false, CodeFenced, 0, fmt.Sprintf(hidden, "secret-1")},
		{"missing task", "spy", KindKVPut, put(&Fence{TaskID: "nope", Token: 3}), false, CodeFenced, 0, fmt.Sprintf(hidden, "nope")},
		{"in a transaction", "spy", KindTxn, txn(&Fence{TaskID: "secret-1", Token: secret}), false, CodeFenced, 0, "op 0: " + fmt.Sprintf(hidden, "secret-1")},
		{"stale token inside the grant", "spy", KindKVPut, put(&Fence{TaskID: "r-1", Token: research + 1}), false, CodeFenced, float64(research), ""},
		{"current token inside the grant", "spy", KindKVPut, put(&Fence{TaskID: "r-1", Token: research}), false, "", 0, ""},
		{"the admin", "", KindKVPut, put(&Fence{TaskID: "secret-1", Token: secret}), false, "", 0, ""},
		{"an entry before version 5", "spy", KindKVPut, put(&Fence{TaskID: "secret-1", Token: secret}), true, "", 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCommand(tc.kind, w.now+10, "acme", tc.principal, tc.args)
			if tc.principal != "" && c.ver != EntryVersion5 {
				t.Errorf("command's entry version: got %d, want %d", c.ver, EntryVersion5)
			}
			if tc.oldEntry {
				c.ver = 0
			}
			w.index++
			w.now += 10
			r := applyOne(t, w.f, w.index, c)
			if r.Code != tc.wantCode {
				t.Fatalf("got %s, want code %q", describe(r), tc.wantCode)
			}
			if tc.wantCode == "" {
				return
			}
			var d map[string]any
			if err := json.Unmarshal(r.Details, &d); err != nil || d["current_token"] != tc.wantToken {
				t.Errorf("details: got %s (%v), want current_token %v", r.Details, err, tc.wantToken)
			}
			if tc.wantMsg != "" && r.Message != tc.wantMsg {
				t.Errorf("message: got %q, want %q", r.Message, tc.wantMsg)
			}
		})
	}
}

// TestFenceEntryVersion: every kind whose args take a fence is known to
// fenceEntryVersion, which puts a principal's fenced command in a version 5
// entry and leaves the admin's, and unfenced ones, as they were.
func TestFenceEntryVersion(t *testing.T) {
	for _, kind := range []Kind{KindKVPut, KindKVDelete, KindCheckpointPut, KindCheckpointWrites, KindThreadDelete,
		KindOpBegin, KindOpFinish, KindArtifactPublish, KindRefSet} {
		i, ok := fenceFields[kind]
		if !ok {
			t.Errorf("%s: got no fence field, want one", kind)
			continue
		}
		args := reflect.New(argTypes[kind].Elem())
		if got := fenceEntryVersion(kind, "p", args.Interface()); got != 0 {
			t.Errorf("%s without a fence: got version %d, want 0", kind, got)
		}
		args.Elem().Field(i).Set(reflect.ValueOf(&Fence{TaskID: "t", Token: 1}))
		if got := fenceEntryVersion(kind, "p", args.Interface()); got != EntryVersion5 {
			t.Errorf("%s with a fence: got version %d, want %d", kind, got, EntryVersion5)
		}
		if got := fenceEntryVersion(kind, "", args.Interface()); got != 0 {
			t.Errorf("%s with a fence, by the admin: got version %d, want 0", kind, got)
		}
	}
}

// TestTaskWritesCheckedAsTheyApply: in a version 5 entry, a principal's
// write of a task by id is checked against the task as it applies: a task
// now in a queue outside its grants (its id deleted and created again
// there after the handler looked), or a missing one when its grants do not
// cover every queue, is refused with the handler's 403 and nothing
// changes; the admin's writes and older entries apply as before.
func TestTaskWritesCheckedAsTheyApply(t *testing.T) {
	kinds := []struct {
		kind Kind
		args func(id string) any
	}{
		{KindTaskClaim, func(id string) any { return &TaskClaimArgs{ID: id, Owner: "thief", LeaseMs: 60_000} }},
		{KindTaskRenew, func(id string) any { return &TaskRenewArgs{ID: id, FencingToken: 1, LeaseMs: 60_000} }},
		{KindTaskUpdate, func(id string) any { return &TaskUpdateArgs{ID: id, Payload: []byte(`{"stolen":true}`)} }},
		{KindTaskFail, func(id string) any { return &TaskFailArgs{ID: id, FencingToken: 1, Error: "x"} }},
		{KindTaskRetry, func(id string) any { return &TaskRetryArgs{ID: id} }},
		{KindTaskDelete, func(id string) any { return &TaskDeleteArgs{ID: id} }},
	}
	cases := []struct {
		name, principal, id string
		oldEntry            bool
		wantForbidden       bool
	}{
		{"task moved to another queue", "w", "moved", false, true},
		{"missing task, narrow grant", "w", "nope", false, true},
		{"missing task, grant on every queue", "all", "nope", false, false},
		{"task in the grant", "w", "mine", false, false},
		{"the admin", "", "moved", false, false},
		{"an entry before version 5", "w", "moved", true, false},
	}
	for _, k := range kinds {
		for _, tc := range cases {
			t.Run(string(k.kind)+"/"+tc.name, func(t *testing.T) {
				w := newWorld(t)
				rw := []string{"read", "write", "delete"}
				w.ok(KindPrincipalCreate, "acme", &PrincipalCreateArgs{Name: "w", TokenHash: "hw", Grants: []Grant{{Resource: "tasks", Prefix: "research", Actions: rw}}})
				w.ok(KindPrincipalCreate, "acme", &PrincipalCreateArgs{Name: "all", TokenHash: "ha", Grants: []Grant{{Resource: "tasks", Prefix: "", Actions: rw}}})
				w.ok(KindTaskCreate, "acme", &TaskCreateArgs{ID: "mine", Queue: "research"})
				w.ok(KindTaskCreate, "acme", &TaskCreateArgs{ID: "moved", Queue: "research"})
				w.ok(KindTaskDelete, "acme", &TaskDeleteArgs{ID: "moved"})
				w.ok(KindTaskCreate, "acme", &TaskCreateArgs{ID: "moved", Queue: "secret-q", Payload: []byte(`{"secret":1}`)})
				c := NewCommand(k.kind, w.now+10, "acme", tc.principal, k.args(tc.id))
				if tc.principal != "" && c.ver != EntryVersion5 {
					t.Errorf("entry version: got %d, want %d", c.ver, EntryVersion5)
				}
				if tc.oldEntry {
					c.ver = 0
				}
				sum := w.f.st.sum
				w.index++
				w.now += 10
				r := applyOne(t, w.f, w.index, c)
				if got := r.Code == CodeForbidden; got != tc.wantForbidden {
					t.Fatalf("got %s, want forbidden %v", describe(r), tc.wantForbidden)
				}
				if tc.wantForbidden {
					if want := fmt.Sprintf("principal %q may not %s task %q", tc.principal, map[bool]string{true: "delete", false: "write"}[k.kind == KindTaskDelete], tc.id); r.Message != want {
						t.Errorf("message: got %q, want %q", r.Message, want)
					}
					if w.f.st.sum != sum {
						t.Errorf("a refused write changed the state")
					}
				}
			})
		}
	}
}
