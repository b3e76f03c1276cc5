package fsm

import (
	"strings"

	"github.com/google/btree"
)

// Queue statistics (docs/api.md "Queues"): per queue, its tasks by status,
// the waiting tasks (status pending, no lease), how many of those are not
// due yet, when the oldest claimable one became claimable, and the claims
// of the last minute; each read in O(log n) (times the distinct priorities
// of the queue's ready tasks, for the oldest), never a scan of the queue.
//
// The counters are derived from the state, in memory, not stored: kept as
// keys they would be written by every task command, so an entry that a
// member which predates them also applies (a claim, an update) would leave
// the two with different states; and they would add to every snapshot and
// to the digest figures that need no replication. Derived, they cost a
// rebuild from the task records on Restore and must follow every change
// exactly: putTask and deleteTask note each change, and applyCommand
// settles them only when the command commits (a failed command or
// transaction leaves them as they were, like the store's rollback).
// TestQueueIndexMatchesState holds the kept index to one rebuilt from the
// state after random logs. The oldest waiting task is read from the
// store's own queue index (the first ready key of each priority, the first
// delayed key), so the derived part stays a few counters per queue plus
// an entry per delayed task not yet due: nothing per ready task.
//
// Time is the commands' only: "due later" and the claims' minute are as of
// the newest command's time applied (clock), which the index advances
// through; a reader gets that time with the figures (QueueStats.AsOf).
type queueIndex struct {
	tenants map[string]*tenantQueues
	// later holds the delayed waiting tasks whose available_at is after
	// clock, across queues, so that advancing the clock finds those that
	// became due without looking at any other.
	later *btree.BTreeG[laterKey]
	// live holds the leased tasks whose lease_until is after clock, so
	// that advancing the clock finds the leases that ran out.
	live    *btree.BTreeG[laterKey]
	clock   int64
	pending []taskChange // changes of the command being applied
}

// tenantQueues is a tenant's queues that hold at least one task.
type tenantQueues struct {
	names  *btree.BTreeG[string]
	queues map[string]*queueCounts
}

type queueCounts struct {
	total    int64
	statuses map[string]int64
	// The waiting tasks: ready ones (no available_at) by priority, and
	// delayed ones, of which later are not due at clock.
	ready          map[int64]int64
	delayed, later int64
	// The leased tasks (with an owner), of which live hold a lease that
	// runs after clock: the running ones.
	leased, live int64
	blocked      int64 // waiting on dependencies
	// keys counts the leased tasks by concurrency key (flow.go).
	keys   map[string]int64
	claims [60]claimSecond
}

// claimSecond counts the claims of one second (Unix s) of command time.
type claimSecond struct{ sec, n int64 }

// laterKey is a delayed task not yet due (ordered by available_at, then
// Seq, unique to the task), and its queue's counts.
type laterKey struct {
	at  int64
	seq uint64
	qc  *queueCounts
}

func laterLess(a, b laterKey) bool { return a.at < b.at || (a.at == b.at && a.seq < b.seq) }

// StatusPending is the status a task is created in and a queue claim takes
// by default; the statistics call a task in it without a lease waiting.
const StatusPending = "pending"

// taskFacts is what the index needs of one task.
type taskFacts struct {
	tenant, queue, status string
	seq                   uint64
	prio                  int64
	// waiting: pending without a lease; delayedAt its available_at (0:
	// ready).
	waiting   bool
	delayedAt int64
	// leaseUntil: the lease's end when the task has an owner (0: none).
	leaseUntil int64
	// blocked: waits on dependencies or a waitpoint (deps.go,
	// waitpoints.go) and has not ended (a dependent that failed or was
	// cancelled keeps its unresolved count, but waits on nothing).
	blocked bool
	key     string // concurrency key (flow.go)
}

type taskChange struct {
	old, new *taskFacts // nil: none (created, deleted)
	claim    bool       // a claim gave the task a new fencing token
}

func factsOf(t *Task) *taskFacts {
	if t == nil {
		return nil
	}
	f := &taskFacts{tenant: t.Tenant, queue: t.Queue, status: t.Status, seq: t.Seq, prio: t.Priority,
		waiting: t.Status == StatusPending && t.Owner == "" && t.LeaseUntil == 0 && !t.blocked(), delayedAt: t.availableAt(),
		blocked: t.blocked() && !TerminalStatus(t.Status), key: t.ConcurrencyKey}
	if t.Owner != "" {
		f.leaseUntil = max(t.LeaseUntil, 1)
	}
	return f
}

func newQueueIndex() *queueIndex {
	return &queueIndex{tenants: map[string]*tenantQueues{}, later: btree.NewG(16, laterLess), live: btree.NewG(16, laterLess)}
}

// note records a change of one task (old or t nil: created or deleted)
// until the command settles.
func (q *queueIndex) note(old, t *Task) {
	claim := old != nil && t != nil && t.FencingToken != old.FencingToken
	q.pending = append(q.pending, taskChange{factsOf(old), factsOf(t), claim})
}

// settle applies the command's changes if it committed, drops them if
// not, and advances the clock to now.
func (q *queueIndex) settle(commit bool, now int64) {
	if commit {
		for _, c := range q.pending {
			q.remove(c.old)
			q.add(c.new)
			if c.claim {
				q.queue(c.new.tenant, c.new.queue).claimAt(now)
			}
		}
	}
	clear(q.pending)
	q.pending = q.pending[:0]
	q.advance(now)
}

// advance moves the clock to now: waiting tasks whose since it passes
// are due.
func (q *queueIndex) advance(now int64) {
	if now <= q.clock {
		return
	}
	q.clock = now
	for {
		k, ok := q.later.Min()
		if !ok || k.at > now {
			break
		}
		q.later.Delete(k)
		k.qc.later--
	}
	for {
		k, ok := q.live.Min()
		if !ok || k.at > now {
			return
		}
		q.live.Delete(k)
		k.qc.live--
	}
}

// queue returns the counts of a queue, made if needed.
func (q *queueIndex) queue(tenant, queue string) *queueCounts {
	tq := q.tenants[tenant]
	if tq == nil {
		tq = &tenantQueues{names: btree.NewG(16, func(a, b string) bool { return a < b }), queues: map[string]*queueCounts{}}
		q.tenants[tenant] = tq
	}
	qc := tq.queues[queue]
	if qc == nil {
		qc = &queueCounts{statuses: map[string]int64{}, ready: map[int64]int64{}, keys: map[string]int64{}}
		tq.queues[queue] = qc
		tq.names.ReplaceOrInsert(queue)
	}
	return qc
}

func (q *queueIndex) add(f *taskFacts) {
	if f == nil {
		return
	}
	qc := q.queue(f.tenant, f.queue)
	qc.total++
	qc.statuses[f.status]++
	if f.blocked {
		qc.blocked++
	}
	if f.leaseUntil != 0 {
		qc.leased++
		if f.key != "" {
			qc.keys[f.key]++
		}
		if f.leaseUntil > q.clock {
			q.live.ReplaceOrInsert(laterKey{f.leaseUntil, f.seq, qc})
			qc.live++
		}
	}
	switch {
	case !f.waiting:
	case f.delayedAt == 0:
		qc.ready[f.prio]++
	default:
		qc.delayed++
		if f.delayedAt > q.clock {
			q.later.ReplaceOrInsert(laterKey{f.delayedAt, f.seq, qc})
			qc.later++
		}
	}
}

func (q *queueIndex) remove(f *taskFacts) {
	if f == nil {
		return
	}
	tq := q.tenants[f.tenant]
	if tq == nil || tq.queues[f.queue] == nil {
		return // never: every removal follows its add
	}
	qc := tq.queues[f.queue]
	qc.total--
	if qc.statuses[f.status]--; qc.statuses[f.status] == 0 {
		delete(qc.statuses, f.status)
	}
	if f.blocked {
		qc.blocked--
	}
	if f.leaseUntil != 0 {
		qc.leased--
		if f.key != "" {
			if qc.keys[f.key]--; qc.keys[f.key] == 0 {
				delete(qc.keys, f.key)
			}
		}
		if _, ok := q.live.Delete(laterKey{at: f.leaseUntil, seq: f.seq}); ok {
			qc.live--
		}
	}
	switch {
	case !f.waiting:
	case f.delayedAt == 0:
		if qc.ready[f.prio]--; qc.ready[f.prio] == 0 {
			delete(qc.ready, f.prio)
		}
	default:
		qc.delayed--
		if _, ok := q.later.Delete(laterKey{at: f.delayedAt, seq: f.seq}); ok {
			qc.later--
		}
	}
	if qc.total == 0 {
		delete(tq.queues, f.queue)
		tq.names.Delete(f.queue)
		if len(tq.queues) == 0 {
			delete(q.tenants, f.tenant)
		}
	}
}

func (qc *queueCounts) claimAt(now int64) {
	sec := now / 1000
	b := &qc.claims[sec%int64(len(qc.claims))]
	if b.sec != sec {
		*b = claimSecond{sec: sec}
	}
	b.n++
}

// claimsLastMinute counts the claims of the 60 seconds up to now.
func (qc *queueCounts) claimsLastMinute(now int64) int64 {
	sec, n := now/1000, int64(0)
	for _, b := range qc.claims {
		if b.sec > sec-int64(len(qc.claims)) && b.sec <= sec {
			n += b.n
		}
	}
	return n
}

// rebuild makes the index of st's tasks at clock (once per Restore).
func (q *queueIndex) rebuild(st *Store, clock int64) {
	*q = *newQueueIndex()
	q.clock = clock
	st.Scan(tenantRootPrefix, "", func(k string, v []byte) bool {
		_, rest, _ := strings.Cut(k[len(tenantRootPrefix):], "/")
		if !strings.HasPrefix(rest, "task/") {
			return true
		}
		var t Task
		if decode(v, &t) == nil {
			q.add(factsOf(&t))
		}
		return true
	})
}

// QueueStats are a queue's figures as of AsOf, the time of the newest
// command applied.
type QueueStats struct {
	Queue    string
	Tasks    int64
	ByStatus map[string]int64
	// Waiting counts the tasks in status pending without a lease; DueLater
	// those of them whose available_at is after AsOf.
	Waiting, DueLater int64
	// Running counts the tasks under a lease that is live at AsOf, whatever
	// their status; LeaseExpired those with an owner whose lease ran out
	// (not claimed again, released or cancelled since).
	Running, LeaseExpired int64
	// Blocked counts the tasks without a lease that wait on dependencies
	// (not counted as waiting).
	Blocked int64
	// OldestWaitingSince is when the oldest claimable waiting task became
	// claimable (its available_at, else its creation); 0 if none is.
	OldestWaitingSince int64
	ClaimsLastMinute   int64
	AsOf               int64
}

func (f *FSM) queueStats(tenant, queue string) QueueStats {
	q := f.queues
	s := QueueStats{Queue: queue, ByStatus: map[string]int64{}, AsOf: q.clock}
	tq := q.tenants[tenant]
	if tq == nil || tq.queues[queue] == nil {
		return s
	}
	qc := tq.queues[queue]
	s.Tasks, s.DueLater = qc.total, qc.later
	s.Running, s.LeaseExpired, s.Blocked = qc.live, qc.leased-qc.live, qc.blocked
	s.Waiting = qc.delayed
	for st, n := range qc.statuses {
		s.ByStatus[st] = n
	}
	base := queuePrefix(tenant, queue, StatusPending)
	// The oldest ready task: the first of each priority's keys, which
	// sort by Seq, and so by creation.
	oldest := ""
	for prio, n := range qc.ready {
		s.Waiting += n
		f.st.Scan(base+"r/"+prioKey(prio)+"/", "", func(k string, _ []byte) bool {
			// <prio>/<seq>/<id>: seq order is creation order.
			if seq := k[len(base)+2+17:]; oldest == "" || seq < oldest {
				oldest = seq
			}
			return false
		})
	}
	if _, id, ok := strings.Cut(oldest, "/"); ok {
		if t, ok := getTask(f.st, tenant, id); ok {
			s.OldestWaitingSince = t.CreatedAt
		}
	}
	// The earliest delayed one, if it is due.
	f.st.Scan(base+"d/", "", func(k string, _ []byte) bool {
		if at := parseHex16(k[len(base)+2 : len(base)+2+16]); at <= q.clock && (s.OldestWaitingSince == 0 || at < s.OldestWaitingSince) {
			s.OldestWaitingSince = at
		}
		return false
	})
	s.ClaimsLastMinute = qc.claimsLastMinute(q.clock)
	return s
}

// QueueStats returns a queue's figures (zeros for a queue without tasks)
// and the applied index.
func (f *FSM) QueueStats(tenant, queue string) (QueueStats, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.queueStats(tenant, queue), f.applied
}

// ListQueues returns, in name order, the figures of the tenant's queues
// that hold at least one task, after the queue named after (""; from the
// first), at most limit of those visible allows; next is the name to
// continue after when more may follow: the last name returned, or the last
// one examined when the page ends at MaxListWalk names (artifactlife.go).
func (f *FSM) ListQueues(tenant, after string, limit int, visible func(queue string) bool) (out []QueueStats, next string, index uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out = []QueueStats{}
	tq := f.queues.tenants[tenant]
	if tq == nil {
		return out, "", f.applied
	}
	walked := 0
	tq.names.AscendGreaterOrEqual(after+"\x00", func(name string) bool {
		if walked == MaxListWalk {
			next = after
			return false
		}
		walked++
		after = name
		if visible != nil && !visible(name) {
			return true
		}
		if len(out) == limit {
			next = out[len(out)-1].Queue
			return false
		}
		out = append(out, f.queueStats(tenant, name))
		return true
	})
	return out, next, f.applied
}
