package checker

import (
	"fmt"
	"hash/fnv"

	"github.com/anishathalye/porcupine"
)

// The register model: one object holding one value ("" when absent), read,
// written unconditionally or by compare-and-set, and deleted. KV entries,
// refs (the artifact_id they point at) and checkpoint threads (the id of
// their head) are all registers. Every write writes a value no other write
// writes, so a value names the write that produced it.

type regOp uint8

const (
	regRead regOp = iota
	regWrite
	regDelete
)

// regRes is the outcome of a register operation.
type regRes uint8

const (
	resOK       regRes = iota
	resMismatch        // the condition did not hold: nothing changed
	resNotFound        // read or delete of an absent value
	resNoEffect        // refused for a reason the register does not model (fenced, aborted, ...)
	resUnknown
)

type regInput struct {
	op    regOp
	value string // the value written
	// The condition: the value the register must hold. expectKnown is
	// false when the condition names a version no answer ever mapped to a
	// value; its outcome then says nothing about the register.
	hasCond     bool
	expect      string
	expectKnown bool
	// okIfSame: a write of the value the register already holds succeeds
	// without checking the condition (refs do this).
	okIfSame bool
}

type regOutput struct {
	res   regRes
	value string // what a read saw ("" when absent)
	// The current value a mismatch reported, when it is known.
	current      string
	currentKnown bool
}

func (in regInput) condHolds(state string) (holds, known bool) {
	if !in.hasCond {
		return true, true
	}
	if !in.expectKnown {
		return false, false
	}
	return state == in.expect, true
}

// regStep is the sequential specification.
func regStep(state string, in regInput, out regOutput) []string {
	switch in.op {
	case regRead:
		switch out.res {
		case resOK, resNotFound:
			if out.value == state {
				return []string{state}
			}
			return nil
		default:
			return []string{state}
		}
	case regDelete:
		return regDeleteStep(state, in, out)
	}
	same := in.okIfSame && state == in.value
	holds, known := in.condHolds(state)
	switch out.res {
	case resOK:
		if same || holds || !known {
			return []string{in.value}
		}
		return nil
	case resMismatch:
		if same || (known && holds) || !in.hasCond {
			return nil
		}
		if out.currentKnown && out.current != state {
			return nil
		}
		return []string{state}
	case resUnknown:
		switch {
		case same:
			return []string{state}
		case !known:
			return []string{state, in.value}
		case holds:
			return []string{in.value}
		}
		return []string{state}
	}
	return []string{state} // no effect
}

func regDeleteStep(state string, in regInput, out regOutput) []string {
	holds, known := in.condHolds(state)
	switch out.res {
	case resOK:
		if state != "" && (holds || !known) {
			return []string{""}
		}
		return nil
	case resNotFound:
		if state == "" {
			return []string{state}
		}
		return nil
	case resMismatch:
		if state == "" || (known && holds) {
			return nil
		}
		if out.currentKnown && out.current != state {
			return nil
		}
		return []string{state}
	case resUnknown:
		switch {
		case state == "":
			return []string{state}
		case !known:
			return []string{state, ""}
		case holds:
			return []string{""}
		}
		return []string{state}
	}
	return []string{state}
}

// registerModel is the porcupine model of one register.
var registerModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{""} },
	Step: func(state, input, output any) []any {
		next := regStep(state.(string), input.(regInput), output.(regOutput))
		out := make([]any, len(next))
		for i, s := range next {
			out[i] = s
		}
		return out
	},
	Hash: func(state any) uint64 {
		h := fnv.New64a()
		h.Write([]byte(state.(string)))
		return h.Sum64()
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		return describeReg(in, out)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%q", state) },
}

func describeReg(in regInput, out regOutput) string {
	var s string
	switch in.op {
	case regRead:
		s = "read()"
	case regWrite:
		s = fmt.Sprintf("write(%q)", in.value)
	case regDelete:
		s = "delete()"
	}
	if in.hasCond {
		if in.expectKnown {
			s += fmt.Sprintf(" if %q", in.expect)
		} else {
			s += " if <unmapped version>"
		}
	}
	switch out.res {
	case resOK:
		if in.op == regRead {
			return s + fmt.Sprintf(" -> %q", out.value)
		}
		return s + " -> ok"
	case resMismatch:
		if out.currentKnown {
			return s + fmt.Sprintf(" -> mismatch (current %q)", out.current)
		}
		return s + " -> mismatch"
	case resNotFound:
		return s + " -> not found"
	case resNoEffect:
		return s + " -> refused"
	}
	return s + " -> unknown"
}
