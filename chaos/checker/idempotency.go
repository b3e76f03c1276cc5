package checker

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/baton-dev/baton/chaos/history"
)

// answer is what identifies an acknowledged answer for comparison: two
// acknowledged attempts of one logical operation must agree on it.
func answer(op *history.Op) string {
	o := op.Out
	return fmt.Sprintf("task=%s token=%d version=%d artifact=%s", o.TaskID, o.Token, o.Version, o.ArtifactID)
}

// Idempotency checks retries:
//
//   - all acknowledged attempts that carry one Idempotency-Key got the same
//     answer (the server replays the first);
//   - all acknowledged attempts of one logical publish (Input.Group, which
//     spans retries with a fresh key too) returned one artifact_id and one
//     version: a retried publish never makes a twin;
//   - per artifact name, a version number names one artifact_id;
//   - no claim was applied while its client was told it was not
//     (PhantomClaims);
//   - a write whose successful answer was lost on the way back, and that
//     the client then retried (with its key or in its client session), was
//     given that same answer (status and body), not the answer of a second
//     application (replayedAnswers).
func Idempotency(h *history.History) []Anomaly {
	ops := history.Flatten(h.Ops)
	var out []Anomaly
	out = append(out, replayedAnswers(h.Ops)...)
	out = append(out, sameAnswer(ops, "key", func(op *history.Op) string { return op.IdemKey })...)
	out = append(out, sameAnswer(ops, "publish", func(op *history.Op) string {
		if op.Kind != history.ArtifactPublish {
			return ""
		}
		return op.In.Group
	})...)
	out = append(out, versionsUnique(ops)...)
	out = append(out, PhantomClaims(h)...)
	return out
}

func replayedAnswers(ops []history.Op) []Anomaly {
	var out []Anomaly
	for i := range ops {
		op := &ops[i]
		if op.Outcome != history.OK || op.LostAnswer == "" || op.Answer == "" || op.Answer == op.LostAnswer {
			continue
		}
		if op.Kind == history.ChunkPut {
			continue // idempotent by its content: 201, then 200 "already held"
		}
		if op.Kind == history.TaskQueueClaim && strings.HasPrefix(op.LostAnswer, "204 ") {
			// A claim that found nothing wrote nothing: its retry looks at
			// the queue again and may take a task (docs/api.md
			// "Idempotency-Key").
			continue
		}
		out = append(out, Anomaly{Checker: NameIdempotency, Key: "replay:" + strconv.Itoa(op.ID),
			Message: fmt.Sprintf("%s: its first answer (%s) was lost and the retry was answered %s: applied twice, or a replay differs", op.Kind, op.LostAnswer, op.Answer),
			Ops:     []int{op.ID}})
	}
	return out
}

func sameAnswer(ops []history.Op, what string, group func(*history.Op) string) []Anomaly {
	first := map[string]*history.Op{}
	var out []Anomaly
	var keys []string
	bad := map[string][]int{}
	for i := range ops {
		op := &ops[i]
		g := group(op)
		if g == "" || op.Outcome != history.OK || op.Final {
			continue
		}
		f, ok := first[g]
		if !ok {
			first[g] = op
			continue
		}
		if answer(f) != answer(op) {
			if _, seen := bad[g]; !seen {
				keys = append(keys, g)
				bad[g] = []int{f.ID}
			}
			bad[g] = append(bad[g], op.ID)
		}
	}
	sort.Strings(keys)
	for _, g := range keys {
		f := first[g]
		out = append(out, Anomaly{Checker: NameIdempotency, Key: what + ":" + g,
			Message: fmt.Sprintf("retries of one %s got different answers (first: %s); a twin was made or a replay differs", f.Kind, answer(f)),
			Ops:     bad[g]})
	}
	return out
}

func versionsUnique(ops []history.Op) []Anomaly {
	type at struct {
		name    string
		version uint64
	}
	seen := map[at]*history.Op{}
	var out []Anomaly
	for i := range ops {
		op := &ops[i]
		if op.Kind != history.ArtifactPublish || op.Outcome != history.OK {
			continue
		}
		k := at{op.In.Key, op.Out.Version}
		if f, ok := seen[k]; ok && f.Out.ArtifactID != op.Out.ArtifactID {
			out = append(out, Anomaly{Checker: NameIdempotency, Key: "artifact:" + op.In.Key,
				Message: fmt.Sprintf("version %d was answered with two artifact ids, %s and %s", op.Out.Version, f.Out.ArtifactID, op.Out.ArtifactID),
				Ops:     []int{f.ID, op.ID}})
			continue
		}
		seen[k] = op
	}
	return out
}

// PhantomClaims finds claims that were applied although the client was
// told otherwise: a task shows owner O with token T, but O never had a
// claim acknowledged with T, nor one whose outcome is unknown, invoked
// before T was seen. This is what a retried claim whose first attempt was
// applied looks like when the retry is answered anew instead of replayed.
//
// One exception is documented (docs/api.md "Idempotency-Key"): a queue
// claim that found nothing writes nothing, and only the node that
// answered 204 remembers it; a late duplicate of it reaching another
// leader after an election may claim a task. So a queue claim answered
// "nothing claimable" that ran while a fault was active (or within
// electionSlack after it healed) may have claimed one.
func PhantomClaims(h *history.History) []Anomaly {
	ops := history.Flatten(h.Ops)
	claims := map[string][]*history.Op{} // owner -> claims
	for i := range ops {
		op := &ops[i]
		if op.Kind == history.TaskClaim || op.Kind == history.TaskQueueClaim {
			claims[op.In.Owner] = append(claims[op.In.Owner], op)
		}
	}
	duringFault := func(c *history.Op) bool {
		for _, f := range h.Faults {
			if c.Invoke <= f.End+int64(electionSlack) && c.Return >= f.Start {
				return true
			}
		}
		return false
	}
	explains := func(c *history.Op, task string, token uint64) bool {
		if c.Kind == history.TaskQueueClaim && c.Outcome == history.OK && c.Out.TaskID == "" && duringFault(c) {
			return true // a late duplicate after an election (above)
		}
		switch c.Outcome {
		case history.Unknown:
			return c.Kind == history.TaskQueueClaim || c.In.Key == task
		case history.OK:
			return c.Out.Token == token
		}
		return false
	}
	type seenKey struct {
		task  string
		token uint64
	}
	reported := map[seenKey]bool{}
	var out []Anomaly
	for i := range ops {
		op := &ops[i]
		if op.Outcome != history.OK || op.Out.Owner == "" || op.Out.Token == 0 || !isTaskKind(op.Kind) {
			continue
		}
		task := op.In.Key
		if op.Kind == history.TaskQueueClaim {
			task = op.Out.TaskID
		}
		k := seenKey{task, op.Out.Token}
		if reported[k] {
			continue
		}
		found := false
		var near []int
		for _, c := range claims[op.Out.Owner] {
			if c.Invoke > op.Return {
				continue
			}
			if explains(c, task, op.Out.Token) {
				found = true
				break
			}
			if c.Outcome != history.Fail || c.Kind == history.TaskQueueClaim {
				near = append(near, c.ID)
			}
		}
		if found {
			continue
		}
		reported[k] = true
		if len(near) > 3 {
			near = near[len(near)-3:]
		}
		out = append(out, Anomaly{Checker: NameIdempotency, Key: "task:" + task,
			Message: fmt.Sprintf("%s holds token %d from a claim it was never told succeeded (first seen by %s); its last claims before that: ops %v",
				op.Out.Owner, op.Out.Token, op.String(), near),
			Ops: append(near, op.ID)})
	}
	return out
}

// electionSlack is how long after a fault healed an election it caused
// may still be under way.
const electionSlack = 5 * time.Second
