package fsm

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Dependencies and result passing (docs/api.md "Dependencies").
//
// A task created with depends_on (tasks of its tenant that exist then, so
// a cycle cannot be made: a task only ever depends on older ones) is not
// claimable until each of them has been resolved. A dependency resolves
// when it first enters a terminal status or is deleted: done satisfies
// it, anything else (dead, cancelled, deleted) fails it, and the
// dependent follows its policy (fail: dead, cancel: cancelled, ignore:
// counts as satisfied). The dependent counts its unresolved dependencies
// (TaskDeps.Left); while that is above 0 it sits in its queue's b/ index,
// which no claim reads.
//
// Keys (tenant, task ids and statuses hold no "/"):
//
//	t/<tenant>/tdf/<dependent>/<dependent seq>/<dep>   one per dependency: empty until resolved, then its depOutcome
//	t/<tenant>/tdr/<dep>/<dep seq>/<dependent>         the reverse edge, while unresolved
//	tdq/<tenant>/<dep>/<dep seq>                       a resolved dependency whose edges are still to be processed (depOutcome)
//	tdg/<tenant>/<dependent>/<dependent seq>           a deleted dependent whose tdf keys are still to be deleted
//	cfg/deps                                           present once a task record had Deps
//
// The seqs tell apart two tasks that had the same id, one deleted before
// the other was created. A fan-out of any size costs each command a
// bounded amount: the command that resolves a dependency processes at
// most depInlineBudget edges (cascades included), and the leader proposes
// task.resolve_deps for the rest, at most MaxResolveDeps edges a command.

// KindTaskResolveDeps processes queued dependency resolutions. Only in
// EntryVersion6 entries; proposed by the leader.
const KindTaskResolveDeps Kind = "task.resolve_deps"

// TaskResolveDepsArgs bounds one resolve command.
type TaskResolveDepsArgs struct{ Max int }

// Bounds.
const (
	// MaxDependsOn bounds a task's dependencies.
	MaxDependsOn = 10000
	// MaxResolveDeps bounds the edges (and deleted dependents' keys) one
	// task.resolve_deps processes, whatever its args say.
	MaxResolveDeps = 2000
	// depInlineBudget bounds the edges processed by the command that
	// resolves a dependency.
	depInlineBudget = 64
	// MaxClaimDeps and maxClaimDepBytes bound the dependencies' outputs
	// a claim answer carries (their results' bytes); the rest are listed
	// by TaskDependencies.
	MaxClaimDeps     = 100
	maxClaimDepBytes = 256 << 10
)

// Dependency policies: what a failed dependency does to the dependent.
const (
	DepPolicyFail   = "fail"
	DepPolicyCancel = "cancel"
	DepPolicyIgnore = "ignore"
)

// ValidDepPolicy reports whether p is a policy ("" is fail).
func ValidDepPolicy(p string) bool {
	return p == "" || p == DepPolicyFail || p == DepPolicyCancel || p == DepPolicyIgnore
}

// TaskDeps is the dependency part of a task record; nil on a task created
// without dependencies.
type TaskDeps struct {
	Total  uint64
	Left   uint64 // not resolved yet
	Policy string `codec:",omitempty"` // "" is fail
}

// depOutcome is how a dependency ended, as the dependent keeps it.
type depOutcome struct {
	Status     string
	Result     []byte `codec:",omitempty"`
	ArtifactID string `codec:",omitempty"`
}

// DepOutput is one dependency of a task as answers show it: its status
// when it resolved ("" while unresolved), result and artifact.
type DepOutput struct {
	TaskID     string          `json:"task_id"`
	Resolved   bool            `json:"resolved"`
	Status     string          `json:"status"`
	Result     json.RawMessage `json:"result"`
	ArtifactID string          `json:"artifact_id"`
}

const (
	depQueuePrefix  = "tdq/"
	depGCPrefix     = "tdg/"
	depsMarkerKey   = "cfg/deps"
	depStatusDelete = "deleted"
)

func depFwdPrefix(tenant, id string, seq uint64) string {
	return "t/" + tenant + "/tdf/" + id + "/" + hex16(int64(seq)) + "/"
}
func depRevPrefix(tenant, dep string, seq uint64) string {
	return "t/" + tenant + "/tdr/" + dep + "/" + hex16(int64(seq)) + "/"
}
func depQueueKey(tenant, dep string, seq uint64) string {
	return depQueuePrefix + tenant + "/" + dep + "/" + hex16(int64(seq))
}
func depGCKey(tenant, id string, seq uint64) string {
	return depGCPrefix + tenant + "/" + id + "/" + hex16(int64(seq))
}

// blocked reports whether t waits on a dependency: no claim takes it.
func (t *Task) blocked() bool {
	return (t.Parked || t.Deps != nil && t.Deps.Left > 0) && t.Owner == "" && t.LeaseUntil == 0
}

// depsDenied refuses a dependency the principal proposing c may not read,
// answered as a missing one.
func depsDenied(st *Store, c *Command, t *Task) bool {
	return c.Principal != "" && fenceHidden(st, c, t)
}

// createDeps checks a create's dependencies and writes its edges; it
// returns the task's dependency part, or a refusal. t is the new task,
// not stored yet.
func createDeps(f *FSM, c *Command, a *TaskCreateArgs, t *Task) *Result {
	if len(a.DependsOn) > MaxDependsOn {
		return fail(CodeInvalidArgument, fmt.Sprintf("depends_on names %d tasks; at most %d", len(a.DependsOn), MaxDependsOn), nil)
	}
	if !ValidDepPolicy(a.DepPolicy) {
		return fail(CodeInvalidArgument, fmt.Sprintf("dependency_policy %q is not fail, cancel or ignore", a.DepPolicy), nil)
	}
	seen := make(map[string]bool, len(a.DependsOn))
	deps := &TaskDeps{Total: uint64(len(a.DependsOn)), Policy: a.DepPolicy}
	var failed *Task
	fwd := depFwdPrefix(t.Tenant, t.ID, t.Seq)
	for _, id := range a.DependsOn {
		if id == t.ID {
			return fail(CodeInvalidArgument, fmt.Sprintf("task %q may not depend on itself", id), nil)
		}
		if seen[id] {
			return fail(CodeInvalidArgument, fmt.Sprintf("depends_on names task %q twice", id), nil)
		}
		seen[id] = true
		d, ok := getTask(f.st, t.Tenant, id)
		if !ok || depsDenied(f.st, c, d) {
			return fail(CodeInvalidArgument, fmt.Sprintf("depends_on names task %q, which does not exist in tenant %q or is outside the caller's task grants", id, t.Tenant), nil)
		}
		switch {
		case d.Status == StatusDone:
			f.st.Put(fwd+id, encode(&depOutcome{Status: d.Status, Result: d.Result, ArtifactID: d.ArtifactID}))
		case TerminalStatus(d.Status):
			f.st.Put(fwd+id, encode(&depOutcome{Status: d.Status, Result: d.Result, ArtifactID: d.ArtifactID}))
			if failed == nil && a.DepPolicy != DepPolicyIgnore {
				failed = d
			}
		default:
			f.st.Put(fwd+id, nil)
			f.st.Put(depRevPrefix(t.Tenant, id, d.Seq)+t.ID, nil)
			deps.Left++
		}
	}
	t.Deps = deps
	if failed != nil {
		depFailed(t, failed.ID, failed.Status, t.CreatedAt)
	}
	if !f.st.Has(depsMarkerKey) {
		f.st.Put(depsMarkerKey, []byte{1})
	}
	return nil
}

// depFailed applies a failed dependency's policy to t (not stored yet).
func depFailed(t *Task, dep, status string, now int64) {
	if TerminalStatus(t.Status) || t.Owner != "" {
		return
	}
	l := t.ownLife()
	l.LastError = fmt.Sprintf("dependency %q ended %s", dep, status)
	l.AvailableAt = 0
	if t.Deps.Policy == DepPolicyCancel {
		t.Status = StatusCancelled
		return
	}
	t.Status = StatusDead
	l.FailedAt = now
	l.Failures++
}

// noteDependents queues the resolution of t's dependents when t (old
// before the command) enters a terminal status or is deleted (t nil), and
// the clean-up of a deleted dependent's dependency keys. Called by putTask
// and deleteTask.
func (f *FSM) noteDependents(old, t *Task) {
	cur := t
	if t == nil {
		cur = old
		if old.Deps != nil {
			f.st.Put(depGCKey(old.Tenant, old.ID, old.Seq), nil)
		}
	}
	entering := t == nil || TerminalStatus(t.Status) && (old == nil || !TerminalStatus(old.Status))
	if !entering || !f.st.Has(depsMarkerKey) || !f.hasEdges(cur) {
		return
	}
	out := &depOutcome{Status: depStatusDelete}
	if t != nil {
		out = &depOutcome{Status: t.Status, Result: t.Result, ArtifactID: t.ArtifactID}
	}
	f.st.Put(depQueueKey(cur.Tenant, cur.ID, cur.Seq), encode(out))
	if !f.resolving {
		f.resolving = true
		f.resolveDeps(depInlineBudget)
		f.resolving = false
	}
}

func (f *FSM) hasEdges(t *Task) bool { return hasPrefix(f.st, depRevPrefix(t.Tenant, t.ID, t.Seq)) }

// resolveDeps processes queued resolutions and clean-ups, at most budget
// keys, and returns how many it processed.
func (f *FSM) resolveDeps(budget int) int {
	done := 0
	for done < budget {
		var qk string
		var out depOutcome
		f.st.Scan(depQueuePrefix, "", func(k string, v []byte) bool {
			qk = k
			_ = decode(v, &out) // written by noteDependents only
			return false
		})
		if qk == "" {
			break
		}
		tenant, dep, seq := splitDepKey(qk[len(depQueuePrefix):])
		prefix := depRevPrefix(tenant, dep, seq)
		var dependents []string
		f.st.Scan(prefix, "", func(k string, _ []byte) bool {
			dependents = append(dependents, k[len(prefix):])
			return len(dependents) < budget-done
		})
		for _, id := range dependents {
			f.st.Delete(prefix + id)
			f.resolveOne(tenant, id, dep, &out)
			done++
		}
		if !hasPrefix(f.st, prefix) {
			f.st.Delete(qk)
		}
	}
	for done < budget {
		var gk string
		f.st.Scan(depGCPrefix, "", func(k string, _ []byte) bool {
			gk = k
			return false
		})
		if gk == "" {
			break
		}
		tenant, id, seq := splitDepKey(gk[len(depGCPrefix):])
		prefix := depFwdPrefix(tenant, id, seq)
		var keys []string
		f.st.Scan(prefix, "", func(k string, _ []byte) bool {
			keys = append(keys, k)
			return len(keys) < budget-done
		})
		for _, k := range keys {
			f.st.Delete(k)
			done++
		}
		if !hasPrefix(f.st, prefix) {
			f.st.Delete(gk)
		}
	}
	return done
}

// hasPrefix reports whether st holds a key that starts with prefix.
func hasPrefix(st *Store, prefix string) bool {
	has := false
	st.Scan(prefix, "", func(string, []byte) bool {
		has = true
		return false
	})
	return has
}

func splitDepKey(s string) (tenant, id string, seq uint64) {
	tenant, rest, _ := strings.Cut(s, "/")
	id, hexSeq, _ := strings.Cut(rest, "/")
	return tenant, id, uint64(parseHex16(hexSeq))
}

// resolveOne resolves dependency dep of task id with out.
func (f *FSM) resolveOne(tenant, id, dep string, out *depOutcome) {
	t, ok := getTask(f.st, tenant, id)
	if !ok || t.Deps == nil || t.Deps.Left == 0 {
		return
	}
	fk := depFwdPrefix(tenant, id, t.Seq) + dep
	if v, ok := f.st.Get(fk); !ok || len(v) != 0 {
		return // not its dependency (another task of that id), or resolved already
	}
	f.st.Put(fk, encode(out))
	old := *t
	d := *t.Deps
	t.Deps = &d
	d.Left--
	if out.Status != StatusDone && d.Policy != DepPolicyIgnore {
		depFailed(t, dep, out.Status, f.clock)
	}
	t.Version++
	t.UpdatedAt = f.clock
	f.putTask(&old, t)
}

func applyTaskResolveDeps(f *FSM, _ *applyCtx, c *Command) *Result {
	var a TaskResolveDepsArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	f.resolving = true
	n := f.resolveDeps(min(max(a.Max, 0), MaxResolveDeps))
	f.resolving = false
	return okValue(OutcomeOK, map[string]int{"processed": n})
}

// DepWorkPending reports whether resolutions or clean-ups are queued: the
// leader then proposes task.resolve_deps.
func (f *FSM) DepWorkPending() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return hasPrefix(f.st, depQueuePrefix) || hasPrefix(f.st, depGCPrefix)
}

// depOutputs lists t's dependencies after the id after, at most limit of
// them and, when maxBytes > 0, about that many bytes of results; more
// reports whether others follow.
func depOutputs(st *Store, t *Task, after string, limit, maxBytes int) (out []DepOutput, more bool) {
	out = []DepOutput{}
	if t.Deps == nil {
		return out, false
	}
	prefix := depFwdPrefix(t.Tenant, t.ID, t.Seq)
	size := 0
	from := ""
	if after != "" {
		from = prefix + after + "\x00"
	}
	st.Scan(prefix, from, func(k string, v []byte) bool {
		if len(out) == limit || maxBytes > 0 && size > maxBytes {
			more = true
			return false
		}
		o := DepOutput{TaskID: k[len(prefix):], Result: json.RawMessage("null")}
		if len(v) != 0 {
			var d depOutcome
			if decode(v, &d) == nil {
				o.Resolved, o.Status, o.ArtifactID = true, d.Status, d.ArtifactID
				if len(d.Result) != 0 {
					o.Result = d.Result
				}
			}
		}
		size += len(o.Result) + len(o.TaskID) + 64
		out = append(out, o)
		return true
	})
	return out, more
}

// TaskDependencies lists a task's dependencies in id order after after,
// at most limit; next is the id to continue after ("" at the end).
func (f *FSM) TaskDependencies(tenant, id, after string, limit int) (out []DepOutput, next string, found bool, index uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, ok := getTask(f.st, tenant, id)
	if !ok {
		return nil, "", false, f.applied
	}
	out, more := depOutputs(f.st, t, after, limit, 0)
	if more && len(out) > 0 {
		next = out[len(out)-1].TaskID
	}
	return out, next, true, f.applied
}

// claimedTask is the answer to a claim of a task with dependencies: the
// task and its dependencies' outputs (up to MaxClaimDeps and about
// maxClaimDepBytes of results; DependenciesTruncated says more exist).
type claimedTask struct {
	*Task
	deps      []DepOutput
	truncated bool
	wp        *waitpointOutput // the waitpoint it was parked on (waitpoints.go)
}

func (c *claimedTask) MarshalJSON() ([]byte, error) {
	b, err := c.Task.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var extra []byte
	if c.deps != nil {
		extra, err = json.Marshal(struct {
			Deps      []DepOutput      `json:"dependencies"`
			Truncated bool             `json:"dependencies_truncated"`
			WP        *waitpointOutput `json:"waitpoint,omitempty"`
		}{c.deps, c.truncated, c.wp})
	} else {
		extra, err = json.Marshal(struct {
			WP *waitpointOutput `json:"waitpoint"`
		}{c.wp})
	}
	if err != nil {
		return nil, err
	}
	// {task...} + {"dependencies":...} → {task..., "dependencies":...}
	return append(append(b[:len(b)-1], ','), extra[1:]...), nil
}

// claimAnswer is the value a claim of t answers.
func claimAnswer(st *Store, t *Task) any {
	if t.Deps == nil && t.Waitpoint == "" {
		return t
	}
	c := &claimedTask{Task: t, wp: waitpointOf(st, t)}
	if t.Deps != nil {
		c.deps, c.truncated = depOutputs(st, t, "", MaxClaimDeps, maxClaimDepBytes)
	}
	return c
}

// depsRefusal refuses a claim by id of a task that waits on dependencies.
func depsRefusal(t *Task) *Result {
	if t.Parked {
		return fail(CodeVersionMismatch, fmt.Sprintf("task %q is parked on waitpoint %q", t.ID, t.Waitpoint),
			map[string]any{"current_status": t.Status, "waitpoint_id": t.Waitpoint})
	}
	if t.Deps == nil || t.Deps.Left == 0 {
		return nil
	}
	return fail(CodeVersionMismatch, fmt.Sprintf("task %q waits on %d of its %d dependencies", t.ID, t.Deps.Left, t.Deps.Total),
		map[string]any{"current_status": t.Status, "dependencies_left": t.Deps.Left})
}

func (a *TaskCreateArgs) depsVersion() byte {
	if len(a.DependsOn) != 0 || a.DepPolicy != "" {
		return EntryVersion6
	}
	return 0
}
