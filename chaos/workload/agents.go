package workload

import (
	"math/rand/v2"
	"time"

	"github.com/baton-dev/baton/chaos/history"
	"github.com/baton-dev/baton/client"
)

// agent is one simulated agent: a caller with its own client, its own
// random stream (from the run's seed) and the run's stop signal.
type agent struct {
	caller
	rng  *rand.Rand
	stop <-chan struct{}
}

func newAgent(w *Workload, id int, c *client.Client, stop <-chan struct{}) *agent {
	// Every other agent leaves its retries to the client's session.
	return &agent{caller: caller{w: w, id: id, c: c, prefix: "c", sessions: id%2 == 1}, stop: stop,
		rng: rand.New(rand.NewPCG(uint64(w.cfg.Seed), uint64(id)+1))}
}

func (a *agent) stopped() bool {
	select {
	case <-a.stop:
		return true
	default:
		return false
	}
}

// sleep pauses for d, or less when the run stops; it reports whether the
// agent should go on.
func (a *agent) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-a.stop:
		return false
	case <-t.C:
		return true
	}
}

func (a *agent) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(a.rng.Int64N(int64(hi-lo)+1))
}

// task is a random slot's current task; slot also returns the slot.
func (a *agent) task() string { _, id := a.slot(); return id }
func (a *agent) slot() (int, string) {
	i := a.rng.IntN(a.w.taskCount())
	return i, a.w.current(i)
}

func (a *agent) regKey() string { return RegNamespace + "/" + RegKey(a.rng.IntN(a.w.cfg.Registers)) }

// RefOf and ThreadOf name the ref and the checkpoint thread of a task.
func RefOf(task string) string    { return "cur/" + task }
func ThreadOf(task string) string { return "th-" + task }

func fenced(op history.Op) bool { return op.Outcome == history.Fail && op.Code == "fenced" }

// acquire claims a task, from the queue or by id.
func (a *agent) acquire(owner string, lease time.Duration, byID int) (string, uint64, bool) {
	if a.rng.IntN(100) < byID {
		op := a.claim(a.task(), owner, lease)
		return op.In.Key, op.Out.Token, op.Outcome == history.OK
	}
	op := a.claimQueue(owner, lease)
	return op.Out.TaskID, op.Out.Token, op.Outcome == history.OK && op.Out.TaskID != ""
}

// worker claims tasks and works on them under their fencing token until it
// is done with them or loses them.
func (a *agent) worker() {
	owner := "w" + itoa(a.id)
	lease := a.w.cfg.Lease
	for !a.stopped() {
		task, token, ok := a.acquire(owner, lease, 40)
		if !ok {
			if !a.sleep(a.between(20*time.Millisecond, 80*time.Millisecond)) {
				return
			}
			continue
		}
		a.work(task, token, owner, lease)
	}
}

// work does a few fenced steps on task; it stops at the first fenced answer.
func (a *agent) work(task string, token uint64, owner string, lease time.Duration) {
	fence := &client.Fence{TaskID: task, Token: token}
	steps := 2 + a.rng.IntN(5)
	for range steps {
		if a.stopped() {
			return
		}
		if a.step(task, token, fence, lease) {
			return // someone else holds it now
		}
		if !a.sleep(a.between(20*time.Millisecond, 120*time.Millisecond)) {
			return
		}
	}
	switch r := a.rng.IntN(100); {
	case r < 30: // finished: done, which starts a retention period if it has one
		if a.w.retains(task) || a.rng.IntN(3) == 0 {
			a.finish(task, token, a.next("done"), "done")
		} else {
			a.update(task, token, a.next("done"), true)
		}
	case r < 45: // give it back for later
		a.updateDelay(task, token, a.next("done"), true, a.between(100*time.Millisecond, 500*time.Millisecond))
	case r < 60: // it backs off, or is dead after its last attempt
		a.fail(task, token, false)
	case r < 65:
		a.fail(task, token, true)
	} // else abandon it: the lease runs out and someone takes it over (or,
	// on its last attempt, the next queue claim makes it dead)
}

// step does one random fenced write and reports whether it was fenced.
func (a *agent) step(task string, token uint64, fence *client.Fence, lease time.Duration) bool {
	switch r := a.rng.IntN(100); {
	case r < 18:
		return fenced(a.renew(task, token, lease))
	case r < 40:
		return fenced(a.update(task, token, a.next("r"), false))
	case r < 55:
		return fenced(a.kvPut(FencedNamespace+"/"+task, a.next("f"), nil, fence))
	case r < 72:
		return a.publishAndMove(task, fence)
	case r < 90:
		return a.checkpoint(task, fence)
	case r < 95: // look: has someone else claimed it?
		op := a.taskGet(task)
		return op.Outcome == history.OK && op.Out.Token != token
	default:
		return fenced(a.handoff(task, token, a.next("h"), a.next("h")))
	}
}

// publishAndMove uploads new content, publishes it under the fence
// (retrying an unknown outcome with the same key, and sometimes
// re-publishing with a fresh key as an agent that lost its key would) and
// moves the task's ref to it.
func (a *agent) publishAndMove(task string, fence *client.Fence) bool {
	content := []byte("artifact " + a.next("content"))
	if op := a.putChunk(content); op.Outcome != history.OK {
		return false
	}
	group := a.next("art")
	key := a.next("pub")
	op := a.publish(group, group, key, content, fence)
	for try := 0; op.Outcome == history.Unknown && try < 2 && !a.stopped(); try++ {
		op = a.publish(group, group, key, content, fence)
	}
	if fenced(op) {
		return true
	}
	if op.Outcome != history.OK {
		return false
	}
	if a.rng.IntN(100) < 30 {
		if again := a.publish(group, group, a.next("pub"), content, fence); fenced(again) {
			return true
		}
	}
	ref := RefOf(task)
	cur := a.refGet(ref)
	var expect string
	switch {
	case cur.Outcome == history.OK:
		expect = cur.Out.Value
	case cur.Code != "not_found":
		return false
	}
	return fenced(a.refSet(ref, op.Out.ArtifactID, &expect, fence))
}

// checkpoint appends a checkpoint to the task's thread after its head.
func (a *agent) checkpoint(task string, fence *client.Fence) bool {
	thread := ThreadOf(task)
	head := a.checkpointHead(thread)
	var parent string
	switch {
	case head.Outcome == history.OK:
		parent = head.Out.Value
	case head.Code != "not_found":
		return false
	}
	return fenced(a.checkpointPut(thread, a.next("cp"), parent, fence))
}

// staleWriter claims a task with a short lease, sleeps past it on purpose,
// then writes with its old token: every such write must be fenced once
// someone else has claimed the task.
func (a *agent) staleWriter() {
	owner := "s" + itoa(a.id)
	lease := a.w.cfg.Lease / 3
	for !a.stopped() {
		task, token, ok := a.acquire(owner, lease, 70)
		if !ok {
			if !a.sleep(a.between(50*time.Millisecond, 150*time.Millisecond)) {
				return
			}
			continue
		}
		if !a.sleep(a.between(2*lease, 5*lease)) {
			return
		}
		fence := &client.Fence{TaskID: task, Token: token}
		for range 1 + a.rng.IntN(3) {
			if a.stopped() {
				return
			}
			switch a.rng.IntN(6) {
			case 0:
				a.update(task, token, a.next("stale"), false)
			case 1:
				a.kvPut(FencedNamespace+"/"+task, a.next("stale"), nil, fence)
			case 2:
				a.publishAndMove(task, fence)
			case 3:
				a.checkpoint(task, fence)
			case 4:
				a.renew(task, token, lease)
			case 5:
				a.fail(task, token, a.rng.IntN(2) == 0)
			}
		}
	}
}

// kvAgent reads and writes the registers, mostly by compare-and-set on the
// version it last saw, and inserts into the set.
func (a *agent) kvAgent() {
	type seen struct {
		exists  bool
		version uint64
	}
	last := map[string]seen{}
	for !a.stopped() {
		key := a.regKey()
		s := last[key]
		switch r := a.rng.IntN(100); {
		case r < 35:
			op := a.kvGet(key)
			switch {
			case op.Outcome == history.OK:
				last[key] = seen{true, op.Out.Version}
			case op.Code == "not_found":
				last[key] = seen{}
			}
		case r < 65:
			expect := s.version
			op := a.kvPut(key, a.next("v"), &expect, nil)
			if op.Outcome == history.OK {
				last[key] = seen{true, op.Out.Version}
			}
		case r < 80:
			op := a.kvPut(key, a.next("v"), nil, nil)
			if op.Outcome == history.OK {
				last[key] = seen{true, op.Out.Version}
			}
		case r < 85:
			if s.exists {
				expect := s.version
				if op := a.kvDelete(key, &expect); op.Outcome == history.OK {
					last[key] = seen{}
				}
			}
		default:
			zero := uint64(0)
			a.kvPut(SetNamespace+"/"+a.next("e"), "1", &zero, nil)
		}
		if !a.sleep(a.between(0, 20*time.Millisecond)) {
			return
		}
	}
}

// supervisor looks at tasks and retries most of the dead ones it finds,
// half of them at once and half after a delay; the others stay dead for a
// while, so that claims meet dead tasks. It reopens some done and
// cancelled tasks (a retry takes a retention's expiry away), cancels some
// waiting ones, and gives a slot whose task was purged its next task.
func (a *agent) supervisor() {
	for !a.stopped() {
		slot, task := a.slot()
		op := a.taskGet(task)
		ok := op.Outcome == history.OK
		switch {
		case ok && op.Out.Status == client.StatusDead && a.rng.IntN(100) < 60:
			var delay time.Duration
			if a.rng.IntN(2) == 0 {
				delay = a.between(100*time.Millisecond, 600*time.Millisecond)
			}
			a.retry(task, delay)
		case ok && (op.Out.Status == "done" || op.Out.Status == "cancelled") && a.rng.IntN(100) < 30:
			a.retry(task, 0)
		case ok && op.Out.Status == "pending" && op.Out.Owner == "" && a.rng.IntN(100) < 10:
			a.cancel(task, op.Out.Version)
		case op.Code == "not_found" && a.w.retains(task):
			a.recreate(slot, task)
		}
		if !a.sleep(a.between(50*time.Millisecond, 200*time.Millisecond)) {
			return
		}
	}
}

// reader reads tasks, refs, checkpoint heads and registers.
func (a *agent) reader() {
	for !a.stopped() {
		task := a.task()
		switch a.rng.IntN(4) {
		case 0:
			a.taskGet(task)
		case 1:
			a.refGet(RefOf(task))
		case 2:
			a.checkpointHead(ThreadOf(task))
		case 3:
			a.kvGet(a.regKey())
		}
		if !a.sleep(a.between(5*time.Millisecond, 30*time.Millisecond)) {
			return
		}
	}
}
