// Package checker judges a recorded history (chaos/history). Each checker
// is a pure function of the history; each returns the anomalies it found,
// with the ids of the operations that show them.
//
// The checkers:
//
//   - Linearizable: the KV registers, refs and checkpoint heads (a register
//     with compare-and-set) and the task records (claim, renew, fenced
//     update, fail, retry, with fencing tokens) are checked with porcupine, one partition
//     per object. Unknown outcomes are handled as porcupine documents: the
//     operation never returns (its return time is after every other
//     operation), so it may take effect at any point after its invocation,
//     or not at all.
//   - Fencing: per task, no write is accepted with a token older than a
//     claim that was acknowledged (or observed) before the write was
//     invoked, and accepted fenced writes never go back in token order in
//     the log.
//   - LostWrites: every acknowledged insert, checkpoint, artifact and
//     transaction is present in the read-back made after healing; nothing
//     is present that no one wrote; a transaction that failed left nothing.
//   - Idempotency: all acknowledged attempts of one logical operation (one
//     Idempotency-Key, or one logical publish) returned the same answer:
//     every retried publish returns one artifact_id and version.
//   - Lifecycle: no claim beyond max_attempts, attempts monotonic between
//     retries, a dead task neither claimed nor revived but by a retry, no
//     queue claim before the task's available_at (by the state machine's
//     clock, and by the client's within the run's clock skew).
//   - Dependencies, Cancellation, Schedules, FlowControl (coord.go): no
//     dependent claimed before its dependencies may have been done;
//     nothing written under a cancelled lease's token; one task per
//     schedule tick, none missing, none while paused; no queue over its
//     max_leased, concurrency_key_limit or claim rate; a waitpoint
//     completed once, a parked task claimed only once it resolved.
//   - Converged: every node reports the same applied_index and state_digest.
//
// Operations whose outcome is Unknown never make a checker fail by
// themselves: they may or may not have been applied.
package checker

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/baton-dev/baton/chaos/history"
)

// Checker names, as they appear in anomalies and reports.
const (
	NameLinearizable = "linearizable"
	NameFencing      = "fencing"
	NameLostWrite    = "lost-write"
	NameIdempotency  = "idempotency"
	NameConvergence  = "convergence"
)

// Anomaly is one violation found by a checker.
type Anomaly struct {
	Checker string `json:"checker"`
	Key     string `json:"key,omitempty"` // the object concerned
	Message string `json:"message"`
	Ops     []int  `json:"ops,omitempty"` // ids of the operations that show it
}

func (a Anomaly) String() string {
	s := a.Checker + ": "
	if a.Key != "" {
		s += a.Key + ": "
	}
	s += a.Message
	switch n := len(a.Ops); {
	case n > 12:
		s += fmt.Sprintf(" (%d ops: %v ... %v)", n, a.Ops[:6], a.Ops[n-6:])
	case n > 0:
		s += fmt.Sprintf(" (ops %v)", a.Ops)
	}
	return s
}

// Options tune Check.
type Options struct {
	// LinearizableTimeout bounds porcupine per partition; a partition it
	// cannot decide in time is reported as inconclusive, not as an anomaly.
	// 0 means 60s.
	LinearizableTimeout time.Duration
	// SkipConvergence skips the convergence check (a history without node
	// states, such as one recorded against an external cluster).
	SkipConvergence bool
}

// Report is the verdict on one history.
type Report struct {
	Anomalies []Anomaly `json:"anomalies"`
	// Inconclusive lists the partitions porcupine could not decide in time.
	Inconclusive []string `json:"inconclusive,omitempty"`
	// Linearizability holds porcupine's results, for the visualisation.
	Linearizability *LinResult `json:"-"`
}

// OK reports whether no anomaly was found.
func (r *Report) OK() bool { return len(r.Anomalies) == 0 }

// Counts returns the number of anomalies per checker.
func (r *Report) Counts() map[string]int {
	m := map[string]int{}
	for _, a := range r.Anomalies {
		m[a.Checker]++
	}
	return m
}

// Summary is a short multi-line description of the anomalies.
func (r *Report) Summary() string {
	var b strings.Builder
	for _, a := range r.Anomalies {
		b.WriteString(a.String())
		b.WriteByte('\n')
	}
	for _, p := range r.Inconclusive {
		fmt.Fprintf(&b, "inconclusive: %s\n", p)
	}
	return b.String()
}

// Check runs every checker on h.
func Check(h *history.History, o Options) *Report {
	if o.LinearizableTimeout == 0 {
		o.LinearizableTimeout = 60 * time.Second
	}
	r := &Report{}
	lin := Linearizable(h, o.LinearizableTimeout)
	r.Linearizability = lin
	r.Anomalies = append(r.Anomalies, lin.Anomalies...)
	r.Inconclusive = append(r.Inconclusive, lin.Inconclusive...)
	r.Anomalies = append(r.Anomalies, Fencing(h)...)
	r.Anomalies = append(r.Anomalies, LostWrites(h)...)
	r.Anomalies = append(r.Anomalies, Idempotency(h)...)
	r.Anomalies = append(r.Anomalies, Lifecycle(h)...)
	r.Anomalies = append(r.Anomalies, Dependencies(h)...)
	r.Anomalies = append(r.Anomalies, Cancellation(h)...)
	r.Anomalies = append(r.Anomalies, Schedules(h)...)
	r.Anomalies = append(r.Anomalies, FlowControl(h)...)
	r.Anomalies = append(r.Anomalies, Waitpoints(h)...)
	if !o.SkipConvergence {
		r.Anomalies = append(r.Anomalies, Converged(h.Nodes)...)
	}
	sort.SliceStable(r.Anomalies, func(i, j int) bool { return r.Anomalies[i].Checker < r.Anomalies[j].Checker })
	return r
}

// Logical merges the attempts of each logical operation, the ops that
// carry the same Idempotency-Key, into one op: invoked when the first
// attempt was, with the answer of the first acknowledged attempt; Unknown
// when no attempt was acknowledged and one was unknown; otherwise the
// first definitive failure. The server applies a key at most once, so the
// merged op is what happened. ops must be flat (no transactions).
func Logical(ops []history.Op) []history.Op {
	groups := map[string][]int{}
	var order []string
	var out []history.Op
	for i, op := range ops {
		if op.IdemKey == "" {
			out = append(out, op)
			continue
		}
		if _, ok := groups[op.IdemKey]; !ok {
			order = append(order, op.IdemKey)
		}
		groups[op.IdemKey] = append(groups[op.IdemKey], i)
	}
	for _, key := range order {
		out = append(out, mergeAttempts(ops, groups[key]))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Invoke < out[j].Invoke })
	return out
}

func mergeAttempts(ops []history.Op, idx []int) history.Op {
	first, last := ops[idx[0]].Invoke, ops[idx[0]].Return
	var ok, fail, unknown *history.Op
	for _, i := range idx {
		op := &ops[i]
		first, last = min(first, op.Invoke), max(last, op.Return)
		switch op.Outcome {
		case history.OK:
			if ok == nil || op.Return < ok.Return {
				ok = op
			}
		case history.Fail:
			if fail == nil || op.Return < fail.Return {
				fail = op
			}
		default:
			unknown = op
		}
	}
	var m history.Op
	switch {
	case ok != nil:
		m = *ok
	case unknown != nil:
		m = *unknown
		m.Return = last
	default:
		m = *fail
	}
	m.Invoke = first
	return m
}
