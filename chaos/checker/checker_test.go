package checker

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/chaos/history"
)

// The checkers must be able to fail: each test below hands a checker a
// small history made by hand, one that holds exactly the anomaly the
// checker exists for, and asserts it is reported, next to the same history
// without the anomaly, which must pass.

// hist builds a history op by op; times are in milliseconds.
type hist struct{ h history.History }

func (b *hist) add(client int, kind history.Kind, key string, inv, ret int64, outcome history.Outcome, f func(*history.Op)) *history.Op {
	op := history.Op{ID: len(b.h.Ops), Client: client, Kind: kind, Invoke: inv * 1e6, Return: ret * 1e6, Outcome: outcome, In: history.Input{Key: key}}
	if f != nil {
		f(&op)
	}
	b.h.Ops = append(b.h.Ops, op)
	return &b.h.Ops[len(b.h.Ops)-1]
}

func u64(v uint64) *uint64 { return &v }
func str(s string) *string { return &s }

func put(value string, version uint64) func(*history.Op) {
	return func(op *history.Op) { op.In.Value, op.Out.Version = value, version }
}

func get(value string, version uint64) func(*history.Op) {
	return func(op *history.Op) { op.Out.Exists, op.Out.Value, op.Out.Version = value != "", value, version }
}

func want(t *testing.T, got []Anomaly, checker string, wantN int) {
	t.Helper()
	n := 0
	for _, a := range got {
		if a.Checker == checker {
			n++
		}
	}
	if (wantN == 0) != (n == 0) {
		t.Fatalf("got %d %s anomalies, want %s; all: %v", n, checker, map[bool]string{true: "none", false: "some"}[wantN == 0], got)
	}
}

func lin(h *history.History) []Anomaly { return Linearizable(h, 10*time.Second).Anomalies }

func TestLinearizableKV(t *testing.T) {
	base := func() *hist {
		b := &hist{}
		b.add(0, history.KVPut, "reg/k", 0, 10, history.OK, put("a", 100))
		b.add(1, history.KVGet, "reg/k", 11, 12, history.OK, get("a", 100))
		b.add(0, history.KVPut, "reg/k", 20, 30, history.OK, func(op *history.Op) {
			put("b", 200)(op)
			op.In.ExpectVersion = u64(100)
		})
		// An unknown write may have happened...
		b.add(2, history.KVPut, "reg/k", 31, 35, history.Unknown, put("c", 0))
		return b
	}
	t.Run("linearizable", func(t *testing.T) {
		b := base()
		b.add(1, history.KVGet, "reg/k", 40, 41, history.OK, get("b", 200))
		// ... and shows up later: fine.
		b.add(1, history.KVGet, "reg/k", 50, 51, history.OK, get("c", 300))
		want(t, lin(&b.h), NameLinearizable, 0)
	})
	t.Run("stale read after acknowledged write", func(t *testing.T) {
		b := base()
		b.add(1, history.KVGet, "reg/k", 40, 41, history.OK, get("a", 100))
		want(t, lin(&b.h), NameLinearizable, 1)
	})
	t.Run("compare-and-set succeeded against a stale version", func(t *testing.T) {
		b := base()
		b.add(1, history.KVPut, "reg/k", 40, 45, history.OK, func(op *history.Op) {
			put("d", 400)(op)
			op.In.ExpectVersion = u64(100) // the version of "a", overwritten by "b"
		})
		want(t, lin(&b.h), NameLinearizable, 1)
	})
	t.Run("mismatch reported while the version matched", func(t *testing.T) {
		b := &hist{}
		b.add(0, history.KVPut, "reg/k", 0, 10, history.OK, put("a", 100))
		b.add(1, history.KVPut, "reg/k", 20, 30, history.Fail, func(op *history.Op) {
			put("b", 0)(op)
			op.In.ExpectVersion, op.Code, op.Out.CurrentVersion = u64(100), "version_mismatch", u64(100)
		})
		want(t, lin(&b.h), NameLinearizable, 1)
	})
	t.Run("one version holds two values", func(t *testing.T) {
		b := &hist{}
		b.add(0, history.KVPut, "reg/k", 0, 10, history.OK, put("a", 100))
		b.add(1, history.KVGet, "reg/k", 20, 30, history.OK, get("z", 100))
		want(t, lin(&b.h), NameLinearizable, 1)
	})
}

// claim, update and read helpers for task histories.
func claimed(owner string, token uint64) func(*history.Op) {
	return func(op *history.Op) { op.In.Owner, op.Out.Token, op.Out.Owner = owner, token, owner }
}

func updated(token uint64, result, owner string) func(*history.Op) {
	return func(op *history.Op) {
		op.In.Token, op.In.Value = u64(token), result
		op.Out.Token, op.Out.Owner, op.Out.Value = token, owner, result
	}
}

func TestLinearizableAndFencingTasks(t *testing.T) {
	base := func() *hist {
		b := &hist{}
		b.add(0, history.TaskClaim, "t0", 0, 10, history.OK, claimed("a", 1<<16))
		b.add(0, history.TaskUpdate, "t0", 11, 20, history.OK, updated(1<<16, "r1", "a"))
		// a's lease runs out; b claims.
		b.add(1, history.TaskClaim, "t0", 30, 40, history.OK, func(op *history.Op) {
			claimed("b", 5<<16)(op)
			op.Out.Value = "r1" // a claim answers with the whole task
		})
		return b
	}
	t.Run("fenced stale writer passes", func(t *testing.T) {
		b := base()
		b.add(0, history.TaskUpdate, "t0", 50, 60, history.Fail, func(op *history.Op) {
			op.In.Token, op.In.Value, op.Code, op.Out.CurrentToken = u64(1<<16), "r2", "fenced", u64(5<<16)
		})
		b.add(2, history.TaskGet, "t0", 70, 71, history.OK, func(op *history.Op) {
			op.Out.Token, op.Out.Owner, op.Out.Value = 5<<16, "b", "r1"
		})
		want(t, lin(&b.h), NameLinearizable, 0)
		want(t, Fencing(&b.h), NameFencing, 0)
	})
	t.Run("stale write accepted after a newer claim", func(t *testing.T) {
		b := base()
		b.add(0, history.TaskUpdate, "t0", 50, 60, history.OK, func(op *history.Op) {
			updated(1<<16, "r2", "b")(op)
			op.Index = 7
		})
		want(t, lin(&b.h), NameLinearizable, 1)
		want(t, Fencing(&b.h), NameFencing, 1)
	})
	t.Run("stale fenced kv write accepted", func(t *testing.T) {
		b := base()
		b.add(0, history.KVPut, "fkv/t0", 50, 60, history.OK, func(op *history.Op) {
			put("x", 9<<16)(op)
			op.In.FenceTask, op.In.FenceToken = "t0", 1<<16
		})
		want(t, lin(&b.h), NameLinearizable, 1)
		want(t, Fencing(&b.h), NameFencing, 1)
	})
	t.Run("claim tokens go back", func(t *testing.T) {
		b := base()
		b.add(2, history.TaskClaim, "t0", 50, 60, history.OK, func(op *history.Op) {
			claimed("c", 3<<16)(op)
			op.Out.Value = "r1"
		})
		want(t, lin(&b.h), NameLinearizable, 1)
	})
	t.Run("unknown claim whose token is seen later", func(t *testing.T) {
		b := base()
		b.add(2, history.TaskClaim, "t0", 50, 60, history.Unknown, func(op *history.Op) { op.In.Owner = "c" })
		b.add(1, history.TaskUpdate, "t0", 70, 80, history.Fail, func(op *history.Op) {
			op.In.Token, op.In.Value, op.Code, op.Out.CurrentToken = u64(5<<16), "r3", "fenced", u64(8<<16)
		})
		b.add(3, history.TaskGet, "t0", 90, 91, history.OK, func(op *history.Op) {
			op.Out.Token, op.Out.Owner, op.Out.Value = 8<<16, "c", "r1"
		})
		want(t, lin(&b.h), NameLinearizable, 0)
		want(t, Fencing(&b.h), NameFencing, 0)
	})
	t.Run("accepted writes go back in the log", func(t *testing.T) {
		b := &hist{}
		b.add(0, history.TaskClaim, "t0", 0, 10, history.OK, claimed("a", 1<<16))
		b.add(1, history.TaskClaim, "t0", 0, 30, history.OK, claimed("b", 5<<16))
		// Both writes overlap the second claim, so real time cannot order
		// them; the log can.
		b.add(1, history.TaskUpdate, "t0", 20, 40, history.OK, func(op *history.Op) { op.In.Token, op.Index = u64(5<<16), 6 })
		b.add(0, history.TaskUpdate, "t0", 20, 40, history.OK, func(op *history.Op) { op.In.Token, op.Index = u64(1<<16), 8 })
		want(t, Fencing(&b.h), NameFencing, 1)
	})
	t.Run("writes of one log entry are not ordered", func(t *testing.T) {
		b := &hist{}
		b.add(0, history.TaskClaim, "t0", 0, 10, history.OK, claimed("a", 1<<16))
		// Group commit: b's claim and both writes share the entry at index 5,
		// the stale write first.
		b.add(1, history.TaskClaim, "t0", 20, 40, history.OK, claimed("b", 5<<16|2))
		b.add(1, history.TaskUpdate, "t0", 20, 40, history.OK, func(op *history.Op) { op.In.Token, op.Index = u64(5<<16|2), 5 })
		b.add(0, history.TaskUpdate, "t0", 20, 40, history.OK, func(op *history.Op) { op.In.Token, op.Index = u64(1<<16), 5 })
		want(t, Fencing(&b.h), NameFencing, 0)
	})
}

func TestLostWrites(t *testing.T) {
	base := func() *hist {
		b := &hist{}
		b.add(0, history.KVPut, "set/a-1", 0, 10, history.OK, put("1", 100))
		b.add(0, history.KVPut, "set/a-2", 0, 10, history.Unknown, put("1", 0))
		b.add(0, history.KVPut, "set/a-3", 0, 10, history.Fail, func(op *history.Op) { op.Code = "fenced" })
		b.add(0, history.CheckpointPut, "th", 0, 10, history.OK, func(op *history.Op) { op.In.Value = "c1" })
		return b
	}
	final := func(b *hist, set []string, cps []string) {
		b.add(9, history.KVList, SetNamespace, 100, 110, history.OK, func(op *history.Op) { op.Out.Values, op.Final = set, true })
		b.add(9, history.CheckpointList, "th", 100, 110, history.OK, func(op *history.Op) { op.Out.Values, op.Final = cps, true })
	}
	t.Run("nothing lost", func(t *testing.T) {
		b := base()
		final(b, []string{"set/a-1"}, []string{"c1"})
		want(t, LostWrites(&b.h), NameLostWrite, 0)
	})
	t.Run("acknowledged insert lost", func(t *testing.T) {
		b := base()
		final(b, []string{"set/a-2"}, []string{"c1"})
		want(t, LostWrites(&b.h), NameLostWrite, 1)
	})
	t.Run("failed insert present", func(t *testing.T) {
		b := base()
		final(b, []string{"set/a-1", "set/a-3"}, []string{"c1"})
		want(t, LostWrites(&b.h), NameLostWrite, 1)
	})
	t.Run("phantom element", func(t *testing.T) {
		b := base()
		final(b, []string{"set/a-1", "set/zzz"}, []string{"c1"})
		want(t, LostWrites(&b.h), NameLostWrite, 1)
	})
	t.Run("acknowledged checkpoint lost", func(t *testing.T) {
		b := base()
		final(b, []string{"set/a-1"}, nil)
		want(t, LostWrites(&b.h), NameLostWrite, 1)
	})
	handoff := func(outcome history.Outcome, taskExists, entryExists bool) *hist {
		b := &hist{}
		txn := b.add(0, history.Txn, "", 0, 10, outcome, nil)
		txn.Sub = []history.Op{
			{Kind: history.TaskUpdate, In: history.Input{Key: "t0", Token: u64(1 << 16)}},
			{Kind: history.TaskCreate, In: history.Input{Key: "h-1"}},
			{Kind: history.KVPut, In: history.Input{Key: HandoffNamespace + "/h-1", Value: "v"}},
		}
		res := func(exists bool) history.Outcome {
			if exists {
				return history.OK
			}
			return history.Fail
		}
		b.add(9, history.TaskGet, "h-1", 100, 110, res(taskExists), func(op *history.Op) { op.Final, op.Code = true, map[bool]string{false: "not_found"}[taskExists] })
		b.add(9, history.KVGet, HandoffNamespace+"/h-1", 100, 110, res(entryExists), func(op *history.Op) {
			op.Final, op.Code = true, map[bool]string{false: "not_found"}[entryExists]
		})
		return b
	}
	t.Run("transaction applied whole", func(t *testing.T) {
		want(t, LostWrites(&handoff(history.OK, true, true).h), NameLostWrite, 0)
		want(t, LostWrites(&handoff(history.Fail, false, false).h), NameLostWrite, 0)
		want(t, LostWrites(&handoff(history.Unknown, false, false).h), NameLostWrite, 0)
	})
	t.Run("transaction applied in part", func(t *testing.T) {
		want(t, LostWrites(&handoff(history.Unknown, true, false).h), NameLostWrite, 1)
	})
	t.Run("acknowledged transaction lost", func(t *testing.T) {
		want(t, LostWrites(&handoff(history.OK, false, false).h), NameLostWrite, 1)
	})
	t.Run("failed transaction applied", func(t *testing.T) {
		want(t, LostWrites(&handoff(history.Fail, true, true).h), NameLostWrite, 1)
	})
}

func TestIdempotency(t *testing.T) {
	publish := func(key, group string, version uint64, id string) func(*history.Op) {
		return func(op *history.Op) {
			op.IdemKey, op.In.Group, op.Out.Version, op.Out.ArtifactID = key, group, version, id
		}
	}
	t.Run("retries agree", func(t *testing.T) {
		b := &hist{}
		b.add(0, history.ArtifactPublish, "art", 0, 10, history.Unknown, publish("k1", "g1", 0, ""))
		b.add(0, history.ArtifactPublish, "art", 11, 20, history.OK, publish("k1", "g1", 1, "sha256:a"))
		b.add(0, history.ArtifactPublish, "art", 21, 30, history.OK, publish("k2", "g1", 1, "sha256:a"))
		want(t, Idempotency(&b.h), NameIdempotency, 0)
	})
	t.Run("twin publish", func(t *testing.T) {
		b := &hist{}
		b.add(0, history.ArtifactPublish, "art", 0, 10, history.OK, publish("k1", "g1", 1, "sha256:a"))
		b.add(0, history.ArtifactPublish, "art", 21, 30, history.OK, publish("k2", "g1", 2, "sha256:b"))
		want(t, Idempotency(&b.h), NameIdempotency, 1)
	})
	t.Run("replay differs", func(t *testing.T) {
		b := &hist{}
		b.add(0, history.TaskClaim, "t0", 0, 10, history.OK, func(op *history.Op) { op.IdemKey, op.Out.Token = "k", 1<<16 })
		b.add(0, history.TaskClaim, "t0", 11, 20, history.OK, func(op *history.Op) { op.IdemKey, op.Out.Token = "k", 2<<16 })
		want(t, Idempotency(&b.h), NameIdempotency, 1)
	})
	t.Run("claim applied although the client was told nothing was claimable", func(t *testing.T) {
		b := &hist{}
		// w1's queue claim is answered 204; then w1 shows up as the owner.
		b.add(0, history.TaskQueueClaim, "", 0, 10, history.OK, func(op *history.Op) { op.In.Owner = "w1" })
		b.add(1, history.TaskGet, "t3", 20, 21, history.OK, func(op *history.Op) { op.Out.Token, op.Out.Owner = 9<<16, "w1" })
		want(t, Idempotency(&b.h), NameIdempotency, 1)
		// A fault healed more than the election slack before it: still one.
		b.h.Faults = []history.Fault{{Kind: "kill", Start: 0, End: int64(-electionSlack) - 1}}
		want(t, Idempotency(&b.h), NameIdempotency, 1)
		// Had it run during a fault (an election), a late duplicate of the
		// claim may have reached the new leader (docs/api.md
		// "Idempotency-Key"): it may have claimed the task.
		b.h.Faults = []history.Fault{{Kind: "isolate-leader", Start: 5e6, End: 8e6}}
		want(t, Idempotency(&b.h), NameIdempotency, 0)
		b.h.Faults = nil
		// Had the claim's outcome been unknown, it could explain the token.
		b.h.Ops[0].Outcome = history.Unknown
		want(t, Idempotency(&b.h), NameIdempotency, 0)
	})
	t.Run("a lost answer and its retry", func(t *testing.T) {
		lost := func(kind history.Kind, first, retry string) *hist {
			b := &hist{}
			b.add(0, kind, "t0", 0, 10, history.OK, func(op *history.Op) { op.IdemKey, op.LostAnswer, op.Answer = "k", first, retry })
			return b
		}
		want(t, Idempotency(&lost(history.TaskUpdate, "200 aa", "200 aa").h), NameIdempotency, 0)
		want(t, Idempotency(&lost(history.TaskUpdate, "200 aa", "200 bb").h), NameIdempotency, 1)
		want(t, Idempotency(&lost(history.TaskQueueClaim, "200 aa", "204 e3").h), NameIdempotency, 1)
		// A queue claim that found nothing wrote nothing: its retry may
		// take a task that came since (docs/api.md "Idempotency-Key").
		want(t, Idempotency(&lost(history.TaskQueueClaim, "204 e3", "200 aa").h), NameIdempotency, 0)
	})
	t.Run("one version two ids", func(t *testing.T) {
		b := &hist{}
		b.add(0, history.ArtifactPublish, "art", 0, 10, history.OK, publish("k1", "g1", 1, "sha256:a"))
		b.add(1, history.ArtifactPublish, "art", 0, 10, history.OK, publish("k2", "g2", 1, "sha256:b"))
		want(t, Idempotency(&b.h), NameIdempotency, 1)
	})
}

func TestConverged(t *testing.T) {
	same := []history.NodeState{{ID: "n1", AppliedIndex: 9, StateDigest: "d"}, {ID: "n2", AppliedIndex: 9, StateDigest: "d"}}
	want(t, Converged(same), NameConvergence, 0)
	diverged := []history.NodeState{{ID: "n1", AppliedIndex: 9, StateDigest: "d"}, {ID: "n2", AppliedIndex: 9, StateDigest: "e"}}
	want(t, Converged(diverged), NameConvergence, 1)
	behind := []history.NodeState{{ID: "n1", AppliedIndex: 9, StateDigest: "d"}, {ID: "n2", AppliedIndex: 8, StateDigest: "c"}}
	want(t, Converged(behind), NameConvergence, 1)
	silent := []history.NodeState{{ID: "n1", AppliedIndex: 9, StateDigest: "d"}, {ID: "n2", Err: "timeout"}}
	want(t, Converged(silent), NameConvergence, 1)
}

func TestLogicalMergesRetries(t *testing.T) {
	ops := []history.Op{
		{ID: 0, IdemKey: "k", Invoke: 0, Return: 10, Outcome: history.Unknown},
		{ID: 1, IdemKey: "k", Invoke: 20, Return: 30, Outcome: history.OK, Out: history.Output{Token: 7}},
		{ID: 2, Invoke: 5, Return: 6, Outcome: history.Fail},
	}
	got := Logical(ops)
	if len(got) != 2 {
		t.Fatalf("got %d ops, want 2", len(got))
	}
	m := got[0]
	if m.ID != 1 || m.Invoke != 0 || m.Return != 30 || m.Outcome != history.OK || m.Out.Token != 7 {
		t.Errorf("got merged %+v, want op 1 invoked at 0, ok, token 7", m)
	}
}

func TestCheckWritesVisualisation(t *testing.T) {
	b := &hist{}
	b.add(0, history.KVPut, "reg/k", 0, 10, history.OK, put("a", 100))
	b.add(1, history.KVGet, "reg/k", 20, 21, history.OK, get("", 0))
	b.h.Nodes = []history.NodeState{{ID: "n1", AppliedIndex: 1, StateDigest: "d"}}
	r := Check(&b.h, Options{})
	if r.OK() {
		t.Fatal("got no anomaly, want a lost write seen by the linearizability checker")
	}
	dir := t.TempDir()
	files, err := r.Linearizability.WriteHTML(dir, false, time.Second)
	if err != nil || len(files) != 1 || !strings.HasSuffix(files[0], ".html") {
		t.Fatalf("WriteHTML: got %v, %v; want one html file", files, err)
	}
	if filepath.Dir(files[0]) != dir {
		t.Errorf("got %s, want a file in %s", files[0], dir)
	}
}

func TestHistoryRoundTrip(t *testing.T) {
	b := &hist{}
	b.add(0, history.KVPut, "reg/k", 0, 10, history.OK, func(op *history.Op) {
		put("a", 100)(op)
		op.In.ExpectVersion, op.In.Expect = u64(0), str("")
	})
	path := filepath.Join(t.TempDir(), "h.json")
	if err := b.h.Save(path); err != nil {
		t.Fatal(err)
	}
	h, err := history.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Ops) != 1 || *h.Ops[0].In.ExpectVersion != 0 || *h.Ops[0].In.Expect != "" || h.Ops[0].Out.Version != 100 {
		t.Errorf("got %+v after a round trip, want the op back", h.Ops)
	}
}
