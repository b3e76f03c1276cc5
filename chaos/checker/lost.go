package checker

import (
	"fmt"
	"sort"
	"strings"

	"github.com/baton-dev/baton/chaos/history"
)

// Namespaces and queues the lost-write checker knows. The workload writes
// them; the checker reads them back from the final operations.
const (
	// SetNamespace holds insert-only KV entries (expect_version 0), one
	// key per insert: a set whose every acknowledged element must survive.
	SetNamespace = "set"
	// HandoffNamespace holds the KV entry each handoff transaction writes
	// beside the task it creates, under the task's id.
	HandoffNamespace = "hand"
)

// LostWrites compares what was acknowledged with the read-back made after
// healing (the ops marked Final):
//
//   - every acknowledged insert of the set namespace is present, every
//     present one was attempted, and one that definitively failed is absent;
//   - every acknowledged checkpoint is in its thread;
//   - every acknowledged artifact version is listed with its artifact_id;
//   - a handoff transaction (fenced update, task create, kv insert) is all
//     or nothing: its task and its entry are both present or both absent,
//     present when it was acknowledged, absent when it definitively failed.
func LostWrites(h *history.History) []Anomaly {
	ops := Logical(history.Flatten(h.Ops))
	var final []history.Op
	for _, op := range ops {
		if op.Final {
			final = append(final, op)
		}
	}
	var out []Anomaly
	out = append(out, lostSet(ops, final)...)
	out = append(out, lostCheckpoints(ops, final)...)
	out = append(out, lostArtifacts(ops, final)...)
	out = append(out, lostHandoffs(h.Ops, final)...)
	return out
}

// presence is what the final read-back says about one list.
type presence struct {
	read   bool
	values map[string]bool
}

func finalList(final []history.Op, kind history.Kind, key string) presence {
	p := presence{values: map[string]bool{}}
	for _, op := range final {
		if op.Kind == kind && op.In.Key == key && op.Outcome == history.OK {
			p.read = true
			for _, v := range op.Out.Values {
				p.values[v] = true
			}
		}
	}
	return p
}

// judge compares writes (value -> logical op) with a final listing.
func judge(key string, writes map[string]history.Op, p presence) []Anomaly {
	if !p.read {
		if len(writes) == 0 {
			return nil
		}
		return []Anomaly{{Checker: NameLostWrite, Key: key, Message: "the final read-back of this object did not succeed"}}
	}
	var out []Anomaly
	vals := make([]string, 0, len(writes))
	for v := range writes {
		vals = append(vals, v)
	}
	sort.Strings(vals)
	for _, v := range vals {
		op := writes[v]
		switch {
		case op.Outcome == history.OK && !p.values[v]:
			out = append(out, Anomaly{Checker: NameLostWrite, Key: key,
				Message: fmt.Sprintf("acknowledged write %q is missing at the end", v), Ops: []int{op.ID}})
		case op.Outcome == history.Fail && p.values[v]:
			out = append(out, Anomaly{Checker: NameLostWrite, Key: key,
				Message: fmt.Sprintf("write %q failed (%s) but is present at the end", v, op.Code), Ops: []int{op.ID}})
		}
	}
	var phantoms []string
	for v := range p.values {
		if _, ok := writes[v]; !ok {
			phantoms = append(phantoms, v)
		}
	}
	sort.Strings(phantoms)
	for _, v := range phantoms {
		out = append(out, Anomaly{Checker: NameLostWrite, Key: key, Message: fmt.Sprintf("%q is present but no one wrote it", v)})
	}
	return out
}

func lostSet(ops, final []history.Op) []Anomaly {
	writes := map[string]history.Op{}
	for _, op := range ops {
		if op.Kind == history.KVPut && !op.Final && strings.HasPrefix(op.In.Key, SetNamespace+"/") {
			writes[op.In.Key] = op
		}
	}
	return judge("kv:"+SetNamespace, writes, finalList(final, history.KVList, SetNamespace))
}

func lostCheckpoints(ops, final []history.Op) []Anomaly {
	byThread := map[string]map[string]history.Op{}
	for _, op := range ops {
		if op.Kind != history.CheckpointPut || op.Final {
			continue
		}
		if byThread[op.In.Key] == nil {
			byThread[op.In.Key] = map[string]history.Op{}
		}
		byThread[op.In.Key][op.In.Value] = op
	}
	threads := make([]string, 0, len(byThread))
	for t := range byThread {
		threads = append(threads, t)
	}
	sort.Strings(threads)
	var out []Anomaly
	for _, t := range threads {
		out = append(out, judge("cp:"+t, byThread[t], finalList(final, history.CheckpointList, t))...)
	}
	return out
}

// ArtifactEntry is how a final artifact listing names one version.
func ArtifactEntry(version uint64, artifactID string) string {
	return fmt.Sprintf("v%d=%s", version, artifactID)
}

func lostArtifacts(ops, final []history.Op) []Anomaly {
	byName := map[string][]history.Op{}
	for _, op := range ops {
		if op.Kind == history.ArtifactPublish && op.Outcome == history.OK && !op.Final {
			byName[op.In.Key] = append(byName[op.In.Key], op)
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []Anomaly
	for _, name := range names {
		p := finalList(final, history.ArtifactGet, name)
		if !p.read {
			out = append(out, Anomaly{Checker: NameLostWrite, Key: "artifact:" + name, Message: "the final read-back of this artifact did not succeed"})
			continue
		}
		for _, op := range byName[name] {
			if e := ArtifactEntry(op.Out.Version, op.Out.ArtifactID); !p.values[e] {
				out = append(out, Anomaly{Checker: NameLostWrite, Key: "artifact:" + name,
					Message: fmt.Sprintf("acknowledged version %s is missing at the end", e), Ops: []int{op.ID}})
			}
		}
	}
	return out
}

// lostHandoffs checks handoff transactions: raw ops, since the txn and its
// sub-ops are judged together; attempts of one txn share its key.
func lostHandoffs(ops, final []history.Op) []Anomaly {
	type handoff struct {
		task    string
		outcome history.Outcome
		ids     []int
	}
	byTask := map[string]*handoff{}
	var order []string
	for _, op := range ops {
		if op.Kind != history.Txn {
			continue
		}
		for _, s := range op.Sub {
			if s.Kind != history.TaskCreate {
				continue
			}
			h := byTask[s.In.Key]
			if h == nil {
				h = &handoff{task: s.In.Key, outcome: op.Outcome}
				byTask[s.In.Key] = h
				order = append(order, s.In.Key)
			}
			h.ids = append(h.ids, op.ID)
			h.outcome = mergeOutcome(h.outcome, op.Outcome)
		}
	}
	var out []Anomaly
	for _, id := range order {
		h := byTask[id]
		task, taskRead := finalExists(final, history.TaskGet, id)
		entry, entryRead := finalExists(final, history.KVGet, HandoffNamespace+"/"+id)
		key := "handoff:" + id
		switch {
		case !taskRead || !entryRead:
			out = append(out, Anomaly{Checker: NameLostWrite, Key: key, Message: "the final read-back of this handoff did not succeed", Ops: h.ids})
		case task != entry:
			out = append(out, Anomaly{Checker: NameLostWrite, Key: key,
				Message: fmt.Sprintf("transaction applied in part: task exists=%v, entry exists=%v", task, entry), Ops: h.ids})
		case h.outcome == history.OK && !task:
			out = append(out, Anomaly{Checker: NameLostWrite, Key: key, Message: "acknowledged transaction is missing at the end", Ops: h.ids})
		case h.outcome == history.Fail && task:
			out = append(out, Anomaly{Checker: NameLostWrite, Key: key, Message: "failed transaction is present at the end", Ops: h.ids})
		}
	}
	return out
}

// mergeOutcome combines the outcomes of attempts of one logical op: one
// acknowledged attempt decides; otherwise unknown wins over failure.
func mergeOutcome(a, b history.Outcome) history.Outcome {
	switch {
	case a == history.OK || b == history.OK:
		return history.OK
	case a == history.Unknown || b == history.Unknown:
		return history.Unknown
	}
	return history.Fail
}

// finalExists reports whether the final read of key found it, and whether
// the read was answered at all.
func finalExists(final []history.Op, kind history.Kind, key string) (exists, read bool) {
	for _, op := range final {
		if op.Kind != kind || op.In.Key != key {
			continue
		}
		switch {
		case op.Outcome == history.OK:
			return true, true
		case op.Code == "not_found":
			return false, true
		}
	}
	return false, false
}
