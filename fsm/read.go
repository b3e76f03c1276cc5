package fsm

import (
	"encoding/base64"
)

// Reads for the HTTP layer. Each takes the read lock once and returns the
// applied index of the state it saw, for X-Baton-Index.

// GetTask returns a task.
func (f *FSM) GetTask(tenant, id string) (*Task, uint64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, ok := getTask(f.st, tenant, id)
	return t, f.applied, ok
}

// TaskFilter selects tasks for ListTasks; empty fields match all.
type TaskFilter struct {
	Queue, Status, Owner string
	Limit                int
	PageToken            string
	// Visible, if set, hides tasks the caller may not read.
	Visible func(*Task) bool
}

// ListTasks lists a tenant's tasks in id order, filtered, one page at a time.
// The page token is opaque to clients: the id to continue after, encoded.
// A page examines at most MaxListWalk tasks (artifactlife.go), matching
// the filter and Visible or not: one that stops there has a next token,
// the last id examined, even when it is empty. A page that ends at Limit
// has one, its last id, when another task matches, as before.
func (f *FSM) ListTasks(tenant string, flt TaskFilter) (tasks []*Task, next string, index uint64) {
	after := ""
	if b, err := base64.RawURLEncoding.DecodeString(flt.PageToken); err == nil {
		after = string(b)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	prefix := taskPrefix(tenant)
	from := ""
	if after != "" {
		from = prefix + after + "\x00"
	}
	tasks = []*Task{}
	walked, last := 0, ""
	f.st.Scan(prefix, from, func(k string, v []byte) bool {
		if walked == MaxListWalk {
			next = base64.RawURLEncoding.EncodeToString([]byte(last))
			return false
		}
		walked++
		var t Task
		if decode(v, &t) != nil || !matches(&t, flt) || (flt.Visible != nil && !flt.Visible(&t)) {
			last = k[len(prefix):]
			return true
		}
		if len(tasks) == flt.Limit {
			// The last task answered, as before: a token past it could
			// name a task the caller may not read.
			next = base64.RawURLEncoding.EncodeToString([]byte(tasks[len(tasks)-1].ID))
			return false
		}
		tasks = append(tasks, &t)
		last = t.ID
		return true
	})
	return tasks, next, f.applied
}

func matches(t *Task, flt TaskFilter) bool {
	return (flt.Queue == "" || t.Queue == flt.Queue) && (flt.Status == "" || t.Status == flt.Status) &&
		(flt.Owner == "" || t.Owner == flt.Owner)
}

// Claimable reports whether a queue claim at now would find a task, and the
// earliest future lease expiry or delayed task's due time among the
// queue's tasks in statuses (0 if none): the time at which a waiting
// claimer should look again.
func (f *FSM) Claimable(tenant, queue string, statuses []string, now int64) (ok bool, nextExpiry int64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	// A lease out on its last attempt counts as claimable: the claim
	// moves the task to dead (and then finds what else there is).
	var admit func(*Task) bool
	p := queuePolicy(f.st, tenant, queue)
	if p.flowLimited() {
		// Flow control (flow.go): over its rate, nothing is claimable
		// before the next token; at its leased limits, only some tasks.
		if next := rateNext(f.st, tenant, queue, &p, now); next != 0 {
			return false, next
		}
		admit = f.flowAdmit(tenant, queue, &p)
	}
	best, exhausted, next := bestClaimable(f.st, tenant, queue, statuses, now, true, admit)
	if best != nil || len(exhausted) > 0 {
		return true, 0
	}
	return false, next
}
