package checker

import (
	"testing"

	"github.com/baton-dev/baton/chaos/history"
)

// The lifecycle checker must fail: each case below breaks one rule of
// attempts, dead tasks or delays in an otherwise valid history, which
// must pass (and pass the other task checkers too).

// wall is the client's wall clock (Unix ms) at time 0 of the hand-made
// histories; the leader's stamps are on the same clock.
const wall = 1_700_000_000_000

// answer sets a task answer: the task record at version with its
// lifecycle (times are ms after wall; availableAt -1 is none).
func lifeAnswer(task string, version uint64, status string, attempt, maxAttempts uint64, availableAt, updatedAt int64) func(*history.Op) {
	return func(op *history.Op) {
		op.Out.Exists, op.Out.TaskID, op.Out.Version, op.Out.Status = true, task, version, status
		op.Out.Attempt, op.Out.MaxAttempts, op.Out.UpdatedAtMS = attempt, maxAttempts, wall+updatedAt
		if availableAt >= 0 {
			op.Out.AvailableAtMS = wall + availableAt
		}
		op.WallMS = wall + op.Return/1e6
	}
}

// then chains edits of one op.
func then(fs ...func(*history.Op)) func(*history.Op) {
	return func(op *history.Op) {
		for _, f := range fs {
			f(op)
		}
	}
}

func queueClaimed(owner string, token uint64) func(*history.Op) {
	return func(op *history.Op) {
		op.In.Queue, op.In.Owner, op.In.LeaseMS = "work", owner, 1000
		op.Out.Token, op.Out.Owner = token, owner
	}
}

func failedAttempt(token uint64, nonRetryable bool) func(*history.Op) {
	return func(op *history.Op) {
		op.In.Token, op.In.NonRetryable = u64(token), nonRetryable
		op.Out.Token = token
	}
}

// lifeBase: t is created with max_attempts 2 and a delay; claimed from the
// queue once due, fails, is claimed again after its backoff, fails on its
// last attempt (dead), is retried with a delay and claimed once due.
func lifeBase() *hist {
	b := &hist{}
	b.add(9, history.TaskCreate, "t", 0, 1, history.OK, then(lifeAnswer("t", 1, "pending", 0, 2, 100, 0),
		func(op *history.Op) { op.In.MaxAttempts, op.In.DelayMS = 2, 100 }))
	b.add(0, history.TaskQueueClaim, "", 100, 110, history.OK, then(queueClaimed("a", 1<<16), lifeAnswer("t", 2, "working", 1, 2, -1, 105)))
	b.add(0, history.TaskFail, "t", 120, 130, history.OK, then(failedAttempt(1<<16, false), lifeAnswer("t", 3, "pending", 1, 2, 300, 125)))
	b.add(1, history.TaskQueueClaim, "", 300, 310, history.OK, then(queueClaimed("b", 5<<16), lifeAnswer("t", 4, "working", 2, 2, -1, 305)))
	b.add(1, history.TaskFail, "t", 320, 330, history.OK, then(failedAttempt(5<<16, false), lifeAnswer("t", 5, "dead", 2, 2, -1, 325)))
	return b
}

// retryAndClaim appends the retry (version 6, due at 500) and a queue
// claim of version 7.
func retryAndClaim(b *hist) {
	b.add(2, history.TaskRetry, "t", 400, 410, history.OK, then(lifeAnswer("t", 6, "pending", 0, 2, 500, 405),
		func(op *history.Op) { op.In.DelayMS, op.Out.Token = 100, 5<<16 }))
	b.add(0, history.TaskQueueClaim, "", 500, 510, history.OK, then(queueClaimed("a", 9<<16), lifeAnswer("t", 7, "working", 1, 2, -1, 505)))
}

func TestLifecycleValid(t *testing.T) {
	b := lifeBase()
	retryAndClaim(b)
	// A stale fail after the retry is fenced.
	b.add(1, history.TaskFail, "t", 520, 530, history.Fail, func(op *history.Op) {
		failedAttempt(5<<16, false)(op)
		op.Out.Token, op.Code, op.Out.CurrentToken = 0, "fenced", u64(9<<16)
	})
	b.add(3, history.TaskGet, "t", 540, 541, history.OK, then(lifeAnswer("t", 7, "working", 1, 2, -1, 505),
		func(op *history.Op) { op.Out.Token, op.Out.Owner = 9<<16, "a" }))
	want(t, Lifecycle(&b.h), NameLifecycle, 0)
	want(t, lin(&b.h), NameLinearizable, 0)
	want(t, Fencing(&b.h), NameFencing, 0)
	want(t, Idempotency(&b.h), NameIdempotency, 0)
}

func TestLifecycleAttempts(t *testing.T) {
	t.Run("claimed beyond max_attempts", func(t *testing.T) {
		b := lifeBase()
		b.h.Ops = b.h.Ops[:4] // drop the last fail: say the attempt was released
		b.add(1, history.TaskUpdate, "t", 320, 330, history.OK, then(updated(5<<16, "done", ""), lifeAnswer("t", 5, "working", 2, 2, -1, 325),
			func(op *history.Op) { op.In.Release = true }))
		want(t, Lifecycle(&b.h), NameLifecycle, 0)
		b.add(0, history.TaskQueueClaim, "", 400, 410, history.OK, then(queueClaimed("a", 9<<16), lifeAnswer("t", 6, "working", 3, 2, -1, 405)))
		want(t, Lifecycle(&b.h), NameLifecycle, 1)
	})
	t.Run("a claim counts more than one attempt", func(t *testing.T) {
		b := lifeBase()
		b.h.Ops[3].Out.Attempt = 3
		b.h.Ops[3].Out.MaxAttempts, b.h.Ops[4].Out.MaxAttempts = 5, 5
		want(t, Lifecycle(&b.h), NameLifecycle, 1)
	})
	t.Run("attempts go back without a retry", func(t *testing.T) {
		b := lifeBase()
		b.h.Ops = b.h.Ops[:4]
		b.add(3, history.TaskGet, "t", 400, 401, history.OK, then(lifeAnswer("t", 6, "pending", 1, 2, -1, 390),
			func(op *history.Op) { op.Out.Token = 5 << 16 }))
		want(t, Lifecycle(&b.h), NameLifecycle, 1)
		// A retry of unknown outcome may explain it.
		b.add(2, history.TaskRetry, "t", 350, 360, history.Unknown, nil)
		want(t, Lifecycle(&b.h), NameLifecycle, 0)
	})
	t.Run("one version answered two ways", func(t *testing.T) {
		b := lifeBase()
		b.add(3, history.TaskGet, "t", 140, 141, history.OK, then(lifeAnswer("t", 3, "pending", 2, 2, 300, 125),
			func(op *history.Op) { op.Out.Token = 1 << 16 }))
		want(t, Lifecycle(&b.h), NameLifecycle, 1)
	})
}

func TestLifecycleDead(t *testing.T) {
	t.Run("a dead task is claimed", func(t *testing.T) {
		b := lifeBase()
		b.add(0, history.TaskClaim, "t", 400, 410, history.OK, then(claimed("a", 9<<16), lifeAnswer("t", 6, "working", 3, 2, -1, 405)))
		got := Lifecycle(&b.h)
		want(t, got, NameLifecycle, 1)
		// Beyond max_attempts and dead, both said.
		if len(got) < 2 {
			t.Errorf("got %v, want both the dead claim and the attempt beyond max_attempts", got)
		}
	})
	t.Run("a dead task is claimable again without a retry", func(t *testing.T) {
		b := lifeBase()
		b.add(3, history.TaskGet, "t", 400, 401, history.OK, then(lifeAnswer("t", 7, "pending", 0, 2, -1, 390),
			func(op *history.Op) { op.Out.Token = 5 << 16 }))
		want(t, Lifecycle(&b.h), NameLifecycle, 1)
		// A retry that failed definitively explains nothing; one of
		// unknown outcome invoked before the read does.
		b.add(2, history.TaskRetry, "t", 350, 360, history.Fail, func(op *history.Op) { op.Code = "lease_held" })
		want(t, Lifecycle(&b.h), NameLifecycle, 1)
		b.add(2, history.TaskRetry, "t", 370, 380, history.Unknown, nil)
		want(t, Lifecycle(&b.h), NameLifecycle, 0)
	})
	t.Run("an update that sets a status takes a dead task out of dead", func(t *testing.T) {
		// docs/api.md: an update under the current token (the slow worker
		// of the last attempt, finishing late) may set any status.
		b := lifeBase()
		b.add(3, history.TaskGet, "t", 400, 401, history.OK, then(lifeAnswer("t", 7, "done", 2, 2, -1, 390),
			func(op *history.Op) { op.Out.Token = 5 << 16 }))
		want(t, Lifecycle(&b.h), NameLifecycle, 1)
		// An update that sets no status explains nothing.
		b.add(1, history.TaskUpdate, "t", 370, 380, history.OK, then(lifeAnswer("t", 8, "dead", 2, 2, -1, 375)))
		want(t, Lifecycle(&b.h), NameLifecycle, 1)
		b.add(1, history.TaskUpdate, "t", 385, 388, history.OK, then(lifeAnswer("t", 7, "done", 2, 2, -1, 390),
			func(op *history.Op) { op.In.Status = "done"; op.Out.Token = 5 << 16 }))
		want(t, Lifecycle(&b.h), NameLifecycle, 0)
	})
	t.Run("a non-retryable failure must leave it dead", func(t *testing.T) {
		b := lifeBase()
		b.h.Ops[2].In.NonRetryable = true
		b.h.Ops[2].Out.Status, b.h.Ops[2].Out.AvailableAtMS = "dead", 0
		want(t, Lifecycle(&b.h), NameLifecycle, 1) // claimed at version 4 while dead
	})
}

func TestLifecycleAvailableAt(t *testing.T) {
	t.Run("queue claim before available_at by the state machine's clock", func(t *testing.T) {
		b := lifeBase()
		b.h.Ops[3].Out.UpdatedAtMS = wall + 299 // available_at is wall+300
		want(t, Lifecycle(&b.h), NameLifecycle, 1)
	})
	t.Run("queue claim answered before available_at by the client's clock", func(t *testing.T) {
		// The leader's clock ran ahead: its time says the task was due,
		// the claim came back 50 ms before available_at in real time.
		b := lifeBase()
		b.h.Ops[3].WallMS = wall + 250
		want(t, Lifecycle(&b.h), NameLifecycle, 1)
		// Within a clock-skew fault of 100 ms that started before: allowed.
		b.h.Faults = append(b.h.Faults, history.Fault{Kind: "clock-skew", Start: 200 * 1e6, End: 250 * 1e6, ClockSkewMS: 100})
		want(t, Lifecycle(&b.h), NameLifecycle, 0)
		// A skew that started after the claim returned does not count.
		b.h.Faults[0].Start = 320 * 1e6
		want(t, Lifecycle(&b.h), NameLifecycle, 1)
	})
	t.Run("a claim by id does not wait for available_at", func(t *testing.T) {
		b := lifeBase()
		b.h.Ops[3].Kind, b.h.Ops[3].In.Key = history.TaskClaim, "t"
		b.h.Ops[3].Out.UpdatedAtMS, b.h.Ops[3].WallMS = wall+200, wall+210
		want(t, Lifecycle(&b.h), NameLifecycle, 0)
	})
	t.Run("after a retry with a delay", func(t *testing.T) {
		b := lifeBase()
		retryAndClaim(b)
		want(t, Lifecycle(&b.h), NameLifecycle, 0)
		b.h.Ops[6].Out.UpdatedAtMS = wall + 450 // due at 500
		want(t, Lifecycle(&b.h), NameLifecycle, 1)
	})
	t.Run("after a delayed create", func(t *testing.T) {
		b := lifeBase()
		b.h.Ops[1].Out.UpdatedAtMS = wall + 99 // due at 100
		want(t, Lifecycle(&b.h), NameLifecycle, 1)
	})
}

// The task model knows fail and retry, and the owner that a lease out on
// the last attempt loses without an operation on the task.
func TestLinearizableLifecycleTasks(t *testing.T) {
	t.Run("a fail accepted under a stale token", func(t *testing.T) {
		b := lifeBase()
		b.add(0, history.TaskFail, "t", 340, 350, history.OK, then(failedAttempt(1<<16, false), lifeAnswer("t", 6, "dead", 2, 2, -1, 345)))
		want(t, lin(&b.h), NameLinearizable, 1)
		want(t, Fencing(&b.h), NameFencing, 1)
	})
	t.Run("a renew after the fail is fenced", func(t *testing.T) {
		b := lifeBase()
		b.add(1, history.TaskRenew, "t", 340, 350, history.Fail, func(op *history.Op) {
			op.In.Token, op.Code, op.Out.CurrentToken = u64(5<<16), "fenced", u64(5<<16)
		})
		want(t, lin(&b.h), NameLinearizable, 0)
		b.h.Ops[len(b.h.Ops)-1].Outcome, b.h.Ops[len(b.h.Ops)-1].Code = history.OK, ""
		b.h.Ops[len(b.h.Ops)-1].Out = history.Output{Token: 5 << 16, Owner: "b"}
		want(t, lin(&b.h), NameLinearizable, 1) // the failed attempt's lease was renewed
	})
	lapsed := func(maxAttempts uint64) *hist {
		b := &hist{}
		b.add(9, history.TaskCreate, "t", 0, 1, history.OK, then(lifeAnswer("t", 1, "pending", 0, maxAttempts, -1, 0),
			func(op *history.Op) { op.In.MaxAttempts = maxAttempts }))
		b.add(0, history.TaskClaim, "t", 10, 20, history.OK, then(claimed("a", 1<<16), lifeAnswer("t", 2, "working", 1, maxAttempts, -1, 15)))
		// The lease runs out on the last attempt; another task's queue
		// claim makes t dead: the owner goes with no op on t.
		b.add(3, history.TaskGet, "t", 2000, 2001, history.OK, then(lifeAnswer("t", 3, "dead", 1, maxAttempts, -1, 1500),
			func(op *history.Op) { op.Out.Token = 1 << 16 }))
		return b
	}
	t.Run("the owner lapses on the last attempt", func(t *testing.T) {
		want(t, lin(&lapsed(1).h), NameLinearizable, 0)
		want(t, Lifecycle(&lapsed(1).h), NameLifecycle, 0)
	})
	t.Run("only a task with max_attempts loses its owner unseen", func(t *testing.T) {
		want(t, lin(&lapsed(0).h), NameLinearizable, 1)
	})
	t.Run("a retry under a live lease is refused", func(t *testing.T) {
		b := lifeBase()
		b.h.Ops = b.h.Ops[:4]
		b.add(2, history.TaskRetry, "t", 320, 330, history.Fail, func(op *history.Op) { op.Code, op.Out.LeaseOwner = "lease_held", "b" })
		want(t, lin(&b.h), NameLinearizable, 0)
		b.h.Ops[len(b.h.Ops)-1].Out.LeaseOwner = "a" // not the owner
		want(t, lin(&b.h), NameLinearizable, 1)
	})
}
