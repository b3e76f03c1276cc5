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
// makes it dead. The ops of such a task carry sweep, and the model lets
// the owner go before each of them.

type taskState struct {
	token  uint64
	hidden bool // the token is one no answer ever showed
	owner  string
	result string
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
}

type taskOutput struct {
	res taskRes
	// The task as answered (read, and the ok answers of claim, renew and
	// update, which return the task); hasTask tells whether it was.
	hasTask bool
	token   uint64
	owner   string
	result  string
	// Details of errors, when known.
	currentKnown bool
	current      uint64 // fenced: current_token
	leaseOwner   string // lease_held: owner
}

func (o taskOutput) matches(s taskState) bool {
	return !o.hasTask || (!s.hidden && o.token == s.token && o.owner == s.owner && o.result == s.result)
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
	if in.sweep && s.owner != "" {
		swept := s
		swept.owner = ""
		return append(taskStep1(s, in, out), taskStep1(swept, in, out)...)
	}
	return taskStep1(s, in, out)
}

func taskStep1(s taskState, in taskInput, out taskOutput) []taskState {
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
		n := taskState{token: out.token, owner: in.owner, result: s.result}
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
		next := []taskState{s, {hidden: true, owner: in.owner, result: s.result}}
		for _, t := range in.candidates {
			if s.hidden || t > s.token {
				next = append(next, taskState{token: t, owner: in.owner, result: s.result})
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
func failStep(s taskState, in taskInput, out taskOutput) []taskState {
	holds := !s.hidden && s.token == in.token && s.owner != ""
	n := s
	n.owner = ""
	switch out.res {
	case taskOK:
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
	n.owner = ""
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
		fmt.Fprintf(h, "%d/%v/%s/%s", s.token, s.hidden, s.owner, s.result)
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
		return fmt.Sprintf("token=%s owner=%q result=%q", tok, s.owner, s.result)
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
	}
	return s + " -> unknown"
}
