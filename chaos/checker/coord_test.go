package checker

import (
	"strconv"
	"testing"

	"github.com/baton-dev/baton/chaos/history"
)

// The coordination checkers must fail: each case below adds one anomaly
// to an otherwise valid hand-made history, which must pass (and pass
// every other checker too); cases where an unknown outcome or a clock
// skew makes the same history possible must pass.

// coord marks an op as the coordination agents' and stamps the client's
// wall clock at its return (times are ms after wall).
func coord(fs ...func(*history.Op)) func(*history.Op) {
	return func(op *history.Op) {
		op.In.Coord = true
		op.WallMS = wall + op.Return/1e6
		for _, f := range fs {
			f(op)
		}
	}
}

// taskAns sets a task answer.
func taskAns(task string, version uint64, status, owner string, token uint64) func(*history.Op) {
	return func(op *history.Op) {
		op.Out.Exists, op.Out.TaskID, op.Out.Version, op.Out.Status, op.Out.Owner, op.Out.Token = true, task, version, status, owner, token
	}
}

// attempt sets the answer's attempt (a claim counts one).
func attempt(n uint64) func(*history.Op) { return func(op *history.Op) { op.Out.Attempt = n } }

func withToken(token uint64) func(*history.Op) {
	return func(op *history.Op) { op.In.Token = u64(token) }
}

// wantOnly runs every checker on b and wants anomalies of checker only
// when wantN > 0, and of no other checker ever.
func wantOnly(t *testing.T, b *hist, checker string, wantN int) {
	t.Helper()
	r := Check(&b.h, Options{SkipConvergence: true})
	want(t, r.Anomalies, checker, wantN)
	for _, a := range r.Anomalies {
		if a.Checker != checker {
			t.Fatalf("unexpected %s anomaly: %v", a.Checker, a)
		}
	}
}

// depBase: a and b are created, then d on both (policy), and x, refused
// for a dependency that does not exist; a is claimed and done at 5, b at
// 8 (the write invoked at 7); d is claimed from the queue at 9..10.
func depBase(policy string, claimAt int64) *hist {
	b := &hist{}
	b.add(0, history.TaskCreate, "a", 0, 1, history.OK, coord(taskAns("a", 1, "pending", "", 0)))
	b.add(0, history.TaskCreate, "b", 1, 2, history.OK, coord(taskAns("b", 1, "pending", "", 0)))
	b.add(0, history.TaskCreate, "d", 2, 3, history.OK, coord(taskAns("d", 1, "pending", "", 0), func(op *history.Op) {
		op.In.DependsOn, op.In.DepPolicy = []string{"a", "b"}, policy
	}))
	b.add(0, history.TaskCreate, "x", 2, 3, history.Fail, coord(func(op *history.Op) {
		op.In.DependsOn, op.Code = []string{"missing"}, "invalid_argument"
	}))
	b.add(1, history.TaskClaim, "a", 3, 4, history.OK, coord(taskAns("a", 2, "pending", "w", 1<<16), attempt(1), func(op *history.Op) { op.In.Owner = "w" }))
	b.add(1, history.TaskUpdate, "a", 4, 5, history.OK, coord(withToken(1<<16), taskAns("a", 3, "done", "", 1<<16), attempt(1), func(op *history.Op) {
		op.In.Status, op.In.Release = "done", true
	}))
	b.add(1, history.TaskClaim, "b", 5, 6, history.OK, coord(taskAns("b", 2, "pending", "w", 2<<16), attempt(1), func(op *history.Op) { op.In.Owner = "w" }))
	b.add(1, history.TaskUpdate, "b", 7, 8, history.OK, coord(withToken(2<<16), taskAns("b", 3, "done", "", 2<<16), attempt(1), func(op *history.Op) {
		op.In.Status, op.In.Release = "done", true
	}))
	b.add(2, history.TaskQueueClaim, "", claimAt, claimAt+1, history.OK, coord(taskAns("d", 2, "pending", "v", 3<<16), attempt(1), func(op *history.Op) {
		op.In.Queue, op.In.Owner = "dag", "v"
		op.Out.DepsLeft = u64(0)
		op.Out.Deps = []history.Dep{{TaskID: "a", Resolved: true, Status: "done"}, {TaskID: "b", Resolved: true, Status: "done"}}
	}))
	b.add(1000, history.TaskGet, "x", 20, 21, history.Fail, coord(func(op *history.Op) { op.Code, op.Final = "not_found", true }))
	return b
}

func TestDependenciesValid(t *testing.T) {
	for _, policy := range []string{"", "cancel", "ignore"} {
		wantOnly(t, depBase(policy, 9), NameDependencies, 0)
	}
	var n CoordCounts
	dependencies(&depBase("", 9).h, &n)
	if n.DepClaims != 1 || n.BadCreates != 1 {
		t.Fatalf("counts %+v, want one dependent claim and one bad create", n)
	}
}

func TestDependenciesBite(t *testing.T) {
	// Claimed before b's done was even invoked.
	wantOnly(t, depBase("", 6), NameDependencies, 1)
	// The same claim with b's done of unknown outcome invoked before it
	// returned: it may have been applied first.
	b := depBase("", 7)
	b.h.Ops[7].Outcome, b.h.Ops[7].Out = history.Unknown, history.Output{}
	b.h.Ops[7].Invoke = 6.5e6
	wantOnly(t, b, NameDependencies, 0)

	// b ended dead first (its attempt failed non-retryably), and d, whose
	// policy is fail, was claimed all the same.
	bad := func(policy string) *hist {
		b := depBase(policy, 9)
		b.h.Ops[7] = history.Op{ID: 7, Client: 1, Kind: history.TaskFail, Invoke: 7e6, Return: 8e6, Outcome: history.OK,
			In: history.Input{Key: "b", Token: u64(2 << 16), NonRetryable: true}}
		coord(taskAns("b", 3, "dead", "", 2<<16), attempt(1))(&b.h.Ops[7])
		return b
	}
	wantOnly(t, bad(""), NameDependencies, 1)
	wantOnly(t, bad("cancel"), NameDependencies, 1)
	wantOnly(t, bad("ignore"), NameDependencies, 0) // ignore counts it as done

	// The claim's own answer shows a dependency left.
	b = depBase("", 9)
	b.h.Ops[8].Out.DepsLeft = u64(1)
	wantOnly(t, b, NameDependencies, 1)

	// The refused create left a task.
	b = depBase("", 9)
	b.h.Ops[9].Outcome, b.h.Ops[9].Code = history.OK, ""
	taskAns("x", 1, "pending", "", 0)(&b.h.Ops[9])
	wantOnly(t, b, NameDependencies, 1)
}

// cancelBase: t is claimed under token T (lease until 1000), cancelled
// while leased (requested), the holder acknowledges at 4..5 (cancelled,
// token retired to R), and goes on writing under T: refused.
const (
	tokT = uint64(1 << 16)
	tokR = uint64(9 << 16)
)

func cancelBase() *hist {
	b := &hist{}
	b.add(0, history.TaskCreate, "t", 0, 1, history.OK, coord(taskAns("t", 1, "pending", "", 0)))
	b.add(0, history.TaskClaim, "t", 1, 2, history.OK, coord(taskAns("t", 2, "pending", "x", tokT), attempt(1), func(op *history.Op) {
		op.In.Owner, op.Out.LeaseUntil = "x", wall+1000
	}))
	b.add(1, history.TaskCancel, "t", 2, 3, history.OK, coord(taskAns("t", 3, "pending", "x", tokT), attempt(1), func(op *history.Op) {
		op.Out.LeaseUntil, op.Out.CancelRequested = wall+1000, true
	}))
	b.add(0, history.TaskCancel, "t", 4, 5, history.OK, coord(withToken(tokT), taskAns("t", 4, "cancelled", "", tokR), attempt(1)))
	b.add(0, history.TaskUpdate, "t", 6, 7, history.Fail, coord(withToken(tokT), func(op *history.Op) {
		op.Code, op.Out.CurrentToken = "fenced", u64(tokR)
	}))
	b.add(0, history.KVPut, "cxkv/t", 8, 9, history.Fail, coord(func(op *history.Op) {
		op.In.Value, op.In.FenceTask, op.In.FenceToken = "v1", "t", tokT
		op.Code, op.Out.CurrentToken = "fenced", u64(tokR)
	}))
	return b
}

func TestCancellationValid(t *testing.T) {
	wantOnly(t, cancelBase(), NameCancellation, 0)
	var n CoordCounts
	cancellation(&cancelBase().h, &n)
	if n.Cancelled != 1 || n.StaleFenced != 2 {
		t.Fatalf("counts %+v, want one cancellation and two stale writes refused", n)
	}
}

func TestCancellationBite(t *testing.T) {
	// Rule 1: a task write and a fenced KV write accepted under the old
	// token after the cancellation was seen complete.
	b := cancelBase()
	b.h.Ops[4].Outcome, b.h.Ops[4].Code, b.h.Ops[4].Out = history.OK, "", history.Output{}
	taskAns("t", 5, "cancelled", "", tokR)(&b.h.Ops[4])
	b.h.Ops[4].Out.Attempt = 1
	r := Cancellation(&b.h)
	want(t, r, NameCancellation, 1)
	b = cancelBase()
	b.h.Ops[5].Outcome, b.h.Ops[5].Code, b.h.Ops[5].Out = history.OK, "", history.Output{Exists: true, Value: "v1", Version: 1}
	want(t, Cancellation(&b.h), NameCancellation, 1)
	// The same write invoked before the cancellation's answer came back
	// may have been applied before it.
	b.h.Ops[5].Invoke = 4.5e6
	want(t, Cancellation(&b.h), NameCancellation, 0)

	// Rule 2: no acknowledgement; a write under T invoked at 1500, after
	// the lease ran out (1000) with the cancellation requested.
	late := func() *hist {
		b := cancelBase()
		b.h.Ops = b.h.Ops[:3]
		b.add(0, history.KVPut, "cxkv/t", 1500, 1510, history.OK, coord(func(op *history.Op) {
			op.In.Value, op.In.FenceTask, op.In.FenceToken = "v2", "t", tokT
			op.Out.Exists, op.Out.Value, op.Out.Version = true, "v2", 1
		}))
		return b
	}
	wantOnly(t, late(), NameCancellation, 1)
	// Within a clock skew's slack: the leader's clock may have been 1 s behind.
	b = late()
	b.h.Faults = []history.Fault{{Kind: "clock-skew", Start: 100e6, End: 1200e6, ClockSkewMS: 1000}}
	wantOnly(t, b, NameCancellation, 0)
	// A renew of unknown outcome under T may have moved the lease's end.
	b = late()
	b.add(0, history.TaskRenew, "t", 900, 1900, history.Unknown, coord(withToken(tokT), func(op *history.Op) { op.In.LeaseMS = 1000 }))
	wantOnly(t, b, NameCancellation, 0)
	// A renew acknowledged that moved it past the write.
	b = late()
	b.add(0, history.TaskRenew, "t", 900, 910, history.OK, coord(withToken(tokT), taskAns("t", 4, "pending", "x", tokT), attempt(1), func(op *history.Op) {
		op.Out.LeaseUntil, op.Out.CancelRequested = wall+1900, true
	}))
	wantOnly(t, b, NameCancellation, 0)
}

// schedBase: s ticks every second from 1000 (catch_up all), is paused at
// 3500 and resumed at 5200 (next tick 6200); the read-back at 9000 finds
// ticks 1000, 2000, 3000, 6200, 7200, each created 5 ms after its tick.
func schedBase(catchUp string, ticks []int64, counted uint64) *hist {
	b := &hist{}
	b.add(1001, history.ScheduleCreate, "s", 0, 1, history.OK, coord(func(op *history.Op) {
		op.In.Queue, op.In.IntervalMS, op.In.CatchUp = "sq-s", 1000, catchUp
		op.Out.Exists, op.Out.Version, op.Out.NextAtMS = true, 1, wall+1000
	}))
	b.add(7, history.SchedulePause, "s", 3500, 3510, history.OK, coord(func(op *history.Op) {
		op.Out.Exists, op.Out.Paused, op.Out.UpdatedAtMS, op.Out.NextAtMS = true, true, wall+3500, wall+4000
	}))
	b.add(7, history.ScheduleResume, "s", 5200, 5210, history.OK, coord(func(op *history.Op) {
		op.Out.Exists, op.Out.UpdatedAtMS, op.Out.NextAtMS = true, wall+5200, wall+6200
	}))
	last := int64(0)
	var listed []history.Listed
	for _, tk := range ticks {
		listed = append(listed, history.Listed{TaskID: "s:" + strconv.FormatInt(wall+tk, 10), Status: "pending", CreatedAtMS: wall + tk + 5})
		last = max(last, wall+tk)
	}
	b.add(1000, history.ScheduleGet, "s", 9000, 9001, history.OK, coord(func(op *history.Op) {
		op.Final, op.Out.Exists, op.Out.Ticks, op.Out.LastTickMS, op.Out.NextAtMS = true, true, counted, last, last+1000
	}))
	b.add(1000, history.TaskList, "", 9002, 9003, history.OK, coord(func(op *history.Op) {
		op.Final, op.In.Queue, op.Out.Listed = true, "sq-s", listed
	}))
	return b
}

var schedTicks = []int64{1000, 2000, 3000, 6200, 7200}

func TestSchedulesValid(t *testing.T) {
	wantOnly(t, schedBase("all", schedTicks, 5), NameSchedules, 0)
	wantOnly(t, schedBase("", schedTicks, 5), NameSchedules, 0)
	// catch_up latest: ticks missed while no leader ticked are skipped.
	wantOnly(t, schedBase("", []int64{1000, 3000, 6200, 9200}, 4), NameSchedules, 0)
	var n CoordCounts
	schedules(&schedBase("all", schedTicks, 5).h, &n)
	if n.Ticks != 5 || n.TickGaps != 1 {
		t.Fatalf("counts %+v, want 5 ticks and 1 gap explained", n)
	}
}

func TestSchedulesBite(t *testing.T) {
	// A tick missing between the first and the last (catch_up all).
	wantOnly(t, schedBase("all", []int64{1000, 3000, 6200, 7200}, 4), NameSchedules, 1)
	// A tick fired twice: counted twice, one task.
	wantOnly(t, schedBase("all", schedTicks, 6), NameSchedules, 1)
	// A tick fired twice on another grid: two tasks.
	wantOnly(t, schedBase("", []int64{1000, 2000, 2500, 3000, 6200, 7200}, 6), NameSchedules, 1)
	// catch_up latest off its grid.
	wantOnly(t, schedBase("", []int64{1000, 2700, 6200}, 3), NameSchedules, 1)
	// The first tick is not the create's.
	wantOnly(t, schedBase("all", []int64{2000, 3000, 6200, 7200}, 4), NameSchedules, 1)
	// A tick while paused (created at 4005, between the pause at 3500 and
	// the resume at 5200); on the grid, so only rule 4 sees it.
	wantOnly(t, schedBase("all", []int64{1000, 2000, 3000, 4000, 6200, 7200}, 6), NameSchedules, 1)
	// A resume at 5200 by a leader 5 s behind: its next_at, 1200, is
	// before the last tick, 3000. The ticks made or passed already are not
	// made again; the first after 3000 on its grid, 3200, is, with 4200
	// and 5200, in the command after the resume (catch_up all). Made
	// again, the ticks go back.
	behind := func(ticks []int64) *hist {
		b := schedBase("all", ticks, uint64(len(ticks)))
		b.h.Ops[2].Out.NextAtMS = wall + 1200
		for i := range b.h.Ops[4].Out.Listed {
			l := &b.h.Ops[4].Out.Listed[i]
			if at := l.CreatedAtMS - 5; at != wall+1000 && at != wall+2000 && at != wall+3000 {
				l.CreatedAtMS = max(at, wall+5200) + 5
			}
		}
		return b
	}
	wantOnly(t, behind([]int64{1000, 2000, 3000, 3200, 4200, 5200, 6200, 7200}), NameSchedules, 0)
	wantOnly(t, behind([]int64{1000, 1200, 2000, 2200, 3000, 3200, 4200, 5200, 6200, 7200}), NameSchedules, 1)
	// The same with the resume's outcome unknown is not judged.
	b := schedBase("all", []int64{1000, 2000, 3000, 4000, 6200, 7200}, 6)
	b.h.Ops[2].Outcome, b.h.Ops[2].Out = history.Unknown, history.Output{}
	wantOnly(t, b, NameSchedules, 0)
}

// flowBase: queue q allows 2 leased tasks and 1 per key; f0 and f2 have
// key k0, f1 k1. f0 and f1 are claimed, f0 released, f2 claimed (k0 is
// free again), then both released.
func flowBase(f2ClaimAt int64) *hist {
	b := &hist{}
	b.add(1001, history.QueuePolicySet, "", 0, 1, history.OK, coord(func(op *history.Op) {
		op.In.Queue, op.In.MaxLeased, op.In.KeyLimit = "q", 2, 1
	}))
	for i, k := range []string{"k0", "k1", "k0"} {
		id := "f" + strconv.Itoa(i)
		b.add(1001, history.TaskCreate, id, 1, 2, history.OK, coord(taskAns(id, 1, "pending", "", 0), func(op *history.Op) {
			op.In.Queue, op.In.ConcurrencyKey = "q", k
		}))
	}
	claimQ := func(task string, token uint64, at int64) {
		b.add(0, history.TaskQueueClaim, "", at, at+1, history.OK, coord(taskAns(task, 2, "pending", "w", token), attempt(1), func(op *history.Op) {
			op.In.Queue, op.In.Owner = "q", "w"
		}))
	}
	release := func(task string, token uint64, at int64) {
		b.add(0, history.TaskUpdate, task, at, at+1, history.OK, coord(withToken(token), taskAns(task, 3, "pending", "", token), attempt(1),
			func(op *history.Op) { op.In.Release = true }))
	}
	claimQ("f0", 1<<16, 10)
	claimQ("f1", 2<<16, 12)
	release("f0", 1<<16, 14)
	claimQ("f2", 3<<16, f2ClaimAt)
	release("f1", 2<<16, 18)
	release("f2", 3<<16, 20)
	return b
}

func TestFlowControlValid(t *testing.T) {
	wantOnly(t, flowBase(16), NameFlowControl, 0)
	var n CoordCounts
	flowControl(&flowBase(16).h, &n)
	if n.MaxHeld != 2 || n.LeasedClaims != 3 {
		t.Fatalf("counts %+v, want 3 claims and at most 2 held", n)
	}
}

func TestFlowControlBite(t *testing.T) {
	// f2 claimed before f0's release was invoked: three held, and two of
	// key k0.
	got := FlowControl(&flowBase(12).h)
	if len(got) != 2 {
		t.Fatalf("got %v, want max_leased and concurrency_key_limit anomalies", got)
	}
	wantOnly(t, flowBase(12), NameFlowControl, 2)
	// The same with f0's release of unknown outcome: it may have been
	// applied before f2's claim.
	b := flowBase(12)
	b.h.Ops[6].Outcome, b.h.Ops[6].Out, b.h.Ops[6].Invoke = history.Unknown, history.Output{}, 12.5e6
	wantOnly(t, b, NameFlowControl, 0)
	// A lease that ran out keeps its slot: f0 abandoned, f2 claimed.
	b = flowBase(16)
	b.h.Ops[6].Kind, b.h.Ops[6].In.Release = history.TaskRenew, false
	wantOnly(t, b, NameFlowControl, 2)
	// A claim of unknown outcome is not counted.
	b = flowBase(12)
	b.h.Ops[7].Outcome = history.Unknown
	wantOnly(t, b, NameFlowControl, 0)
	// The statistics count more leased tasks than max_leased.
	stats := func(running, expired int64) *hist {
		b := flowBase(16)
		b.add(3, history.QueueStats, "", 13, 14, history.OK, coord(func(op *history.Op) {
			op.In.Queue, op.Out.Running, op.Out.LeaseExpired = "q", running, expired
		}))
		return b
	}
	wantOnly(t, stats(1, 1), NameFlowControl, 0)
	wantOnly(t, stats(2, 1), NameFlowControl, 1)
}

func TestFlowControlRate(t *testing.T) {
	rated := func(at ...int64) *hist {
		b := &hist{}
		b.add(1001, history.QueuePolicySet, "", 0, 1, history.OK, coord(func(op *history.Op) {
			op.In.Queue, op.In.ClaimsPerSecond, op.In.ClaimBurst = "r", 2, 1
		}))
		b.add(1001, history.TaskCreate, "r0", 1, 2, history.OK, coord(taskAns("r0", 1, "pending", "", 0), func(op *history.Op) { op.In.Queue = "r" }))
		for i, ms := range at {
			tok := uint64(i+1) << 16
			b.add(0, history.TaskClaim, "r0", 10+ms, 11+ms, history.OK, coord(taskAns("r0", uint64(2*i+2), "pending", "w", tok), attempt(uint64(i+1)), func(op *history.Op) {
				op.In.Owner, op.Out.UpdatedAtMS = "w", wall+ms
			}))
			b.add(0, history.TaskUpdate, "r0", 12+ms, 13+ms, history.OK, coord(withToken(tok), taskAns("r0", uint64(2*i+3), "pending", "", tok), attempt(uint64(i+1)),
				func(op *history.Op) { op.In.Release = true }))
		}
		return b
	}
	// Burst 1, then 2 a second: one at once, one every 500 ms.
	wantOnly(t, rated(0, 500, 1000, 1500), NameFlowControl, 0)
	wantOnly(t, rated(0, 500, 900), NameFlowControl, 1)
	wantOnly(t, rated(0, 100), NameFlowControl, 1)
}

// wpBase: waitpoint wp (timeout_at 1000) and task t in queue wq; t is
// claimed and parked on wp, wp is completed with "p1" at 300..310, a
// completion with "p2" is refused, and t is claimed from the queue at
// 400..410 with the outcome; the read-back shows wp completed with "p1".
func wpBase() *hist {
	b := &hist{}
	b.add(0, history.WaitpointCreate, "wp", 0, 1, history.OK, coord(func(op *history.Op) {
		op.In.TimeoutMS, op.Out.Exists, op.Out.WaitState, op.Out.TimeoutAtMS = 1000, true, "pending", wall+1000
	}))
	b.add(0, history.TaskCreate, "t", 1, 2, history.OK, coord(taskAns("t", 1, "pending", "", 0), func(op *history.Op) { op.In.Queue = "wq" }))
	b.add(0, history.TaskClaim, "t", 2, 3, history.OK, coord(taskAns("t", 2, "pending", "p", tokT), attempt(1), func(op *history.Op) { op.In.Owner = "p" }))
	b.add(0, history.TaskPark, "t", 3, 4, history.OK, coord(withToken(tokT), taskAns("t", 3, "pending", "", tokR), attempt(1),
		func(op *history.Op) { op.In.Waitpoint, op.Out.Parked = "wp", true }))
	b.add(1, history.WaitpointComplete, "wp", 300, 310, history.OK, coord(func(op *history.Op) {
		op.In.Value, op.Out.Exists, op.Out.WaitState, op.Out.WaitPayload = "p1", true, "completed", "p1"
	}))
	b.add(1, history.WaitpointComplete, "wp", 320, 330, history.Fail, coord(func(op *history.Op) { op.In.Value, op.Code = "p2", "version_mismatch" }))
	b.add(0, history.TaskQueueClaim, "", 400, 410, history.OK, coord(taskAns("t", 5, "pending", "p", 11<<16), attempt(2), func(op *history.Op) {
		op.In.Queue, op.In.Owner, op.Out.UpdatedAtMS = "wq", "p", wall+405
		op.Out.Waitpoint, op.Out.WaitState, op.Out.WaitPayload = "wp", "completed", "p1"
	}))
	b.add(1000, history.WaitpointGet, "wp", 2000, 2001, history.OK, coord(func(op *history.Op) {
		op.Final, op.Out.Exists, op.Out.WaitState, op.Out.WaitPayload = true, true, "completed", "p1"
	}))
	return b
}

func TestWaitpointsValid(t *testing.T) {
	wantOnly(t, wpBase(), NameWaitpoints, 0)
	// Timed out instead: no completion acknowledged, the claim after timeout_at.
	b := wpBase()
	b.h.Ops[4].Outcome, b.h.Ops[4].Code, b.h.Ops[4].Out = history.Fail, "version_mismatch", history.Output{}
	b.h.Ops[6].Out.WaitState, b.h.Ops[6].Out.WaitPayload, b.h.Ops[6].Out.UpdatedAtMS = "timed_out", "", wall+1001
	b.h.Ops[7].Out.WaitState, b.h.Ops[7].Out.WaitPayload = "timed_out", ""
	wantOnly(t, b, NameWaitpoints, 0)
	var n CoordCounts
	waitpoints(&wpBase().h, &n)
	if n.WaitCompleted != 1 || n.ParkedClaims != 1 {
		t.Fatalf("counts %+v, want one completed and one parked claim", n)
	}
}

func TestWaitpointsBite(t *testing.T) {
	// A second completion with another payload acknowledged.
	b := wpBase()
	b.h.Ops[5].Outcome, b.h.Ops[5].Code = history.OK, ""
	wantOnly(t, b, NameWaitpoints, 1)
	// The read-back shows the payload refused.
	b = wpBase()
	b.h.Ops[7].Out.WaitPayload = "p2"
	wantOnly(t, b, NameWaitpoints, 1)
	// Timed out although completed.
	b = wpBase()
	b.h.Ops[7].Out.WaitState, b.h.Ops[7].Out.WaitPayload = "timed_out", ""
	wantOnly(t, b, NameWaitpoints, 1)
	// Claimed before any completion was invoked.
	b = wpBase()
	b.h.Ops[6].Invoke, b.h.Ops[6].Return = 200e6, 210e6
	wantOnly(t, b, NameWaitpoints, 1)
	// Claimed while parked: no outcome in the answer.
	b = wpBase()
	b.h.Ops[6].Out.Waitpoint, b.h.Ops[6].Out.WaitState, b.h.Ops[6].Out.WaitPayload = "", "", ""
	wantOnly(t, b, NameWaitpoints, 1)
	// The same with a claim of unknown outcome between: not judged.
	b.add(2, history.TaskQueueClaim, "", 100, 900, history.Unknown, coord(func(op *history.Op) { op.In.Queue, op.In.Owner = "wq", "q" }))
	wantOnly(t, b, NameWaitpoints, 0)
	// Timed out before its timeout_at by the state machine's clock.
	b = wpBase()
	b.h.Ops[4].Outcome, b.h.Ops[4].Code, b.h.Ops[4].Out = history.Fail, "version_mismatch", history.Output{}
	b.h.Ops[6].Out.WaitState, b.h.Ops[6].Out.WaitPayload = "timed_out", ""
	b.h.Ops[7].Out.WaitState, b.h.Ops[7].Out.WaitPayload = "timed_out", ""
	wantOnly(t, b, NameWaitpoints, 1)
}
