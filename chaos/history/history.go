// Package history records what the chaos workload did: every operation with
// the time it was invoked and the time it returned, read on one monotonic
// clock, and its outcome. A history is what the checkers judge, and what a
// failing run saves (history.json) so it can be inspected and re-checked.
//
// # Contracts
//
//   - Times are nanoseconds since the Recorder was made, taken from Go's
//     monotonic clock (time.Since), so they never go backwards and are
//     comparable across agents of one process.
//   - An operation's Outcome is OK (the server acknowledged it), Fail (the
//     server answered with a definitive error: nothing was applied) or
//     Unknown (no definitive answer: a timeout, a connection error, a 503;
//     it may or may not have been applied).
//   - Inputs and outputs are plain data (JSON round-trips exactly), so a
//     saved history can be loaded and checked again.
package history

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Outcome of an operation.
type Outcome string

// The three outcomes.
const (
	OK      Outcome = "ok"
	Fail    Outcome = "fail"
	Unknown Outcome = "unknown"
)

// Kind names what an operation did.
type Kind string

// Operation kinds. Txn ops carry their sub-operations in Sub.
const (
	KVGet           Kind = "kv.get"
	KVPut           Kind = "kv.put"
	KVDelete        Kind = "kv.delete"
	KVList          Kind = "kv.list"
	TaskCreate      Kind = "task.create"
	TaskGet         Kind = "task.get"
	TaskClaim       Kind = "task.claim"
	TaskQueueClaim  Kind = "task.queue_claim"
	TaskRenew       Kind = "task.renew"
	TaskUpdate      Kind = "task.update"
	TaskFail        Kind = "task.fail"
	TaskRetry       Kind = "task.retry"
	ChunkPut        Kind = "chunk.put"
	ArtifactPublish Kind = "artifact.publish"
	ArtifactGet     Kind = "artifact.get"
	RefSet          Kind = "ref.set"
	RefGet          Kind = "ref.get"
	CheckpointPut   Kind = "checkpoint.put"
	CheckpointHead  Kind = "checkpoint.latest"
	CheckpointList  Kind = "checkpoint.list"
	Txn             Kind = "txn"
	FinalWrite      Kind = "final.write"
	// Coordination primitives (docs/api.md "Dependencies", "Cancellation",
	// "Flow control", "Schedules"), recorded by the coordination agents.
	TaskCancel     Kind = "task.cancel"
	TaskList       Kind = "task.list" // the read-back of a queue: Out.Listed
	QueuePolicySet Kind = "queue.policy"
	ScheduleCreate Kind = "schedule.create"
	ScheduleGet    Kind = "schedule.get"
	SchedulePause  Kind = "schedule.pause"
	ScheduleResume Kind = "schedule.resume"
	QueueStats     Kind = "queue.stats" // Out.Running, Out.LeaseExpired
	// Waitpoints: Key is the waitpoint id (a task's for TaskPark, which
	// names the waitpoint in In.Waitpoint); Value a completion's payload.
	WaitpointCreate   Kind = "waitpoint.create"
	WaitpointGet      Kind = "waitpoint.get"
	WaitpointComplete Kind = "waitpoint.complete"
	TaskPark          Kind = "task.park"
)

// Input is what an operation asked for. Fields not used by a kind are empty.
type Input struct {
	// Object names: Key is "namespace/key" for kv, the task id for tasks,
	// the artifact name, the ref, or the thread.
	Key   string `json:"key,omitempty"`
	Queue string `json:"queue,omitempty"`
	// Value written: a kv value, a task result, a checkpoint id, the
	// artifact id a ref is set to. Values are unique per write.
	Value string `json:"value,omitempty"`
	// Conditions.
	ExpectVersion *uint64 `json:"expect_version,omitempty"` // kv; a task update (cancel)
	Expect        *string `json:"expect,omitempty"`         // ref: expect_artifact_id; checkpoint: parent_id
	// Task fields.
	Owner   string  `json:"owner,omitempty"`
	LeaseMS int64   `json:"lease_ms,omitempty"`
	Token   *uint64 `json:"token,omitempty"` // renew/update/fail fencing_token
	Release bool    `json:"release,omitempty"`
	// Task lifecycle: a fail's non_retryable; a create's max_attempts; the
	// delay_ms or available_at (Unix ms, on the client's clock) a create or
	// retry asked for.
	NonRetryable  bool   `json:"non_retryable,omitempty"`
	MaxAttempts   uint64 `json:"max_attempts,omitempty"`
	DelayMS       int64  `json:"delay_ms,omitempty"`
	AvailableAtMS int64  `json:"available_at_ms,omitempty"`
	// Retention: the retention_ms a create asked for; the status an update
	// set ("" leaves it: done, cancelled).
	RetentionMS int64  `json:"retention_ms,omitempty"`
	Status      string `json:"status,omitempty"`
	// Fence of a guarded write on another resource.
	FenceTask  string `json:"fence_task,omitempty"`
	FenceToken uint64 `json:"fence_token,omitempty"`
	// Artifact publish: the content digest, and the logical publish this
	// attempt belongs to (retries share it).
	Digest string `json:"digest,omitempty"`
	Group  string `json:"group,omitempty"`
	// Coord marks the operations of the coordination agents, which the
	// linearizability checker's task model leaves to their own checkers.
	Coord bool `json:"coord,omitempty"`
	// Dependencies of a task create, and its dependency_policy ("": fail).
	DependsOn []string `json:"depends_on,omitempty"`
	DepPolicy string   `json:"dependency_policy,omitempty"`
	// A task create's concurrency_key.
	ConcurrencyKey string `json:"concurrency_key,omitempty"`
	// A queue policy's flow limits (0: none).
	MaxLeased       int64 `json:"max_leased,omitempty"`
	KeyLimit        int64 `json:"concurrency_key_limit,omitempty"`
	ClaimsPerSecond int64 `json:"claims_per_second,omitempty"`
	ClaimBurst      int64 `json:"claim_burst,omitempty"`
	// The waitpoint a task is parked on; a waitpoint create's timeout_ms.
	Waitpoint string `json:"waitpoint,omitempty"`
	TimeoutMS int64  `json:"timeout_ms,omitempty"`
	// A schedule create: its interval or cron expression, its catch-up.
	IntervalMS int64  `json:"interval_ms,omitempty"`
	Cron       string `json:"cron,omitempty"`
	CatchUp    string `json:"catch_up,omitempty"`
}

// Dep is one dependency as a claim's answer showed it.
type Dep struct {
	TaskID   string `json:"task_id"`
	Resolved bool   `json:"resolved"`
	Status   string `json:"status,omitempty"`
}

// Listed is one task of a queue's read-back.
type Listed struct {
	TaskID      string `json:"task_id"`
	Status      string `json:"status,omitempty"`
	CreatedAtMS int64  `json:"created_at_ms"`
}

// Output is what an operation returned. For a Fail outcome only Code and
// the error details are set.
type Output struct {
	Exists     bool   `json:"exists,omitempty"`
	Value      string `json:"value,omitempty"`
	Version    uint64 `json:"version,omitempty"` // kv version, artifact version, task version
	Token      uint64 `json:"token,omitempty"`   // a task's fencing token
	Owner      string `json:"owner,omitempty"`
	LeaseUntil int64  `json:"lease_until_ms,omitempty"` // unix ms, as stamped by the leader
	TaskID     string `json:"task_id,omitempty"`        // the task a queue claim took
	// A task's lifecycle as answered: its status, attempt and max_attempts,
	// and two leader-stamped times (Unix ms): available_at (0: none) and
	// updated_at, the time of the command that made this version (for a
	// claim, the time the state machine judged available_at by).
	Status        string `json:"status,omitempty"`
	Attempt       uint64 `json:"attempt,omitempty"`
	MaxAttempts   uint64 `json:"max_attempts,omitempty"`
	AvailableAtMS int64  `json:"available_at_ms,omitempty"`
	UpdatedAtMS   int64  `json:"updated_at_ms,omitempty"`
	// Retention as answered: the task's own retention_ms (0: none) and its
	// leader-stamped expires_at (Unix ms; 0: none, not terminal or no
	// period), when the purge may delete it.
	RetentionMS int64  `json:"retention_ms,omitempty"`
	ExpiresAtMS int64  `json:"expires_at_ms,omitempty"`
	ArtifactID  string `json:"artifact_id,omitempty"`
	// Values of a listing (set keys, checkpoint ids, "version=artifact_id").
	Values []string `json:"values,omitempty"`
	// Error details.
	CurrentToken   *uint64 `json:"current_token,omitempty"`   // fenced
	CurrentVersion *uint64 `json:"current_version,omitempty"` // kv version_mismatch
	Current        *string `json:"current,omitempty"`         // ref/checkpoint version_mismatch
	LeaseOwner     string  `json:"lease_owner,omitempty"`     // lease_held
	OpIndex        *int    `json:"op_index,omitempty"`        // failed txn op
	// Coordination: a task's cancel_requested, dependencies_left (nil:
	// none), the dependencies a claim's answer carried, its
	// concurrency_key and created_at (Unix ms).
	CancelRequested bool    `json:"cancel_requested,omitempty"`
	DepsLeft        *uint64 `json:"dependencies_left,omitempty"`
	Deps            []Dep   `json:"dependencies,omitempty"`
	ConcurrencyKey  string  `json:"concurrency_key,omitempty"`
	CreatedAtMS     int64   `json:"created_at_ms,omitempty"`
	// A schedule as answered (times Unix ms, leader-stamped): next_at,
	// last_tick_at (0: none), ticks and paused; UpdatedAtMS and Version
	// above are the schedule's.
	NextAtMS   int64  `json:"next_at_ms,omitempty"`
	LastTickMS int64  `json:"last_tick_ms,omitempty"`
	Ticks      uint64 `json:"ticks,omitempty"`
	Paused     bool   `json:"paused,omitempty"`
	// The tasks of a queue's read-back (TaskList).
	Listed []Listed `json:"listed,omitempty"`
	// A waitpoint as answered (Status its state, Value its payload,
	// TimeoutAtMS when it times out by the leader's clock), or, in a
	// claim's answer, the outcome of the waitpoint the task was parked on
	// (Waitpoint its id, Status and Value).
	Waitpoint   string `json:"waitpoint,omitempty"`
	WaitState   string `json:"wait_state,omitempty"`
	WaitPayload string `json:"wait_payload,omitempty"`
	TimeoutAtMS int64  `json:"timeout_at_ms,omitempty"`
	Parked      bool   `json:"parked,omitempty"`
	// A queue's statistics: tasks under a live lease, and with an owner
	// whose lease ran out.
	Running      int64 `json:"running,omitempty"`
	LeaseExpired int64 `json:"lease_expired,omitempty"`
}

// Op is one recorded operation.
type Op struct {
	ID      int     `json:"id"`
	Client  int     `json:"client"` // the agent
	Kind    Kind    `json:"kind"`
	Invoke  int64   `json:"invoke"` // ns since the recorder's start
	Return  int64   `json:"return"` // ns since the recorder's start
	Outcome Outcome `json:"outcome"`
	// Code is the error code of a Fail ("fenced", ...) or the class of an
	// Unknown ("timeout", "unavailable", "transport").
	Code    string `json:"code,omitempty"`
	Err     string `json:"err,omitempty"`
	IdemKey string `json:"idem_key,omitempty"`
	Index   uint64 `json:"index,omitempty"`  // X-Baton-Index of the answer
	Replay  bool   `json:"replay,omitempty"` // Idempotent-Replay: true
	// LostAnswer is the first successful answer (status and body, hashed)
	// that the lossy transport threw away before the client saw it, and
	// Answer the last answer the client was given; both only when an
	// answer was lost. A retry must be given the first answer again.
	LostAnswer string `json:"lost_answer,omitempty"`
	Answer     string `json:"answer,omitempty"`
	// WallMS is the client's wall clock (Unix ms) when the op returned, to
	// compare with the times the leader stamps into answers.
	WallMS int64  `json:"wall_ms,omitempty"`
	In     Input  `json:"in"`
	Out    Output `json:"out"`
	// Final marks the read-back made after healing, which the lost-write
	// checker compares with what was acknowledged.
	Final bool `json:"final,omitempty"`
	// Sub are the ops of a transaction, in order; each carries the
	// transaction's times and index. When the transaction failed, the op
	// that failed has its error and the others have Code Aborted.
	Sub []Op `json:"sub,omitempty"`
}

// Aborted is the Code of a transaction's sub-op that was not applied
// because another op of the same transaction failed.
const Aborted = "aborted"

// Definite reports whether the outcome is known.
func (o *Op) Definite() bool { return o.Outcome != Unknown }

// String is a one-line description for reports.
func (o *Op) String() string {
	s := fmt.Sprintf("#%d c%d %s %s", o.ID, o.Client, o.Kind, o.In.Key)
	if o.In.Token != nil {
		s += fmt.Sprintf(" token=%d", *o.In.Token)
	}
	if o.In.Release {
		s += " release"
	}
	if o.In.Status != "" {
		s += " status=" + o.In.Status
	}
	if o.In.NonRetryable {
		s += " non-retryable"
	}
	if o.In.FenceTask != "" {
		s += fmt.Sprintf(" fence=%s/%d", o.In.FenceTask, o.In.FenceToken)
	}
	s += fmt.Sprintf(" [%s..%s] %s", fmtNS(o.Invoke), fmtNS(o.Return), o.Outcome)
	if o.Code != "" {
		s += " " + o.Code
	}
	if o.Index != 0 {
		s += fmt.Sprintf(" @%d", o.Index)
	}
	if o.Kind == TaskQueueClaim && o.Outcome == OK {
		if o.Out.TaskID == "" {
			s += " (nothing claimable)"
		} else {
			s += fmt.Sprintf(" (took %s, token %d)", o.Out.TaskID, o.Out.Token)
		}
	}
	if o.Outcome == OK && o.Out.Version != 0 && o.Out.Status != "" { // a task answer
		s += fmt.Sprintf(" {v%d %s attempt %d/%d", o.Out.Version, o.Out.Status, o.Out.Attempt, o.Out.MaxAttempts)
		if o.Out.AvailableAtMS != 0 {
			s += fmt.Sprintf(" available_at %d", o.Out.AvailableAtMS)
		}
		if o.Out.ExpiresAtMS != 0 {
			s += fmt.Sprintf(" expires_at %d", o.Out.ExpiresAtMS)
		}
		s += fmt.Sprintf(" updated_at %d}", o.Out.UpdatedAtMS)
	}
	return s
}

func fmtNS(ns int64) string { return time.Duration(ns).Round(time.Microsecond).String() }

// Fault is a nemesis event: a fault from Start to End (ns since the start).
type Fault struct {
	Kind        string `json:"kind"`
	Description string `json:"description"`
	Start       int64  `json:"start"`
	End         int64  `json:"end"`
	Err         string `json:"err,omitempty"`
	// ClockSkewMS is how far a clock-skew fault set a node's clock off
	// (one node ahead by it, another behind), in ms; 0 for other kinds.
	ClockSkewMS int64 `json:"clock_skew_ms,omitempty"`
}

// NodeState is one node's own view at the end of a run, for the
// convergence check.
type NodeState struct {
	ID           string `json:"id"`
	AppliedIndex uint64 `json:"applied_index"`
	StateDigest  string `json:"state_digest"`
	Err          string `json:"err,omitempty"`
}

// History is the record of one run.
type History struct {
	Seed   int64       `json:"seed"`
	Ops    []Op        `json:"ops"`
	Faults []Fault     `json:"faults"`
	Nodes  []NodeState `json:"nodes,omitempty"`
}

// Sorted returns the ops ordered by invocation time.
func (h *History) Sorted() []Op {
	ops := append([]Op(nil), h.Ops...)
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Invoke < ops[j].Invoke })
	return ops
}

// Flat returns every op with transactions replaced by their sub-ops.
func (h *History) Flat() []Op { return Flatten(h.Ops) }

// Flatten replaces each transaction of ops by its sub-ops.
func Flatten(ops []Op) []Op {
	var out []Op
	for _, op := range ops {
		if op.Kind == Txn {
			out = append(out, op.Sub...)
			continue
		}
		out = append(out, op)
	}
	return out
}

// Save writes h as indented JSON.
func (h *History) Save(path string) error {
	b, err := json.MarshalIndent(h, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Load reads a history saved by Save.
func Load(path string) (*History, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var h History
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("history: %s: %w", path, err)
	}
	return &h, nil
}

// Recorder collects the operations of concurrent agents. It is safe for
// concurrent use.
type Recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []Op
	flt   []Fault
	next  int
}

// NewRecorder starts the clock.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Now is the time since the start, in ns, on the monotonic clock.
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// Pending is an operation that was invoked and has not returned.
type Pending struct {
	r  *Recorder
	op Op
}

// Invoke records the invocation of an operation now.
func (r *Recorder) Invoke(client int, kind Kind, in Input) *Pending {
	r.mu.Lock()
	id := r.next
	r.next++
	r.mu.Unlock()
	return &Pending{r: r, op: Op{ID: id, Client: client, Kind: kind, In: in, Invoke: r.Now()}}
}

// Op gives access to the pending op, to set fields before End.
func (p *Pending) Op() *Op { return &p.op }

// End records the return now with the given outcome and output.
func (p *Pending) End(outcome Outcome, out Output) Op {
	p.op.Return = p.r.Now()
	p.op.WallMS = time.Now().UnixMilli()
	p.op.Outcome = outcome
	p.op.Out = out
	for i := range p.op.Sub {
		s := &p.op.Sub[i]
		s.ID, s.Client, s.Invoke, s.Return, s.WallMS = p.op.ID, p.op.Client, p.op.Invoke, p.op.Return, p.op.WallMS
		s.Index, s.Replay = p.op.Index, p.op.Replay
		if p.op.IdemKey != "" { // retries of one txn merge op by op
			s.IdemKey = p.op.IdemKey + "#" + strconv.Itoa(i)
		}
	}
	p.r.mu.Lock()
	p.r.ops = append(p.r.ops, p.op)
	p.r.mu.Unlock()
	return p.op
}

// Fault records a nemesis event.
func (r *Recorder) Fault(f Fault) {
	r.mu.Lock()
	r.flt = append(r.flt, f)
	r.mu.Unlock()
}

// History returns a copy of everything recorded so far, ops in invocation
// order.
func (r *Recorder) History(seed int64) *History {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := &History{Seed: seed, Ops: append([]Op(nil), r.ops...), Faults: append([]Fault(nil), r.flt...)}
	h.Ops = h.Sorted()
	return h
}
