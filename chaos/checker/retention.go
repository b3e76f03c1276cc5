package checker

import (
	"fmt"
	"sort"

	"github.com/baton-dev/baton/chaos/history"
)

// Retention (docs/api.md "Retention"): a task in a terminal status (done,
// dead, cancelled) with a retention period gets expires_at, the leader's
// time of the write that made it terminal plus the period; it loses it
// when it leaves the terminal statuses; the leader purges it once its
// clock has passed expires_at, in a command whose time (the state
// machine's clock, which never goes back) decides.
//
// Lifecycle judges these rules beside its own, per task, from the versions
// the answers showed and from the answers that found the task gone: a
// not_found to an op on the task by id invoked after the task's create
// was acknowledged. Assumptions, which the workload keeps: it deletes no
// task, creates each id once (a purged task's slot gets a new id), and
// gives retention periods on create (retention_ms), not by queue policy,
// so a task's period is the one its create asked for or its answers show.
//
//  5. expires_at as documented: a version that is not terminal, or of a
//     task without a period, has none; a terminal version of a task with
//     a period has one, no later than its updated_at plus the period; and
//     when the version just before was seen, exactly that version's if it
//     was terminal too, else its own updated_at plus the period (it
//     entered a terminal status with this write).
//  6. A task without a retention period never disappears.
//  7. No answer finds a task gone before its expiry. The purged version's
//     expiry is at least a bound L from the latest version seen by an op
//     invoked before the gone answer returned: its expires_at if it is
//     terminal; if it is not (created, claimed, retried: whatever expiry
//     it had before is void), its updated_at plus the period, since it
//     must yet enter a terminal status by a later write. Judged twice:
//     - the state machine's clock: a write of any task invoked after the
//     gone answer returned is applied after the purge, so its command time
//     (the updated_at of its answer) is not before the purge's, which is
//     not before the expiry: no such updated_at may be before L;
//     - real time: the purge came before the answer, stamped by a leader
//     whose clock is at most the clock skew ahead of the client's, so the
//     client's wall clock when the answer came back (WallMS) plus the
//     skew slack (rule 4's) is not before L.
//  8. Gone for good: no answer shows the task from an op invoked after an
//     answer found it gone.
//  9. Only a terminal task is purged: a gone answer whose latest version
//     seen before it is not terminal and has attempts left (so no queue
//     claim could have made it dead unseen) needs a write of unknown
//     outcome that may have ended it (a write by id on it, or any queue
//     claim). The task model lets a task with max_attempts become dead
//     unseen, since it counts no attempts; this rule closes what that
//     leaves open.

// retentionCheck holds what the retention rules need of a history.
type retentionCheck struct {
	created map[string]int64 // the return of each task's first acknowledged create
	period  map[string]int64 // each task's retention period, ms
	gone    map[string][]*history.Op
	answers map[string][]*history.Op // every acknowledged answer that shows the task
	// writes are the acknowledged task writes with their command time,
	// by invocation; minAfter[i] is the least updated_at of writes[i:].
	writes   []*history.Op
	minAfter []int64
	// uncertain are the task writes of unknown outcome that may change a
	// task's status: by id, or queue claims (of any task).
	uncertain []*history.Op
}

func newRetentionCheck(ops []history.Op, versions map[string]map[uint64]taskVersion) *retentionCheck {
	r := &retentionCheck{created: map[string]int64{}, period: map[string]int64{}, gone: map[string][]*history.Op{},
		answers: map[string][]*history.Op{}}
	for i := range ops {
		op := &ops[i]
		if op.Kind == history.TaskCreate && op.Outcome == history.OK {
			if at, ok := r.created[op.In.Key]; !ok || op.Return < at {
				r.created[op.In.Key] = op.Return
			}
			if op.In.RetentionMS > 0 {
				r.period[op.In.Key] = op.In.RetentionMS
			}
		}
		if writeWithTime(op) {
			r.writes = append(r.writes, op)
		}
		if op.Outcome == history.Unknown {
			switch op.Kind {
			case history.TaskClaim, history.TaskUpdate, history.TaskFail, history.TaskRetry, history.TaskQueueClaim:
				r.uncertain = append(r.uncertain, op)
			}
		}
		if task, ok := answeredTask(op); ok {
			r.answers[task] = append(r.answers[task], op)
		}
	}
	for task, vs := range versions {
		for _, v := range vs {
			if v.RetentionMS > 0 {
				r.period[task] = v.RetentionMS
			}
		}
	}
	for i := range ops {
		op := &ops[i]
		if isByID(op.Kind) && op.Outcome == history.Fail && op.Code == "not_found" {
			if at, ok := r.created[op.In.Key]; ok && op.Invoke > at {
				r.gone[op.In.Key] = append(r.gone[op.In.Key], op)
			}
		}
	}
	sort.SliceStable(r.writes, func(i, j int) bool { return r.writes[i].Invoke < r.writes[j].Invoke })
	r.minAfter = make([]int64, len(r.writes)+1)
	r.minAfter[len(r.writes)] = 1<<63 - 1
	for i := len(r.writes) - 1; i >= 0; i-- {
		r.minAfter[i] = min(r.minAfter[i+1], r.writes[i].Out.UpdatedAtMS)
	}
	return r
}

// writeWithTime reports whether op is an acknowledged write whose answer
// carries the time of its own command (updated_at).
func writeWithTime(op *history.Op) bool {
	if op.Outcome != history.OK || op.Out.UpdatedAtMS == 0 || op.Out.Version == 0 {
		return false
	}
	switch op.Kind {
	case history.TaskCreate, history.TaskClaim, history.TaskRenew, history.TaskUpdate, history.TaskFail, history.TaskRetry:
		return true
	case history.TaskQueueClaim:
		return op.Out.TaskID != ""
	}
	return false
}

// isByID reports whether kind is an op on one task named by id.
func isByID(kind history.Kind) bool {
	switch kind {
	case history.TaskGet, history.TaskClaim, history.TaskRenew, history.TaskUpdate, history.TaskFail, history.TaskRetry:
		return true
	}
	return false
}

// firstWriteAfter is the earliest command time of the writes invoked
// after t, and one of them; nil if none.
func (r *retentionCheck) firstWriteAfter(t int64) (int64, *history.Op) {
	i := sort.Search(len(r.writes), func(i int) bool { return r.writes[i].Invoke > t })
	if i == len(r.writes) {
		return 0, nil
	}
	at := r.minAfter[i]
	for _, w := range r.writes[i:] {
		if w.Out.UpdatedAtMS == at {
			return at, w
		}
	}
	return 0, nil
}

// check judges rules 5 to 8 for every task and counts what it judged.
func (r *retentionCheck) check(versions map[string]map[uint64]taskVersion, slack func(int64) int64, n *LifeCounts) []Anomaly {
	tasks := make([]string, 0, len(versions))
	for t := range versions {
		tasks = append(tasks, t)
	}
	for t := range r.gone {
		if versions[t] == nil {
			tasks = append(tasks, t)
		}
	}
	sort.Strings(tasks)
	var out []Anomaly
	for _, task := range tasks {
		order := sortedVersions(versions[task])
		out = append(out, r.checkExpiries(task, versions[task], order, n)...)
		out = append(out, r.checkGone(task, versions[task], order, slack, n)...)
	}
	return out
}

func sortedVersions(vs map[uint64]taskVersion) []uint64 {
	order := make([]uint64, 0, len(vs))
	for v := range vs {
		order = append(order, v)
	}
	sort.Slice(order, func(i, j int) bool { return order[i] < order[j] })
	return order
}

// checkExpiries judges rule 5.
func (r *retentionCheck) checkExpiries(task string, vs map[uint64]taskVersion, order []uint64, n *LifeCounts) []Anomaly {
	var out []Anomaly
	bad := func(v taskVersion, msg string, ops ...int) {
		out = append(out, Anomaly{Checker: NameLifecycle, Key: "task:" + task,
			Message: fmt.Sprintf("%s shows %s: %s", v.op.String(), describeVersion(v), msg), Ops: append(ops, v.op.ID)})
	}
	period := r.period[task]
	for i, num := range order {
		v := vs[num]
		if v.ExpiresAtMS != 0 {
			n.Expiring++
		}
		switch {
		case !terminalStatus(v.Status) || period == 0:
			if v.ExpiresAtMS != 0 {
				bad(v, fmt.Sprintf("an expires_at (%d) on a version that is not terminal or of a task without a retention period (%d ms)", v.ExpiresAtMS, period))
			}
			continue
		case v.ExpiresAtMS == 0:
			bad(v, fmt.Sprintf("a terminal version of a task with a retention period of %d ms without an expires_at", period))
			continue
		case v.ExpiresAtMS > v.UpdatedAtMS+period:
			bad(v, fmt.Sprintf("expires_at %d is later than updated_at plus the period (%d ms)", v.ExpiresAtMS, period))
			continue
		}
		if i == 0 || order[i-1] != num-1 {
			continue
		}
		prev := vs[order[i-1]]
		want := v.UpdatedAtMS + period // entered a terminal status now
		if terminalStatus(prev.Status) {
			want = prev.ExpiresAtMS // kept while terminal
		}
		if v.ExpiresAtMS != want {
			bad(v, fmt.Sprintf("expires_at %d, not %d, after %s", v.ExpiresAtMS, want, describeVersion(prev)), prev.op.ID)
		}
	}
	return out
}

// checkGone judges rules 6 to 8 for the answers that found task gone.
func (r *retentionCheck) checkGone(task string, vs map[uint64]taskVersion, order []uint64, slack func(int64) int64, n *LifeCounts) []Anomaly {
	gone := r.gone[task]
	if len(gone) == 0 {
		return nil
	}
	n.Purged++
	n.Gone += len(gone)
	var out []Anomaly
	bad := func(msg string, ops ...int) {
		out = append(out, Anomaly{Checker: NameLifecycle, Key: "task:" + task, Message: msg, Ops: ops})
	}
	period := r.period[task]
	if period == 0 {
		bad(fmt.Sprintf("%s found the task gone, which has no retention period and was deleted by no one", gone[0].String()), gone[0].ID)
		return out
	}
	first := gone[0]
	for _, g := range gone {
		if g.Return < first.Return {
			first = g
		}
		if v, ok := latestBefore(vs, order, g); ok && !terminalStatus(v.Status) &&
			(v.MaxAttempts == 0 || v.Attempt < v.MaxAttempts) && !r.mayHaveEnded(task, g.Return) {
			// Rule 9: only a terminal task is purged, and this one could
			// not have become terminal without a write.
			bad(fmt.Sprintf("%s found the task gone, whose latest version %s is not terminal and has attempts left, and no write of unknown outcome could have ended it",
				g.String(), describeVersion(v)), v.op.ID, g.ID)
		}
		if a := r.judgeGone(task, g, vs, order, period, slack); a != nil {
			out = append(out, *a)
		}
		if r.boundOf(vs, order, g, period) != 0 {
			n.GoneJudged++
		}
	}
	for _, a := range r.answers[task] {
		if a.Invoke > first.Return {
			bad(fmt.Sprintf("%s found the task gone; %s, invoked after, shows it again", first.String(), a.String()), first.ID, a.ID)
			break
		}
	}
	return out
}

// mayHaveEnded reports whether a task write of unknown outcome, invoked
// before t, may have moved task to a terminal status unseen.
func (r *retentionCheck) mayHaveEnded(task string, t int64) bool {
	for _, op := range r.uncertain {
		if op.Invoke < t && (op.Kind == history.TaskQueueClaim || op.In.Key == task) {
			return true
		}
	}
	return false
}

// latestBefore is the latest version of vs seen by an op invoked before
// g returned.
func latestBefore(vs map[uint64]taskVersion, order []uint64, g *history.Op) (taskVersion, bool) {
	for i := len(order) - 1; i >= 0; i-- {
		if v := vs[order[i]]; v.op.Invoke < g.Return {
			return v, true
		}
	}
	return taskVersion{}, false
}

// boundOf is rule 7's L for the gone answer g (0: unknown).
func (r *retentionCheck) boundOf(vs map[uint64]taskVersion, order []uint64, g *history.Op, period int64) int64 {
	v, ok := latestBefore(vs, order, g)
	switch {
	case !ok:
		return 0
	case terminalStatus(v.Status):
		return v.ExpiresAtMS
	}
	return v.UpdatedAtMS + period
}

// judgeGone judges rule 7 for one gone answer.
func (r *retentionCheck) judgeGone(task string, g *history.Op, vs map[uint64]taskVersion, order []uint64, period int64, slack func(int64) int64) *Anomaly {
	bound := r.boundOf(vs, order, g, period)
	if bound == 0 {
		return nil
	}
	v, _ := latestBefore(vs, order, g)
	why := fmt.Sprintf("its expires_at %d (%s)", bound, describeVersion(v))
	if !terminalStatus(v.Status) {
		why = fmt.Sprintf("%d, the updated_at of %s (not terminal: no expiry of an earlier version holds) plus the period %d ms",
			bound, describeVersion(v), period)
	}
	if at, w := r.firstWriteAfter(g.Return); w != nil && at < bound {
		return &Anomaly{Checker: NameLifecycle, Key: "task:" + task,
			Message: fmt.Sprintf("%s found the task gone before its expiry by the state machine's clock: %s, invoked after, was applied at %d, %d ms before %s",
				g.String(), w.String(), at, bound-at, why),
			Ops: []int{v.op.ID, g.ID, w.ID}}
	}
	if s := slack(g.Return); g.WallMS != 0 && g.WallMS+s < bound {
		return &Anomaly{Checker: NameLifecycle, Key: "task:" + task,
			Message: fmt.Sprintf("%s found the task gone at the client's time %d, %d ms before %s (clock slack %d ms)",
				g.String(), g.WallMS, bound-g.WallMS, why, s),
			Ops: []int{v.op.ID, g.ID}}
	}
	return nil
}
