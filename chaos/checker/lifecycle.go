package checker

import (
	"fmt"
	"sort"

	"github.com/baton-dev/baton/chaos/history"
)

// NameLifecycle is the checker of attempts, dead tasks and delays.
const NameLifecycle = "lifecycle"

// statusDead is the status of a task that used its attempts or failed
// without retry (docs/api.md "Attempts, backoff and delays").
const statusDead = "dead"

// taskVersion is one version of a task record as an answer showed it.
type taskVersion struct {
	op *history.Op
	history.Output
}

// Lifecycle checks attempts, dead tasks and delays (docs/api.md
// "Attempts, backoff and delays") from the task records the answers
// showed. Every change of a task makes a new version (version+1), and
// every answer that carries the task (create, read, claim, renew, update,
// fail, retry) shows one version whole; so when the version just before a
// claim was seen, what the claim found is known exactly, whatever
// operations of unknown outcome ran meanwhile. Per task:
//
//  1. No claim beyond max_attempts: a claim's attempt never exceeds its
//     max_attempts, and a claim counts exactly one attempt (attempt is the
//     previous version's plus one).
//  2. Attempts are monotonic between retries: a later version never shows
//     fewer attempts than an earlier one unless a retry may lie between.
//     (A release with "unstarted" gives one back; the workload sends
//     none, so that a decrease still means a retry.)
//  3. A dead task (failed non-retryably or on its last attempt, or its
//     lease ran out on it) is not claimed, and leaves dead only by a
//     retry or by an update that sets a status: a version that is not dead
//     after one that was needs such a write that may lie between
//     (acknowledged with a version in between, or of unknown outcome and
//     invoked before the later version was answered). docs/api.md lets an
//     update under the current fencing token (the one of the last claim:
//     a slow worker finishing after its last attempt was declared dead),
//     or one without a token while no lease is live, set any status.
//  4. No queue claim takes a task before its available_at (a claim by id
//     does not wait for it, docs/api.md). Two ways:
//     - the state machine's clock: the claim's updated_at, which is the
//     time of the claim command, is not before the available_at of the
//     version it claimed. Both are the leader's stamps on one clock that
//     never goes back (fsm: the latest command time), so this holds
//     exactly, under clock skew too.
//     - real time: the claim was applied before its answer came back, so
//     the client's wall clock when it returned (WallMS) is not before
//     available_at. Assumption: the nodes and the test process read one
//     clock (they run on one machine; nodes' stamps are that clock plus
//     the clock-skew failpoint's offset, in whole ms, truncated like
//     WallMS). A node running ahead by s ms stamps times up to s ms ahead
//     of real time, and the state machine keeps the latest stamp, so after
//     a clock-skew fault starts, a claim may return up to s ms before
//     available_at: the slack is the largest skew of the faults that
//     started before the claim returned (0 without one).
//
// Rules 5 to 8 are retention's (retention.go): expires_at as documented;
// no task without a period disappears; none is found gone before its
// expiry, by the state machine's clock and by real time; none comes back.
// A purged task's versions end, and the workload creates each id once, so
// the versions of one id stay one sequence.
//
// Histories recorded before tasks' versions were (Version 0) are left
// alone.
func Lifecycle(h *history.History) []Anomaly {
	out, _ := lifecycle(h)
	return out
}

// LifeCounts is what Lifecycle could judge in a history, so that a run
// shows the rules were exercised and not only passed.
type LifeCounts struct {
	Claims  int // acknowledged claims that showed the task's version
	Judged  int // of which the version just before was seen
	Delayed int // queue claims judged against an available_at
	Fails   int // acknowledged failed attempts
	Dead    int // of which made the task dead
	Retries int // acknowledged retries
	// Retention (retention.go).
	Expiring   int // versions seen with an expires_at
	Purged     int // tasks an answer found gone
	Gone       int // answers that found a task gone
	GoneJudged int // of which judged against an expiry (rule 7)
}

// Add adds o to c.
func (c *LifeCounts) Add(o LifeCounts) {
	c.Claims += o.Claims
	c.Judged += o.Judged
	c.Delayed += o.Delayed
	c.Fails += o.Fails
	c.Dead += o.Dead
	c.Retries += o.Retries
	c.Expiring += o.Expiring
	c.Purged += o.Purged
	c.Gone += o.Gone
	c.GoneJudged += o.GoneJudged
}

// LifecycleCounts counts what Lifecycle judges in h.
func LifecycleCounts(h *history.History) LifeCounts {
	_, n := lifecycle(h)
	return n
}

func lifecycle(h *history.History) ([]Anomaly, LifeCounts) {
	var n LifeCounts
	ops := Logical(history.Flatten(h.Ops))
	versions := map[string]map[uint64]taskVersion{}
	retries := map[string][]*history.Op{}
	statusSets := map[string][]*history.Op{} // updates that set a status
	var claims []*history.Op
	var out []Anomaly
	for i := range ops {
		op := &ops[i]
		if op.Kind == history.TaskRetry {
			retries[op.In.Key] = append(retries[op.In.Key], op)
		}
		if op.Kind == history.TaskUpdate && op.In.Status != "" {
			statusSets[op.In.Key] = append(statusSets[op.In.Key], op)
		}
		task, ok := answeredTask(op)
		if !ok {
			continue
		}
		if versions[task] == nil {
			versions[task] = map[uint64]taskVersion{}
		}
		v := taskVersion{op: op, Output: op.Out}
		if prev, seen := versions[task][op.Out.Version]; seen {
			if a := sameVersion(task, prev, v); a != nil {
				out = append(out, *a)
			}
			continue
		}
		versions[task][op.Out.Version] = v
		switch {
		case isClaim(op):
			claims = append(claims, op)
		case op.Kind == history.TaskFail:
			n.Fails++
			if op.Out.Status == statusDead {
				n.Dead++
			}
		case op.Kind == history.TaskRetry:
			n.Retries++
		}
	}
	slack := skewSlack(h.Faults)
	over := map[string]map[uint64]bool{} // attempts beyond max_attempts a claim took, per task
	for _, c := range claims {
		task := c.In.Key
		if c.Kind == history.TaskQueueClaim {
			task = c.Out.TaskID
		}
		if c.Out.MaxAttempts > 0 && c.Out.Attempt > c.Out.MaxAttempts {
			if over[task] == nil {
				over[task] = map[uint64]bool{}
			}
			over[task][c.Out.Attempt] = true
		}
		prev, known := versions[task][c.Out.Version-1]
		out = append(out, checkClaim(task, c, prev, known, slack)...)
		n.Claims++
		if known {
			n.Judged++
			if c.Kind == history.TaskQueueClaim && prev.AvailableAtMS != 0 {
				n.Delayed++
			}
		}
	}
	tasks := make([]string, 0, len(versions))
	for t := range versions {
		tasks = append(tasks, t)
	}
	sort.Strings(tasks)
	for _, task := range tasks {
		out = append(out, checkVersions(task, versions[task], retries[task], statusSets[task], over[task])...)
	}
	out = append(out, newRetentionCheck(ops, versions).check(versions, slack, &n)...)
	return out, n
}

func isClaim(op *history.Op) bool {
	return op.Kind == history.TaskClaim || op.Kind == history.TaskQueueClaim
}

// answeredTask returns the task whose record op's acknowledged answer
// shows, with a version.
func answeredTask(op *history.Op) (string, bool) {
	if op.Outcome != history.OK || op.Out.Version == 0 || op.Out.Status == "" {
		return "", false
	}
	switch op.Kind {
	case history.TaskQueueClaim:
		return op.Out.TaskID, op.Out.TaskID != ""
	case history.TaskCreate, history.TaskGet, history.TaskClaim, history.TaskRenew, history.TaskUpdate,
		history.TaskFail, history.TaskRetry:
		return op.In.Key, true
	}
	return "", false
}

// sameVersion reports two answers that show one version differently.
func sameVersion(task string, a, b taskVersion) *Anomaly {
	if a.Status == b.Status && a.Attempt == b.Attempt && a.MaxAttempts == b.MaxAttempts &&
		a.AvailableAtMS == b.AvailableAtMS && a.UpdatedAtMS == b.UpdatedAtMS && a.ExpiresAtMS == b.ExpiresAtMS {
		return nil
	}
	return &Anomaly{Checker: NameLifecycle, Key: "task:" + task,
		Message: fmt.Sprintf("version %d answered two ways: %s and %s", a.Version, describeVersion(a), describeVersion(b)),
		Ops:     []int{a.op.ID, b.op.ID}}
}

func describeVersion(v taskVersion) string {
	s := fmt.Sprintf("v%d %s attempt %d/%d", v.Version, v.Status, v.Attempt, v.MaxAttempts)
	if v.AvailableAtMS != 0 {
		s += fmt.Sprintf(" available_at %d", v.AvailableAtMS)
	}
	if v.ExpiresAtMS != 0 {
		s += fmt.Sprintf(" expires_at %d", v.ExpiresAtMS)
	}
	return s + fmt.Sprintf(" updated_at %d", v.UpdatedAtMS)
}

// checkClaim judges one acknowledged claim: rule 1, and rules 3 and 4
// against the version it claimed, prev, when that was seen.
func checkClaim(task string, c *history.Op, prev taskVersion, known bool, slack func(int64) int64) []Anomaly {
	var out []Anomaly
	bad := func(msg string, ops ...int) {
		out = append(out, Anomaly{Checker: NameLifecycle, Key: "task:" + task, Message: msg, Ops: append(ops, c.ID)})
	}
	if c.Out.MaxAttempts > 0 && c.Out.Attempt > c.Out.MaxAttempts {
		msg := fmt.Sprintf("%s took attempt %d of max_attempts %d (%s)", c.Kind, c.Out.Attempt, c.Out.MaxAttempts, c.String())
		if !known {
			bad(msg)
			return out
		}
		bad(fmt.Sprintf("%s, from version %s (%s)", msg, describeVersion(prev), prev.op.String()), prev.op.ID)
	}
	if !known {
		return out
	}
	claimed := fmt.Sprintf("%s (%s) claimed version %s", c.Kind, c.String(), describeVersion(prev))
	if prev.Status == statusDead {
		bad(claimed+": a dead task was claimed", prev.op.ID)
	}
	if c.Out.Attempt != prev.Attempt+1 {
		bad(fmt.Sprintf("%s: the claim made it attempt %d, not %d", claimed, c.Out.Attempt, prev.Attempt+1), prev.op.ID)
	}
	if c.Kind != history.TaskQueueClaim || prev.AvailableAtMS == 0 {
		return out
	}
	if c.Out.UpdatedAtMS < prev.AvailableAtMS {
		bad(fmt.Sprintf("%s at the state machine's time %d, %d ms before its available_at", claimed,
			c.Out.UpdatedAtMS, prev.AvailableAtMS-c.Out.UpdatedAtMS), prev.op.ID)
	}
	if s := slack(c.Return); c.WallMS != 0 && c.WallMS+s < prev.AvailableAtMS {
		bad(fmt.Sprintf("%s and returned at the client's time %d, %d ms before its available_at (clock slack %d ms)", claimed,
			c.WallMS, prev.AvailableAtMS-c.WallMS, s), prev.op.ID)
	}
	return out
}

// checkVersions judges the seen versions of one task in order: rules 1
// (every version; not again for an attempt a claim was reported for, in
// over), 2 and 3.
func checkVersions(task string, versions map[uint64]taskVersion, retries, statusSets []*history.Op, over map[uint64]bool) []Anomaly {
	order := make([]uint64, 0, len(versions))
	for v := range versions {
		order = append(order, v)
	}
	sort.Slice(order, func(i, j int) bool { return order[i] < order[j] })
	var out []Anomaly
	bad := func(msg string, ops ...int) {
		out = append(out, Anomaly{Checker: NameLifecycle, Key: "task:" + task, Message: msg, Ops: ops})
	}
	for i, n := range order {
		cur := versions[n]
		if cur.MaxAttempts > 0 && cur.Attempt > cur.MaxAttempts && !isClaim(cur.op) && !over[cur.Attempt] {
			bad(fmt.Sprintf("%s shows %s: more attempts than max_attempts", cur.op.String(), describeVersion(cur)), cur.op.ID)
		}
		if i == 0 {
			continue
		}
		prev := versions[order[i-1]]
		if retried(retries, prev.Version, cur) || (isClaim(cur.op) && cur.Version == prev.Version+1) {
			continue // a claim of the version just before: checkClaim judged it
		}
		if cur.Attempt < prev.Attempt {
			bad(fmt.Sprintf("attempts went back from %d (%s) to %d (%s) with no retry between",
				prev.Attempt, describeVersion(prev), cur.Attempt, describeVersion(cur)), prev.op.ID, cur.op.ID)
		}
		if prev.Status == statusDead && cur.Status != statusDead && !retried(statusSets, prev.Version, cur) {
			bad(fmt.Sprintf("dead at %s, %q at %s with no retry or status update between (%s)",
				describeVersion(prev), cur.Status, describeVersion(cur), cur.op.String()), prev.op.ID, cur.op.ID)
		}
	}
	return out
}

// retried reports whether a retry may have been applied after version
// after and by version cur: acknowledged with a version in between, or
// of unknown outcome and invoked before cur was answered.
func retried(retries []*history.Op, after uint64, cur taskVersion) bool {
	for _, r := range retries {
		switch r.Outcome {
		case history.OK:
			if r.Out.Version == 0 || (r.Out.Version > after && r.Out.Version <= cur.Version) {
				return true
			}
		case history.Unknown:
			if r.Invoke < cur.op.Return {
				return true
			}
		}
	}
	return false
}

// skewSlack returns, for a time of the run, the largest clock skew (ms)
// of the faults that started by then: how far ahead of real time the
// state machine's clock may be.
func skewSlack(faults []history.Fault) func(at int64) int64 {
	return func(at int64) int64 {
		var s int64
		for _, f := range faults {
			if f.Start <= at && f.ClockSkewMS > s {
				s = f.ClockSkewMS
			}
		}
		return s
	}
}
