package checker

import (
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/anishathalye/porcupine"
)

// The task model: one task record as the fencing protocol sees it, its
// current fencing token, its owner and its result. Lease expiry depends on
// the leader's clock, which the model does not know, so a claim of a task
// whose owner is someone else may succeed (the lease ran out) or fail with
// lease_held (it had not); everything that depends on the token alone is
// exact.
//
// A claim whose outcome is unknown issued a token nobody may have seen.
// The model lets it produce any token that the history shows for this task
// without a known claim that issued it (a read saw it, a fenced answer
// named it), or a hidden token that nobody ever saw.
//
// A failed attempt (task.fail) ends the lease and keeps the token; a retry
// ends no live lease (lease_held) and keeps the token. A task with
// max_attempts loses its owner without any operation on it when its lease
// runs out on its last attempt: the next queue claim, of whatever task,
// makes it dead (as it does a task released on its last attempt). The ops
// of such a task carry sweep, and the model lets it go dead, without an
// owner, before each of them.
//
// Retention: a task with a retention period that is in a terminal status
// (done, dead, cancelled) may be purged with no operation on it; the ops
// of such a task carry purge, and the model lets it go before each of
// them while it is terminal, never while it is not (a retry or a claim
// out of the queue took its expiry away), and never for a task without a
// period. A purged task is gone for good (the workload creates an id
// once): every operation on it is answered not_found (a guarded write on
// another resource: fenced, with current token 0), and a not_found
// answer is possible only then. When the period ran out is the lifecycle
// checker's to judge (Retention rules, lifecycle.go); the model judges
// the order.

type taskState struct {
	token    uint64
	hidden   bool // the token is one no answer ever showed
	owner    string
	result   string
	terminal bool // done, dead or cancelled
	gone     bool // purged
}

type taskOp uint8

const (
	taskRead taskOp = iota
	taskClaim
	taskRenew
	taskUpdate
	taskFence // a write on another resource guarded by this task's token
	taskFail  // a failed attempt: ends the lease under token
	taskRetry // revives the task: refused under a live lease
)

type taskRes uint8

const (
	taskOK taskRes = iota
	taskFenced
	taskLeaseHeld
	taskNoEffect // refused for another reason, or aborted with its transaction
	taskUnknown
	taskNotFound // the task does not exist
)

type taskInput struct {
	op       taskOp
	owner    string // claim
	token    uint64 // renew, update, fence
	hasToken bool   // update: with a fencing token
	result   string // update: the new result ("" leaves it)
	release  bool   // update
	// candidates are the tokens an unknown claim may have issued.
	candidates []uint64
	// sweep: the owner may have gone before this op (a lease that ran out
	// on the last attempt, made dead by a queue claim of another task).
	sweep bool
	// queue: a claim from the queue, which takes only a pending or working
	// task and makes it working.
	queue bool
	// status: the status an update sets ("": none).
	status string
	// nonRetryable: a fail that makes the task dead.
	nonRetryable bool
	// purge: the task has a retention period, so it may be purged before
	// this op while it is in a terminal status.
	purge bool
}

type taskOutput struct {
	res taskRes
	// The task as answered (read, and the ok answers of claim, renew and
	// update, which return the task); hasTask tells whether it was.
	hasTask bool
	token   uint64
	owner   string
	result  string
	status  string // "": not answered
	// Details of errors, when known.
	currentKnown bool
	current      uint64 // fenced: current_token
	leaseOwner   string // lease_held: owner
}

func (o taskOutput) matches(s taskState) bool {
	return !o.hasTask || (!s.hidden && o.token == s.token && o.owner == s.owner && o.result == s.result &&
		(o.status == "" || terminalStatus(o.status) == s.terminal))
}

// terminalStatus reports whether a retention period counts in status
// (docs/api.md "Retention").
func terminalStatus(status string) bool {
	return status == "done" || status == statusDead || status == "cancelled"
}

// fencedOK reports whether a fenced answer to token is possible in s.
func fencedOK(s taskState, token uint64, out taskOutput, ownerNeeded bool) bool {
	if !s.hidden && s.token == token && (!ownerNeeded || s.owner != "") {
		return false
	}
	if out.currentKnown {
		return !s.hidden && s.token == out.current
	}
	return true
}

func taskStep(s taskState, in taskInput, out taskOutput) []taskState {
	before := []taskState{s}
	if in.sweep && !s.gone && (s.owner != "" || !s.terminal) {
		// Dead by a queue claim of any task: its lease ran out on its last
		// attempt, or it was released on it.
		swept := s
		swept.owner, swept.terminal = "", true
		before = append(before, swept)
	}
	if in.purge && !s.gone {
		for _, b := range before {
			if b.terminal {
				before = append(before, taskState{gone: true})
				break
			}
		}
	}
	var next []taskState
	for _, b := range before {
		next = append(next, taskStep1(b, in, out)...)
	}
	return next
}

// goneStep: every op on a purged task finds it absent.
func goneStep(s taskState, in taskInput, out taskOutput) []taskState {
	switch out.res {
	case taskNotFound, taskUnknown, taskNoEffect:
		return []taskState{s}
	case taskFenced: // a guard naming a task that does not exist
		if in.op == taskFence && (!out.currentKnown || out.current == 0) {
			return []taskState{s}
		}
	}
	return nil
}

func taskStep1(s taskState, in taskInput, out taskOutput) []taskState {
	if s.gone {
		return goneStep(s, in, out)
	}
	if out.res == taskNotFound {
		return nil // it exists
	}
	one := func(n taskState, ok bool) []taskState {
		if ok {
			return []taskState{n}
		}
		return nil
	}
	switch in.op {
	case taskRead:
		if out.res == taskOK {
			return one(s, out.matches(s))
		}
		return []taskState{s}
	case taskClaim:
		return claimStep(s, in, out)
	case taskRenew:
		switch out.res {
		case taskOK:
			return one(s, !s.hidden && s.token == in.token && s.owner != "" && out.matches(s))
		case taskFenced:
			return one(s, fencedOK(s, in.token, out, true))
		}
		return []taskState{s}
	case taskUpdate:
		return updateStep(s, in, out)
	case taskFail:
		return failStep(s, in, out)
	case taskRetry:
		return retryStep(s, out)
	case taskFence:
		switch out.res {
		case taskOK:
			return one(s, !s.hidden && s.token == in.token)
		case taskFenced:
			return one(s, fencedOK(s, in.token, out, false))
		}
		return []taskState{s}
	}
	return nil
}

func claimStep(s taskState, in taskInput, out taskOutput) []taskState {
	switch out.res {
	case taskOK:
		if !s.hidden && out.token <= s.token {
			return nil // tokens only grow
		}
		if in.queue && s.terminal {
			return nil // a queue claim takes pending and working tasks only
		}
		n := taskState{token: out.token, owner: in.owner, result: s.result, terminal: s.terminal && !in.queue}
		if !out.matches(n) {
			return nil
		}
		return []taskState{n}
	case taskLeaseHeld:
		if s.owner == "" || s.owner == in.owner || (out.leaseOwner != "" && out.leaseOwner != s.owner) {
			return nil
		}
		return []taskState{s}
	case taskUnknown:
		if in.queue && s.terminal {
			return []taskState{s}
		}
		terminal := s.terminal && !in.queue
		next := []taskState{s, {hidden: true, owner: in.owner, result: s.result, terminal: terminal}}
		for _, t := range in.candidates {
			if s.hidden || t > s.token {
				next = append(next, taskState{token: t, owner: in.owner, result: s.result, terminal: terminal})
			}
		}
		return next
	}
	return []taskState{s}
}

func updateStep(s taskState, in taskInput, out taskOutput) []taskState {
	apply := func() taskState {
		n := s
		if in.result != "" {
			n.result = in.result
		}
		if in.release {
			n.owner = ""
		}
		if in.status != "" {
			n.terminal = terminalStatus(in.status)
		}
		return n
	}
	holds := !in.hasToken || (!s.hidden && s.token == in.token)
	switch out.res {
	case taskOK:
		if !holds {
			return nil
		}
		n := apply()
		if !out.matches(n) {
			return nil
		}
		return []taskState{n}
	case taskFenced:
		if !in.hasToken || !fencedOK(s, in.token, out, false) {
			return nil
		}
		return []taskState{s}
	case taskLeaseHeld:
		if in.hasToken || s.owner == "" {
			return nil
		}
		return []taskState{s}
	case taskUnknown:
		if in.hasToken && holds {
			return []taskState{apply()}
		}
		if !in.hasToken {
			return []taskState{s, apply()}
		}
	}
	return []taskState{s}
}

// failStep: a failure is accepted under the current token while the task
// has an owner, and leaves it without one.
// It makes the task dead (terminal) when non-retryable or on the last
// attempt, which the model does not count: an answer says which, and a
// fail of unknown outcome of a task with max_attempts may do either.
func failStep(s taskState, in taskInput, out taskOutput) []taskState {
	holds := !s.hidden && s.token == in.token && s.owner != ""
	n := s
	n.owner, n.terminal = "", in.nonRetryable
	switch out.res {
	case taskOK:
		if out.status != "" {
			n.terminal = terminalStatus(out.status)
		}
		if !holds || !out.matches(n) {
			return nil
		}
		return []taskState{n}
	case taskFenced:
		if !fencedOK(s, in.token, out, true) {
			return nil
		}
		return []taskState{s}
	case taskUnknown:
		if holds && in.sweep && !in.nonRetryable {
			dead := n
			dead.terminal = true
			return []taskState{n, dead}
		}
		if holds {
			return []taskState{n}
		}
	}
	return []taskState{s}
}

// retryStep: a retry leaves the task without an owner, unless a live lease
// refuses it (lease expiry is the leader's: any owner may have expired).
func retryStep(s taskState, out taskOutput) []taskState {
	n := s
	n.owner, n.terminal = "", false
	switch out.res {
	case taskOK:
		if !out.matches(n) {
			return nil
		}
		return []taskState{n}
	case taskLeaseHeld:
		if s.owner == "" || (out.leaseOwner != "" && out.leaseOwner != s.owner) {
			return nil
		}
		return []taskState{s}
	case taskUnknown:
		if s.owner == "" {
			return []taskState{n}
		}
		return []taskState{s, n}
	}
	return []taskState{s}
}

// taskModel is the porcupine model of one task.
var taskModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{taskState{}} },
	Step: func(state, input, output any) []any {
		next := taskStep(state.(taskState), input.(taskInput), output.(taskOutput))
		out := make([]any, len(next))
		for i, s := range next {
			out[i] = s
		}
		return out
	},
	Hash: func(state any) uint64 {
		s := state.(taskState)
		h := fnv.New64a()
		fmt.Fprintf(h, "%d/%v/%s/%s/%v/%v", s.token, s.hidden, s.owner, s.result, s.terminal, s.gone)
		return h.Sum64()
	},
	DescribeOperation: func(input, output any) string {
		return describeTask(input.(taskInput), output.(taskOutput))
	},
	DescribeState: func(state any) string {
		s := state.(taskState)
		tok := strconv.FormatUint(s.token, 10)
		if s.hidden {
			tok = "?"
		}
		if s.gone {
			return "purged"
		}
		return fmt.Sprintf("token=%s owner=%q result=%q terminal=%v", tok, s.owner, s.result, s.terminal)
	},
}

func describeTask(in taskInput, out taskOutput) string {
	var s string
	switch in.op {
	case taskRead:
		s = "read()"
	case taskClaim:
		s = fmt.Sprintf("claim(%s)", in.owner)
	case taskRenew:
		s = fmt.Sprintf("renew(%d)", in.token)
	case taskUpdate:
		tok := "-"
		if in.hasToken {
			tok = strconv.FormatUint(in.token, 10)
		}
		s = fmt.Sprintf("update(%s, %q", tok, in.result)
		if in.release {
			s += ", release"
		}
		if in.status != "" {
			s += ", " + in.status
		}
		s += ")"
	case taskFence:
		s = fmt.Sprintf("fenced-write(%d)", in.token)
	case taskFail:
		s = fmt.Sprintf("fail(%d)", in.token)
	case taskRetry:
		s = "retry()"
	}
	if in.sweep {
		s = "[owner may lapse] " + s
	}
	if in.purge {
		s = "[purged if terminal] " + s
	}
	switch out.res {
	case taskOK:
		if out.hasTask {
			return s + fmt.Sprintf(" -> token=%d owner=%q result=%q", out.token, out.owner, out.result)
		}
		return s + " -> ok"
	case taskFenced:
		if out.currentKnown {
			return s + fmt.Sprintf(" -> fenced (current %d)", out.current)
		}
		return s + " -> fenced"
	case taskLeaseHeld:
		return s + fmt.Sprintf(" -> lease_held by %q", out.leaseOwner)
	case taskNoEffect:
		return s + " -> refused"
	case taskNotFound:
		return s + " -> not_found"
	}
	return s + " -> unknown"
}
