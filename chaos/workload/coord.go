package workload

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/baton-dev/baton/chaos/history"
	"github.com/baton-dev/baton/client"
)

// The coordination primitives (docs/api.md "Dependencies", "Cancellation",
// "Waitpoints", "Flow control", "Schedules"), each in queues of its own,
// so that the other agents' tasks and checkers are not affected:
//
//   - a DAG maker creates graphs of tasks in DagQueue (roots, then
//     dependents on one to three earlier tasks of the graph: fan-in,
//     fan-out and chains, with the three dependency policies), cancels
//     some of them, and makes creates that must be refused (a dependency
//     on a task that does not exist, or on the task itself); DAG workers
//     claim from the queue and finish, fail (some non-retryably: dead),
//     cancel or abandon what they took;
//   - a canceller creates a task in CancelQueue, claims it, has it
//     cancelled (while leased, then acknowledged or left to run out; or
//     after a release: at once) and keeps writing under its old token:
//     task writes and a fenced KV entry;
//   - flow workers claim hard from FlowQueue (max_leased, a concurrency key
//     limit) holding up to three leases each, and a rate worker from
//     RateQueue (claims per second with a burst), by id and from the
//     queue; they release, fail or abandon what they took;
//   - a scheduler pauses and resumes the schedules, which tick every
//     second (an interval, a cron "@every 1s") or 1.5 s;
//   - a parker creates a waitpoint and a task in WaitQueue, claims the
//     task and parks it on the waitpoint, writes under its old token,
//     completes the waitpoint (sometimes twice, with the same payload or
//     another) or lets it time out, then claims the task again from the
//     queue once it is released, and finishes it.
//
// Every operation of theirs is recorded with history.Input.Coord set.

// Queues of the coordination agents.
const (
	DagQueue    = "dag"
	CancelQueue = "cx"
	FlowQueue   = "flow"
	RateQueue   = "rate"
	WaitQueue   = "wq"
	// CancelNamespace holds a fenced entry per cancelled task.
	CancelNamespace = "cxkv"
)

// Flow limits of FlowQueue and RateQueue.
const (
	FlowMaxLeased    = 3
	FlowKeyLimit     = 1
	FlowKeys         = 4 // tasks f0..f7 have keys k0..k3; f8, f9 none
	FlowTasks        = 10
	RateTasks        = 4
	RatePerSecond    = 5
	RateBurst        = 2
	flowHeldPerAgent = 3
)

// schedules: id, interval or cron, catch-up.
var schedules = []client.CreateScheduleRequest{
	{ScheduleID: "s-all", IntervalMs: 1000, CatchUp: client.CatchUpAll},
	{ScheduleID: "s-latest", IntervalMs: 1500},
	{ScheduleID: "s-cron", Cron: "@every 1s", CatchUp: client.CatchUpAll},
}

// ScheduleQueue is the queue of schedule id's tasks.
func ScheduleQueue(id string) string { return "sq-" + id }

func flowID(i int) string { return "f" + strconv.Itoa(i) }
func rateID(i int) string { return "r" + strconv.Itoa(i) }

// noteCoord records a coordination task id for the read-back.
func (w *Workload) noteCoord(id string) {
	w.mu.Lock()
	w.coordIDs[id] = true
	w.mu.Unlock()
}

// setupCoord sets the flow-controlled queues' policies and creates their
// tasks and the schedules, recorded (the checkers read the limits, keys
// and first ticks from them).
func (w *Workload) setupCoord(ctx context.Context, admin *client.Client) error {
	k := &caller{w: w, id: SetupClient, c: admin, prefix: "setup", coord: true}
	retried := func(what string, do func(key string) history.Op) error {
		key := w.cfg.Tenant + "-setup-" + what
		op := do(key)
		for op.Outcome == history.Unknown && ctx.Err() == nil {
			op = do(key)
		}
		if op.Outcome != history.OK {
			return fmt.Errorf("workload: %s: %s %s", what, op.Code, op.Err)
		}
		return nil
	}
	policies := []client.QueuePolicy{
		{BackoffInitial: 50 * time.Millisecond, BackoffMax: 100 * time.Millisecond, MaxLeased: FlowMaxLeased, ConcurrencyKeyLimit: FlowKeyLimit},
		{BackoffInitial: 50 * time.Millisecond, BackoffMax: 100 * time.Millisecond, ClaimsPerSecond: RatePerSecond, ClaimBurst: RateBurst},
		{BackoffInitial: 50 * time.Millisecond, BackoffMax: 100 * time.Millisecond},
	}
	for i, q := range []string{FlowQueue, RateQueue, DagQueue} {
		if err := retried("policy-"+q, func(key string) history.Op { return k.setPolicy(q, policies[i], key) }); err != nil {
			return err
		}
	}
	create := func(req client.CreateTaskRequest) error {
		w.noteCoord(req.TaskID)
		return retried("task-"+req.TaskID, func(key string) history.Op { return k.createTask(req, key) })
	}
	for i := range FlowTasks {
		req := client.CreateTaskRequest{TaskID: flowID(i), Queue: FlowQueue}
		if i < 2*FlowKeys {
			req.ConcurrencyKey = "k" + strconv.Itoa(i%FlowKeys)
		}
		if err := create(req); err != nil {
			return err
		}
	}
	for i := range RateTasks {
		if err := create(client.CreateTaskRequest{TaskID: rateID(i), Queue: RateQueue}); err != nil {
			return err
		}
	}
	for _, s := range schedules {
		s.Queue = ScheduleQueue(s.ScheduleID)
		if err := retried("schedule-"+s.ScheduleID, func(key string) history.Op { return k.createSchedule(s, key) }); err != nil {
			return err
		}
	}
	return nil
}

// Coordination operations.

func (k *caller) setPolicy(queue string, p client.QueuePolicy, key string) history.Op {
	in := history.Input{Queue: queue, MaxLeased: p.MaxLeased, KeyLimit: p.ConcurrencyKeyLimit, ClaimsPerSecond: p.ClaimsPerSecond,
		ClaimBurst: p.ClaimBurst}
	return k.call(history.QueuePolicySet, in, key, func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		_, err := k.c.SetQueuePolicy(ctx, k.w.cfg.Tenant, queue, p, opts...)
		return history.Output{}, err
	})
}

func scheduleOutput(s *client.Schedule) history.Output {
	out := history.Output{Exists: true, Version: s.Version, NextAtMS: s.NextAt.UnixMilli(), Ticks: s.Ticks, Paused: s.Paused,
		UpdatedAtMS: s.UpdatedAt.UnixMilli(), CreatedAtMS: s.CreatedAt.UnixMilli()}
	if s.LastTickAt != nil {
		out.LastTickMS = s.LastTickAt.UnixMilli()
	}
	return out
}

func (k *caller) createSchedule(req client.CreateScheduleRequest, key string) history.Op {
	in := history.Input{Key: req.ScheduleID, Queue: req.Queue, IntervalMS: req.IntervalMs, Cron: req.Cron, CatchUp: req.CatchUp}
	return k.call(history.ScheduleCreate, in, key, func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		s, err := k.c.CreateSchedule(ctx, k.w.cfg.Tenant, req, opts...)
		if err != nil {
			return history.Output{}, err
		}
		return scheduleOutput(s), nil
	})
}

func (k *caller) scheduleGet(id string) history.Op {
	return k.call(history.ScheduleGet, history.Input{Key: id}, "", func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		s, err := k.c.GetSchedule(ctx, k.w.cfg.Tenant, id, opts...)
		if err != nil {
			return history.Output{}, err
		}
		return scheduleOutput(s), nil
	})
}

// pauseSchedule pauses (pause) or resumes a schedule.
func (k *caller) pauseSchedule(id string, pause bool, key string) history.Op {
	kind, do := history.ScheduleResume, k.c.ResumeSchedule
	if pause {
		kind, do = history.SchedulePause, k.c.PauseSchedule
	}
	return k.call(kind, history.Input{Key: id}, key, func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		s, err := do(ctx, k.w.cfg.Tenant, id, opts...)
		if err != nil {
			return history.Output{}, err
		}
		return scheduleOutput(s), nil
	})
}

// listQueue reads every task of a queue, page by page.
func (k *caller) listQueue(queue string) history.Op {
	return k.call(history.TaskList, history.Input{Queue: queue}, "", func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		var out history.Output
		page := ""
		for {
			l, err := k.c.ListTasks(ctx, k.w.cfg.Tenant, client.ListTasksOptions{Queue: queue, Limit: 1000, PageToken: page}, opts...)
			if err != nil {
				return history.Output{}, err
			}
			for _, t := range l.Tasks {
				out.Listed = append(out.Listed, history.Listed{TaskID: t.TaskID, Status: t.Status, CreatedAtMS: t.CreatedAt.UnixMilli()})
			}
			if l.NextPageToken == "" {
				return out, nil
			}
			page = l.NextPageToken
		}
	})
}

// queueStats reads a queue's statistics.
func (k *caller) queueStats(queue string) history.Op {
	return k.call(history.QueueStats, history.Input{Queue: queue}, "", func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		st, err := k.c.GetQueueStats(ctx, k.w.cfg.Tenant, queue, opts...)
		if err != nil {
			return history.Output{}, err
		}
		return history.Output{Running: st.Running, LeaseExpired: st.LeaseExpired}, nil
	})
}

func waitpointOutput(wp *client.Waitpoint) history.Output {
	return history.Output{Exists: true, Version: wp.Version, WaitState: wp.State, WaitPayload: jsonText(wp.Payload),
		TimeoutAtMS: wp.TimeoutAt.UnixMilli(), CreatedAtMS: wp.CreatedAt.UnixMilli(), TaskID: wp.TaskID}
}

func (k *caller) createWaitpoint(id string, timeout time.Duration, key string) history.Op {
	in := history.Input{Key: id, TimeoutMS: timeout.Milliseconds()}
	return k.call(history.WaitpointCreate, in, key, func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		wp, err := k.c.CreateWaitpoint(ctx, k.w.cfg.Tenant, id, timeout, opts...)
		if err != nil {
			return history.Output{}, err
		}
		return waitpointOutput(wp), nil
	})
}

func (k *caller) getWaitpoint(id string) history.Op {
	return k.call(history.WaitpointGet, history.Input{Key: id}, "", func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		wp, err := k.c.GetWaitpoint(ctx, k.w.cfg.Tenant, id, 0, opts...)
		if err != nil {
			return history.Output{}, err
		}
		return waitpointOutput(wp), nil
	})
}

func (k *caller) completeWaitpoint(id, payload, key string) history.Op {
	in := history.Input{Key: id, Value: payload}
	return k.call(history.WaitpointComplete, in, key, func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		wp, err := k.c.CompleteWaitpoint(ctx, k.w.cfg.Tenant, id, jsonValue(payload), opts...)
		if err != nil {
			return history.Output{}, err
		}
		return waitpointOutput(wp), nil
	})
}

func (k *caller) parkTask(task string, token uint64, waitpoint string) history.Op {
	in := history.Input{Key: task, Token: &token, Waitpoint: waitpoint}
	return k.call(history.TaskPark, in, k.key("park"), func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		t, err := k.c.ParkTask(ctx, k.w.cfg.Tenant, task, token, waitpoint, opts...)
		if err != nil {
			return history.Output{}, err
		}
		return taskOutput(t), nil
	})
}

// cancelTask cancels a task: with token, as its holder (an acknowledgement
// of a requested cancellation, or a cancellation of its own).
func (k *caller) cancelTask(task string, token *uint64, key string) history.Op {
	in := history.Input{Key: task, Token: token}
	return k.call(history.TaskCancel, in, key, func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		t, err := k.c.CancelTask(ctx, k.w.cfg.Tenant, task, client.CancelTaskRequest{FencingToken: token, Reason: "chaos"}, opts...)
		if err != nil {
			return history.Output{}, err
		}
		return taskOutput(t), nil
	})
}

// claimQueueOn claims from queue, in its default statuses (pending).
func (k *caller) claimQueueOn(queue, owner string, lease time.Duration) history.Op {
	in := history.Input{Queue: queue, Owner: owner, LeaseMS: lease.Milliseconds()}
	return k.call(history.TaskQueueClaim, in, k.key("qclaim"), func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		t, err := k.c.ClaimQueue(ctx, k.w.cfg.Tenant, queue, client.QueueClaimRequest{Owner: owner, Lease: lease}, opts...)
		if err != nil || t == nil {
			return history.Output{}, err
		}
		return taskOutput(t), nil
	})
}

// createRetried creates a task, retrying an unknown outcome with its key
// until it is known or the run stops; it reports whether the task exists.
func (a *agent) createRetried(req client.CreateTaskRequest) (history.Op, bool) {
	a.w.noteCoord(req.TaskID)
	op := a.createTask(req, a.next("create"))
	for op.Outcome == history.Unknown && !a.stopped() {
		op = a.createTask(req, op.IdemKey)
	}
	return op, op.Outcome == history.OK || op.Code == "already_exists"
}

// dagMaker creates dependency graphs in DagQueue, round after round.
func (a *agent) dagMaker() {
	policies := []string{"", client.DependencyCancel, client.DependencyIgnore}
	for round := 0; !a.stopped(); round++ {
		var ids []string
		roots := 1 + a.rng.IntN(3)
		for n := range roots + 2 + a.rng.IntN(4) {
			req := client.CreateTaskRequest{TaskID: fmt.Sprintf("d%d-%d-%d", a.id, round, n), Queue: DagQueue}
			if n >= roots && len(ids) > 0 { // one to three of the graph's earlier tasks
				for range 1 + a.rng.IntN(3) {
					if d := ids[a.rng.IntN(len(ids))]; !contains(req.DependsOn, d) {
						req.DependsOn = append(req.DependsOn, d)
					}
				}
				req.DependencyPolicy = policies[a.rng.IntN(len(policies))]
			}
			if _, ok := a.createRetried(req); ok {
				ids = append(ids, req.TaskID)
			}
			if a.stopped() {
				return
			}
		}
		if len(ids) > 0 && a.rng.IntN(3) == 0 { // a dependency cancelled, leased or not
			a.cancelTask(ids[a.rng.IntN(len(ids))], nil, a.key("cancel"))
		}
		switch a.rng.IntN(6) { // bad input: refused, nothing written
		case 0:
			id := fmt.Sprintf("d%d-%d-bad", a.id, round)
			a.createRetried(client.CreateTaskRequest{TaskID: id, Queue: DagQueue, DependsOn: []string{"missing-" + id}})
		case 1:
			id := fmt.Sprintf("d%d-%d-self", a.id, round)
			a.createRetried(client.CreateTaskRequest{TaskID: id, Queue: DagQueue, DependsOn: []string{id}})
		}
		if !a.sleep(a.between(200*time.Millisecond, 600*time.Millisecond)) {
			return
		}
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// dagWorker claims from DagQueue and finishes (done), fails (dead when
// non-retryable), cancels or abandons what it took.
func (a *agent) dagWorker() {
	owner := "g" + itoa(a.id)
	lease := 800 * time.Millisecond
	for !a.stopped() {
		op := a.claimQueueOn(DagQueue, owner, lease)
		if op.Outcome != history.OK || op.Out.TaskID == "" {
			if !a.sleep(a.between(20*time.Millisecond, 80*time.Millisecond)) {
				return
			}
			continue
		}
		task, token := op.Out.TaskID, op.Out.Token
		if !a.sleep(a.between(10*time.Millisecond, 60*time.Millisecond)) {
			return
		}
		switch r := a.rng.IntN(100); {
		case r < 70:
			a.finish(task, token, a.next("dag"), "done")
		case r < 80:
			a.fail(task, token, true) // dead: its dependents fail, are cancelled or go on
		case r < 88:
			a.fail(task, token, false) // claimed again after its backoff
		case r < 95:
			a.cancelTask(task, &token, a.key("cancel"))
		} // else abandoned: claimed again once its lease ran out
	}
}

// canceller claims a task of its own, has it cancelled and keeps writing
// under the old token: every such write invoked once the cancellation was
// seen complete must be fenced.
func (a *agent) canceller() {
	owner := "x" + itoa(a.id)
	lease := 600 * time.Millisecond
	for n := 0; !a.stopped(); n++ {
		task := fmt.Sprintf("x%d-%d", a.id, n)
		if _, ok := a.createRetried(client.CreateTaskRequest{TaskID: task, Queue: CancelQueue}); !ok {
			continue
		}
		c := a.claim(task, owner, lease)
		if c.Outcome != history.OK {
			continue
		}
		token := c.Out.Token
		fence := &client.Fence{TaskID: task, Token: token}
		entry := CancelNamespace + "/" + task
		a.kvPut(entry, a.next("x"), nil, fence)
		switch a.rng.IntN(3) {
		case 0: // requested while leased; the holder sees it and acknowledges
			a.cancelTask(task, nil, a.key("cancel"))
			a.renew(task, token, lease)
			a.cancelTask(task, &token, a.key("cancel"))
		case 1: // requested while leased; the lease runs out
			a.cancelTask(task, nil, a.key("cancel"))
			if !a.sleep(lease + a.between(50*time.Millisecond, 400*time.Millisecond)) {
				return
			}
		default: // released first: cancelled at once
			a.update(task, token, a.next("x"), true)
			a.cancelTask(task, nil, a.key("cancel"))
		}
		a.taskGet(task)
		for range 2 + a.rng.IntN(4) { // the old holder goes on
			switch a.rng.IntN(5) {
			case 0:
				a.renew(task, token, lease)
			case 1:
				a.update(task, token, a.next("x"), false)
			case 2:
				a.fail(task, token, false)
			case 3:
				a.kvPut(entry, a.next("x"), nil, fence)
			case 4:
				a.cancelTask(task, &token, a.key("cancel"))
			}
			if !a.sleep(a.between(10*time.Millisecond, 100*time.Millisecond)) {
				return
			}
		}
		if a.rng.IntN(4) == 0 { // revived and claimed again: a new token, the old one stays fenced
			a.retry(task, 0)
		}
	}
}

// held is a lease a flow worker holds.
type held struct {
	task  string
	token uint64
}

// flowWorker claims hard from a flow-controlled queue, by id (byID in a
// hundred: one at a limit is 429, which the client retries after a
// second) or from the queue, holding up to flowHeldPerAgent leases, and
// releases, fails or abandons them.
func (a *agent) flowWorker(queue string, ids []string, byID int, hold time.Duration) {
	owner := "q" + itoa(a.id)
	lease := 500 * time.Millisecond
	var mine []held
	for !a.stopped() {
		if a.rng.IntN(15) == 0 { // running state: leased tasks as the statistics count them
			a.queueStats(queue)
		}
		if len(mine) < flowHeldPerAgent && a.rng.IntN(100) < 65 {
			var op history.Op
			if a.rng.IntN(100) < byID {
				if queue == RateQueue && !a.sleep(400*time.Millisecond) {
					return // the bucket refills first: a 429 costs the client a second
				}
				op = a.claim(ids[a.rng.IntN(len(ids))], owner, lease)
				op.Out.TaskID = op.In.Key
			} else {
				op = a.claimQueueOn(queue, owner, lease)
			}
			if op.Outcome == history.OK && op.Out.TaskID != "" {
				mine = append(mine, held{op.Out.TaskID, op.Out.Token})
			}
		} else if len(mine) > 0 {
			h := mine[0]
			mine = mine[1:]
			switch r := a.rng.IntN(100); {
			case r < 60:
				a.update(h.task, h.token, a.next("q"), true)
			case r < 80:
				a.fail(h.task, h.token, false)
			case r < 90:
				a.renew(h.task, h.token, lease)
				mine = append(mine, h)
			} // else abandoned: its slot stays taken until a claim takes it again
		}
		if !a.sleep(a.between(0, hold)) {
			return
		}
	}
}

func (a *agent) flowAgent() {
	ids := make([]string, FlowTasks)
	for i := range ids {
		ids[i] = flowID(i)
	}
	a.flowWorker(FlowQueue, ids, 10, 80*time.Millisecond)
}

func (a *agent) rateAgent() {
	ids := make([]string, RateTasks)
	for i := range ids {
		ids[i] = rateID(i)
	}
	a.flowWorker(RateQueue, ids, 5, 20*time.Millisecond)
}

// scheduler pauses a schedule and resumes it a little later, retrying an
// unknown outcome with the same key, and reads it.
func (a *agent) scheduler() {
	for !a.stopped() {
		if !a.sleep(a.between(time.Second, 2500*time.Millisecond)) {
			return
		}
		id := schedules[a.rng.IntN(len(schedules))].ScheduleID
		a.pauseRetried(id, true)
		a.sleep(a.between(300*time.Millisecond, 1500*time.Millisecond))
		a.pauseRetried(id, false) // even after the stop: no schedule is left paused
		a.scheduleGet(id)
	}
}

func (a *agent) pauseRetried(id string, pause bool) {
	key := a.next("pause")
	op := a.pauseSchedule(id, pause, key)
	for try := 0; op.Outcome == history.Unknown && try < 5; try++ {
		op = a.pauseSchedule(id, pause, key)
	}
}

// parker parks tasks on waitpoints and claims them back once the
// waitpoints resolve.
func (a *agent) parker() {
	owner := "p" + itoa(a.id)
	lease := 2 * time.Second
	for n := 0; !a.stopped(); n++ {
		wp, task := fmt.Sprintf("wp%d-%d", a.id, n), fmt.Sprintf("w%d-%d", a.id, n)
		timeout := a.between(600*time.Millisecond, 2*time.Second)
		a.w.noteWaitpoint(wp)
		key := a.next("wp")
		op := a.createWaitpoint(wp, timeout, key)
		for op.Outcome == history.Unknown && !a.stopped() {
			op = a.createWaitpoint(wp, timeout, key)
		}
		if op.Outcome != history.OK {
			continue
		}
		if _, ok := a.createRetried(client.CreateTaskRequest{TaskID: task, Queue: WaitQueue}); !ok {
			continue
		}
		c := a.claim(task, owner, lease)
		if c.Outcome != history.OK {
			continue
		}
		token := c.Out.Token
		if p := a.parkTask(task, token, wp); p.Outcome != history.OK {
			continue
		}
		a.update(task, token, a.next("p"), false) // parked: the token is retired
		if a.rng.IntN(10) < 7 {
			a.sleep(a.between(50*time.Millisecond, timeout*3/2))
			payload := a.next("pay")
			a.completeWaitpoint(wp, payload, a.next("complete"))
			switch a.rng.IntN(3) {
			case 0: // a retry of the same completion: 200, unchanged
				a.completeWaitpoint(wp, payload, a.next("complete"))
			case 1: // another payload: 409
				a.completeWaitpoint(wp, a.next("pay"), a.next("complete"))
			}
		}
		// Claim it back once released (the waitpoint resolved).
		deadline := time.Now().Add(timeout + 3*time.Second)
		for !a.stopped() && time.Now().Before(deadline) {
			op := a.claimQueueOn(WaitQueue, owner, lease)
			if op.Outcome == history.OK && op.Out.TaskID != "" {
				a.finish(op.Out.TaskID, op.Out.Token, a.next("p"), "done")
				break
			}
			a.sleep(a.between(50*time.Millisecond, 150*time.Millisecond))
		}
		a.getWaitpoint(wp)
	}
}

func (w *Workload) noteWaitpoint(id string) {
	w.mu.Lock()
	w.waitpoints[id] = true
	w.mu.Unlock()
}

// finalCoord reads back the coordination tasks, the schedules and their
// queues.
func (w *Workload) finalCoord(k *caller) {
	k.coord = true
	defer func() { k.coord = false }()
	w.mu.Lock()
	ids := sortedKeys(w.coordIDs)
	w.mu.Unlock()
	for _, id := range ids {
		readTwice(func() history.Op { return k.taskGet(id) })
		if strings.HasPrefix(id, "x") {
			readTwice(func() history.Op { return k.kvGet(CancelNamespace + "/" + id) })
		}
	}
	w.mu.Lock()
	wps := sortedKeys(w.waitpoints)
	w.mu.Unlock()
	for _, id := range wps {
		readTwice(func() history.Op { return k.getWaitpoint(id) })
	}
	for _, s := range schedules {
		readTwice(func() history.Op { return k.scheduleGet(s.ScheduleID) })
		readTwice(func() history.Op { return k.listQueue(ScheduleQueue(s.ScheduleID)) })
	}
}
