package fsm

import (
	"errors"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
)

// fuzzSeedFSM is an FSM holding a tenant, a principal and a task, so that
// decoded commands find something to act on.
func fuzzSeedFSM(t testing.TB) *FSM {
	f := New()
	applyAt(t, f, 1,
		tenantPut(1000, "acme"),
		principalCreate(1000, "acme", "bot", "h1", Grant{Resource: "*", Actions: []string{"read", "write"}}),
		NewCommand(KindTaskCreate, 1000, "acme", "", &TaskCreateArgs{ID: "t1", Queue: "q", Payload: []byte(`{"a":1}`)}),
		NewCommand(KindMemberSet, 1000, "", "", &Member{ID: "n1", RaftAddr: "r1", HTTPAddr: "h1"}),
	)
	return f
}

// FuzzDecodeEntry feeds arbitrary bytes to DecodeEntry and, when they
// decode, to Apply on two replicas. Nothing may panic; a bad entry must be
// an ErrBadEntry on both; a good one must give one result per command, the
// same on both replicas, the same state digest, and a state that survives a
// snapshot round trip.
func FuzzDecodeEntry(f *testing.F) {
	u := func(v uint64) *uint64 { return &v }
	s := func(v string) *string { return &v }
	seeds := [][]*Command{
		{tenantPut(2000, "beta")},
		{tenantPut(2000, "acme"), tenantPut(2001, "gamma")},
		{principalCreate(2000, "acme", "p", "h2")},
		{principalDelete(2000, "acme", "bot")},
		{idem(principalCreate(2000, "acme", "p", "h2"), "bot", "k", "fp", 1000), idem(principalCreate(2500, "acme", "p", "h3"), "bot", "k", "fp", 1000)},
		{NewCommand(KindMemberDelete, 2000, "", "", &MemberDeleteArgs{ID: "n1"})},
		{NewCommand(KindTaskCreate, 2000, "acme", "", &TaskCreateArgs{ID: "t2", Queue: "q", Priority: 3, Payload: []byte(`{}`)})},
		{NewCommand(KindTaskClaim, 2000, "acme", "bot", &TaskClaimArgs{ID: "t1", Owner: "w", LeaseMs: 500, ExpectStatus: s("pending")})},
		{NewCommand(KindTaskQueueClaim, 2000, "acme", "bot", &QueueClaimArgs{Queue: "q", Owner: "w", LeaseMs: 500, Statuses: []string{"pending"}})},
		{NewCommand(KindTaskRenew, 2000, "acme", "bot", &TaskRenewArgs{ID: "t1", FencingToken: 1<<16 | 3, LeaseMs: 100})},
		{NewCommand(KindTaskUpdate, 2000, "acme", "bot", &TaskUpdateArgs{ID: "t1", ExpectVersion: u(1), Status: s("done"), Result: []byte(`true`), Release: true})},
		{NewCommand(KindTaskDelete, 2000, "acme", "", &TaskDeleteArgs{ID: "t1", ExpectVersion: u(1)})},
		{NewCommand(KindTxn, 2000, "acme", "", &TxnArgs{Ops: []TxnOp{
			{Kind: KindTaskCreate, Args: EncodeArgs(&TaskCreateArgs{ID: "t3", Queue: "q"})},
			{Kind: KindTaskClaim, Args: EncodeArgs(&TaskClaimArgs{ID: "t3", Owner: "w", LeaseMs: 10})},
		}})},
		{{Kind: kindTestPutThenFail, Now: 2000, Tenant: "acme"}},
	}
	for _, cmds := range seeds {
		f.Add(EncodeEntry(cmds))
	}
	f.Add([]byte{})
	f.Add([]byte{EntryVersion, 0x90})
	f.Fuzz(func(t *testing.T, data []byte) {
		cmds, err := DecodeEntry(data)
		a, b := fuzzSeedFSM(t), fuzzSeedFSM(t)
		l := &raft.Log{Index: 2, Term: 1, Type: raft.LogCommand, Data: data}
		outA, outB := a.Apply(l), b.Apply(l)
		if err != nil {
			if !errors.Is(err, ErrBadEntry) {
				t.Fatalf("DecodeEntry: got %v, want an ErrBadEntry", err)
			}
			if e, ok := outA.(error); !ok || !errors.Is(e, ErrBadEntry) {
				t.Fatalf("Apply of an undecodable entry: got %#v, want ErrBadEntry", outA)
			}
			return
		}
		resA, okA := outA.([]*Result)
		resB, okB := outB.([]*Result)
		if !okA || !okB || len(resA) != len(cmds) || len(resB) != len(cmds) {
			t.Fatalf("Apply: got %#v and %#v, want %d results each", outA, outB, len(cmds))
		}
		for i := range resA {
			if !reflect.DeepEqual(resA[i], resB[i]) {
				t.Fatalf("command %d: replicas answered %+v and %+v", i, resA[i], resB[i])
			}
			if resA[i].Index != 2 && !resA[i].Replay {
				t.Fatalf("command %d: index got %d, want 2", i, resA[i].Index)
			}
		}
		stA, stB := a.Status(), b.Status()
		if stA != stB {
			t.Fatalf("replicas diverged: %+v and %+v", stA, stB)
		}
		if stA.AppliedIndex != 2 {
			t.Fatalf("applied index: got %d, want 2", stA.AppliedIndex)
		}
		again, err := DecodeEntry(EncodeEntry(cmds))
		if err != nil || !reflect.DeepEqual(again, cmds) {
			t.Fatalf("re-encoding a decoded entry: got %+v, %v, want %+v", again, err, cmds)
		}
		c := New()
		restoreFrom(t, c, persist(t, a))
		if stC := c.Status(); stC.StateDigest != stA.StateDigest || stC.Keys != stA.Keys {
			t.Fatalf("snapshot round trip: got %s (%d keys), want %s (%d keys)", stC.StateDigest, stC.Keys, stA.StateDigest, stA.Keys)
		}
	})
}
