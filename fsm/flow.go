package fsm

import (
	"fmt"

	"github.com/baton-dev/baton/fsm/wire"
)

// Flow control per queue (docs/api.md "Flow control"): a queue's policy
// may cap the tasks leased at once (MaxLeased), the claims per second
// (ClaimsPerSecond with a burst of ClaimBurst, a token bucket), and the
// tasks leased at once per concurrency key (KeyLimit; a task's key is set
// at creation). The state machine enforces them on every claim, by id or
// from the queue, so no fleet of workers can exceed them.
//
// "Leased" is a task with an owner, its lease live or run out: a task
// whose lease ran out keeps its slot until a claim takes it again (which
// keeps the count) or it is released, failed, cancelled or finished. A
// claim at a limit can still take such a task; it takes no other.
//
// The counts are read from the derived queue index (queuestats.go), which
// every replica keeps alike from the records, plus the changes of the
// command being applied (a transaction's earlier claims). The bucket is a
// replicated record, written by each claim of a rate-limited queue:
//
//	t/<tenant>/qr/<queue>   flowBucket
//	cfg/flowcontrol         present once a queue policy had a flow field
const flowMarkerKey = "cfg/flowcontrol"

// markFlow puts flowMarkerKey once a task has a concurrency key or a
// policy a flow field: an older member, which would drop them, then
// refuses the snapshot.
func (f *FSM) markFlow() {
	if !f.st.Has(flowMarkerKey) {
		f.st.Put(flowMarkerKey, []byte{1})
	}
}

// maxFlowWalk bounds how many tasks a queue claim walks past because their
// concurrency key is full (or the queue is at max_leased) looking for one
// it may take.
const maxFlowWalk = 1024

// flowBucket is a rate-limited queue's token bucket: milli-tokens at At.
type flowBucket struct {
	Milli int64
	At    int64
}

func flowBucketKey(tenant, queue string) string { return "t/" + tenant + "/qr/" + queue }

// flowLimited reports whether p has any flow field.
func (p *QueuePolicy) flowLimited() bool {
	return p.MaxLeased > 0 || p.ClaimsPerSecond > 0 || p.KeyLimit > 0
}

// bucketAt is the queue's bucket refilled to now (full for a new one).
func bucketAt(st *Store, tenant, queue string, p *QueuePolicy, now int64) flowBucket {
	burst := max(p.ClaimBurst, 1) * 1000
	b := flowBucket{Milli: burst, At: now}
	if raw, ok := st.Get(flowBucketKey(tenant, queue)); ok && decode(raw, &b) == nil {
		if now > b.At {
			b.Milli = min(burst, b.Milli+(now-b.At)*p.ClaimsPerSecond)
			b.At = now
		}
	}
	return b
}

// rateNext is 0 when the queue's rate allows a claim at now, else the time
// at which it will.
func rateNext(st *Store, tenant, queue string, p *QueuePolicy, now int64) int64 {
	if p.ClaimsPerSecond <= 0 {
		return 0
	}
	b := bucketAt(st, tenant, queue, p, now)
	if b.Milli >= 1000 {
		return 0
	}
	return now + (1000-b.Milli+p.ClaimsPerSecond-1)/p.ClaimsPerSecond
}

// takeToken spends one claim of the queue's rate (the caller checked
// rateNext).
func (f *FSM) takeToken(tenant, queue string, p *QueuePolicy, now int64) {
	if p.ClaimsPerSecond <= 0 {
		return
	}
	b := bucketAt(f.st, tenant, queue, p, now)
	b.Milli -= 1000
	f.st.Put(flowBucketKey(tenant, queue), encode(&b))
}

// flowAdmit returns the filter of the tasks a claim of the queue may take
// under p's leased limits (nil: any). Called with nil, it reports whether
// any task without an owner may be taken: at max_leased none may, and the
// claim looks at run-out leases only.
func (f *FSM) flowAdmit(tenant, queue string, p *QueuePolicy) func(*Task) bool {
	if p.MaxLeased <= 0 && p.KeyLimit <= 0 {
		return nil
	}
	leased, _ := f.queues.leasedNow(tenant, queue, "")
	full := p.MaxLeased > 0 && leased >= p.MaxLeased
	return func(t *Task) bool {
		if t == nil {
			return !full
		}
		if t.Owner != "" {
			return true // a lease that ran out: taking it again keeps the counts
		}
		leased, byKey := f.queues.leasedNow(tenant, queue, t.ConcurrencyKey)
		if p.MaxLeased > 0 && leased >= p.MaxLeased {
			return false
		}
		return p.KeyLimit <= 0 || t.ConcurrencyKey == "" || byKey < p.KeyLimit
	}
}

// flowRefusal refuses a claim by id of t that p's limits do not allow, and
// otherwise spends a token of its rate.
func (f *FSM) flowRefusal(t *Task, now int64) *Result {
	p := queuePolicy(f.st, t.Tenant, t.Queue)
	if !p.flowLimited() {
		return nil
	}
	if next := rateNext(f.st, t.Tenant, t.Queue, &p, now); next != 0 {
		return fail(wire.CodeRateLimited, fmt.Sprintf("queue %q is at its rate of %d claims a second", t.Queue, p.ClaimsPerSecond),
			map[string]any{"limit": "claims_per_second", "retry_after_ms": next - now})
	}
	if admit := f.flowAdmit(t.Tenant, t.Queue, &p); admit != nil && !admit(t) {
		return fail(wire.CodeRateLimited, fmt.Sprintf("queue %q is at its limit of leased tasks (max_leased %d, concurrency_key_limit %d for key %q)",
			t.Queue, p.MaxLeased, p.KeyLimit, t.ConcurrencyKey), map[string]any{"limit": "leased"})
	}
	f.takeToken(t.Tenant, t.Queue, &p, now)
	return nil
}

// leasedNow counts the queue's leased tasks and those of them with key,
// with the changes of the command being applied.
func (q *queueIndex) leasedNow(tenant, queue, key string) (leased, byKey int64) {
	if tq := q.tenants[tenant]; tq != nil {
		if qc := tq.queues[queue]; qc != nil {
			leased = qc.leased
			if key != "" {
				byKey = qc.keys[key]
			}
		}
	}
	for _, c := range q.pending {
		for sign, fct := range [2]*taskFacts{c.old, c.new} {
			if fct == nil || fct.leaseUntil == 0 || fct.tenant != tenant || fct.queue != queue {
				continue
			}
			d := int64(1)
			if sign == 0 {
				d = -1
			}
			leased += d
			if key != "" && fct.key == key {
				byKey += d
			}
		}
	}
	return leased, byKey
}

func (a *QueuePolicyArgs) flowVersion() byte {
	if a.Policy.flowLimited() || a.Policy.ClaimBurst != 0 {
		return EntryVersion6
	}
	return 0
}

func (a *TaskCreateArgs) keyVersion() byte {
	if a.ConcurrencyKey != "" {
		return EntryVersion6
	}
	return 0
}
