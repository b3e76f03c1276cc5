package client

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/baton-dev/baton/fsm/wire"
)

// The request structs carry durations as time.Duration, times as
// time.Time and expectations as plain fields; the API carries integer
// milliseconds in *_ms fields, RFC 3339 strings and pointers for what may
// be absent. Each struct is sent as its wire form, a type of package wire
// that the server decodes: the same fields in the same order, with the
// milliseconds in place of the duration (truncated to whole
// milliseconds). A new field of a request struct needs its twin in the
// wire type; TestWireFormsHaveEveryField fails until it has one.
//
// The Txn* constructors embed the wire forms rather than the request
// structs, whose MarshalJSON would otherwise be promoted and hide the
// op's own fields.

// rfc3339 is t as the API writes a time: what time.Time's MarshalJSON
// writes between its quotes, and the same error for a year it cannot
// write. Nil is "" (left out).
func rfc3339(t *time.Time) (string, error) {
	if t == nil {
		return "", nil
	}
	b, err := t.MarshalText()
	return string(b), err
}

// availability is the wire form of an AvailableAt and a Delay.
func availability(at *time.Time, delay time.Duration) (wire.Availability, error) {
	s, err := rfc3339(at)
	if err != nil {
		return wire.Availability{}, fmt.Errorf("available_at: %w", err)
	}
	return wire.Availability{AvailableAt: s, DelayMs: delay.Milliseconds()}, nil
}

func (r ClaimRequest) wire() wire.TaskClaim {
	return wire.TaskClaim{Owner: r.Owner, LeaseMs: r.Lease.Milliseconds(), ExpectStatus: r.ExpectStatus,
		ExpectVersion: r.ExpectVersion, SetStatus: r.SetStatus}
}

// MarshalJSON encodes the request as the API's body, Lease as lease_ms.
func (r ClaimRequest) MarshalJSON() ([]byte, error) { return json.Marshal(r.wire()) }

// MarshalJSON encodes the request as the API's body, Lease as lease_ms and
// Wait as wait_ms (left out when 0).
func (r QueueClaimRequest) MarshalJSON() ([]byte, error) {
	return json.Marshal(wire.QueueClaim{Owner: r.Owner, LeaseMs: r.Lease.Milliseconds(), Statuses: r.Statuses,
		SetStatus: r.SetStatus, WaitMs: r.Wait.Milliseconds()})
}

// MarshalJSON encodes the request as the API's body, Lease as lease_ms.
func (r RenewRequest) MarshalJSON() ([]byte, error) {
	return json.Marshal(wire.TaskRenew{FencingToken: &r.FencingToken, LeaseMs: r.Lease.Milliseconds()})
}

func (r FailTaskRequest) wire() wire.TaskFail {
	return wire.TaskFail{FencingToken: &r.FencingToken, Error: r.Error, NonRetryable: r.NonRetryable, Status: r.Status}
}

func (r PutKVRequest) wire() wire.KVPut {
	return wire.KVPut{Value: r.Value, ExpectVersion: r.ExpectVersion, TTLMs: r.TTL.Milliseconds(), Fence: r.Fence}
}

// MarshalJSON encodes the request as the API's body, TTL as ttl_ms (left
// out when 0: no expiry).
func (r PutKVRequest) MarshalJSON() ([]byte, error) { return json.Marshal(r.wire()) }

func (r CreateTaskRequest) wire() (wire.TaskCreate, error) {
	av, err := availability(r.AvailableAt, r.Delay)
	return wire.TaskCreate{TaskID: r.TaskID, Queue: r.Queue, Status: r.Status, Priority: r.Priority, Payload: r.Payload,
		MaxAttempts: r.MaxAttempts, BackoffInitialMs: r.BackoffInitial.Milliseconds(), BackoffMaxMs: r.BackoffMax.Milliseconds(),
		Availability: av, RetentionMs: r.Retention.Milliseconds(), DependsOn: r.DependsOn, DependencyPolicy: r.DependencyPolicy,
		ConcurrencyKey: r.ConcurrencyKey}, err
}

// MarshalJSON encodes the request as the API's body, the backoff, the
// delay and the retention as *_ms (left out when 0).
func (r CreateTaskRequest) MarshalJSON() ([]byte, error) { return marshalWire(r.wire()) }

func (r UpdateTaskRequest) wire() (wire.TaskUpdate, error) {
	av, err := availability(r.AvailableAt, r.Delay)
	return wire.TaskUpdate{FencingToken: r.FencingToken, ExpectVersion: r.ExpectVersion, ExpectStatus: r.ExpectStatus,
		Status: r.Status, ArtifactID: r.ArtifactID, Result: r.Result, Payload: r.Payload, Release: r.Release,
		Unstarted: r.Unstarted, Availability: av}, err
}

// MarshalJSON encodes the request as the API's body, Delay as delay_ms
// (left out when 0).
func (r UpdateTaskRequest) MarshalJSON() ([]byte, error) { return marshalWire(r.wire()) }

// MarshalJSON encodes the request as the API's body, Delay as delay_ms
// (left out when 0).
func (r RetryTaskRequest) MarshalJSON() ([]byte, error) {
	av, err := availability(r.AvailableAt, r.Delay)
	return marshalWire(wire.TaskRetry{ExpectVersion: r.ExpectVersion, Status: r.Status, Availability: av}, err)
}

// marshalWire encodes a wire form, or returns the error of its making.
func marshalWire[W any](w W, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	return json.Marshal(w)
}

func (p QueuePolicy) wire() wire.QueuePolicy {
	return wire.QueuePolicy{MaxAttempts: p.MaxAttempts, BackoffInitialMs: p.BackoffInitial.Milliseconds(),
		BackoffMaxMs: p.BackoffMax.Milliseconds(), RetentionMs: p.Retention.Milliseconds(),
		MaxLeased: p.MaxLeased, ClaimsPerSecond: p.ClaimsPerSecond, ClaimBurst: p.ClaimBurst, ConcurrencyKeyLimit: p.ConcurrencyKeyLimit}
}

// MarshalJSON encodes the policy as the API's body, the backoff and the
// retention as *_ms.
func (p QueuePolicy) MarshalJSON() ([]byte, error) { return json.Marshal(p.wire()) }

// UnmarshalJSON reads the API's form of a policy.
func (p *QueuePolicy) UnmarshalJSON(b []byte) error {
	var w wire.QueuePolicy
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*p = QueuePolicy{w.MaxAttempts, time.Duration(w.BackoffInitialMs) * time.Millisecond, time.Duration(w.BackoffMaxMs) * time.Millisecond,
		time.Duration(w.RetentionMs) * time.Millisecond, w.MaxLeased, w.ClaimsPerSecond, w.ClaimBurst, w.ConcurrencyKeyLimit}
	return nil
}

func (r PublishRequest) wire() wire.ArtifactPublish {
	return wire.ArtifactPublish{Chunks: r.Chunks, Digest: r.Digest, Size: &r.Size, MediaType: r.MediaType,
		Sources: r.Sources, Metadata: r.Metadata, TaskID: r.TaskID, Fence: r.Fence}
}

func (p ArtifactPolicy) wire() wire.ArtifactPolicy {
	return wire.ArtifactPolicy{Prefix: &p.Prefix, KeepLast: &p.KeepLast}
}

func (r PutCheckpointRequest) wire() wire.CheckpointPut {
	w := wire.CheckpointPut{Data: r.Data, Metadata: r.Metadata, Fork: r.Fork, Fence: r.Fence, DataChunks: r.DataChunks,
		BlobVersions: r.BlobVersions}
	for _, b := range r.Blobs {
		w.Blobs = append(w.Blobs, wire.CheckpointBlob{Channel: b.Channel, Version: b.Version, Type: b.Type, Data: b.Data})
	}
	if r.ParentID != "" {
		w.ParentID = &r.ParentID
	}
	return w
}

func (r PutWritesRequest) wire() wire.CheckpointWrites {
	w := wire.CheckpointWrites{Writes: make([]wire.CheckpointWrite, len(r.Writes)), TaskPath: r.TaskPath, Fence: r.Fence}
	for i, x := range r.Writes {
		w.Writes[i] = wire.CheckpointWrite{Idx: x.Idx, Channel: x.Channel, Value: x.Value}
		if x.Type != "" {
			w.Writes[i].Value, w.Writes[i].Type, w.Writes[i].Data = nil, x.Type, x.Data
		}
	}
	return w
}

// Task responses are records the state machine renders (fsm.Task), read
// here in their own wire form.

type taskWire struct {
	TenantID              string            `json:"tenant_id"`
	TaskID                string            `json:"task_id"`
	Queue                 string            `json:"queue"`
	Status                string            `json:"status"`
	Owner                 string            `json:"owner"`
	LeaseUntil            *time.Time        `json:"lease_until"`
	FencingToken          uint64            `json:"fencing_token"`
	Version               uint64            `json:"version"`
	Attempt               uint64            `json:"attempt"`
	Priority              int64             `json:"priority"`
	ArtifactID            string            `json:"artifact_id"`
	Payload               json.RawMessage   `json:"payload"`
	Result                json.RawMessage   `json:"result"`
	CreatedAt             time.Time         `json:"created_at"`
	UpdatedAt             time.Time         `json:"updated_at"`
	MaxAttempts           uint64            `json:"max_attempts"`
	BackoffInitialMs      int64             `json:"backoff_initial_ms"`
	BackoffMaxMs          int64             `json:"backoff_max_ms"`
	AvailableAt           *time.Time        `json:"available_at"`
	LastError             string            `json:"last_error"`
	FailedAt              *time.Time        `json:"failed_at"`
	RetentionMs           int64             `json:"retention_ms,omitempty"`
	ExpiresAt             *time.Time        `json:"expires_at,omitempty"`
	CancelRequested       bool              `json:"cancel_requested,omitempty"`
	DependsOnCount        uint64            `json:"depends_on_count,omitempty"`
	DependenciesLeft      *uint64           `json:"dependencies_left,omitempty"`
	DependencyPolicy      string            `json:"dependency_policy,omitempty"`
	Dependencies          []Dependency      `json:"dependencies,omitempty"`
	DependenciesTruncated bool              `json:"dependencies_truncated,omitempty"`
	WaitpointID           string            `json:"waitpoint_id,omitempty"`
	Parked                bool              `json:"parked,omitempty"`
	Waitpoint             *WaitpointOutcome `json:"waitpoint,omitempty"`
	ConcurrencyKey        string            `json:"concurrency_key,omitempty"`
}

// MarshalJSON encodes the task as the API does, the backoff and the
// retention as *_ms.
func (t Task) MarshalJSON() ([]byte, error) {
	return json.Marshal(taskWire{t.TenantID, t.TaskID, t.Queue, t.Status, t.Owner, t.LeaseUntil, t.FencingToken,
		t.Version, t.Attempt, t.Priority, t.ArtifactID, t.Payload, t.Result, t.CreatedAt, t.UpdatedAt, t.MaxAttempts,
		t.BackoffInitial.Milliseconds(), t.BackoffMax.Milliseconds(), t.AvailableAt, t.LastError, t.FailedAt,
		t.Retention.Milliseconds(), t.ExpiresAt, t.CancelRequested, t.DependsOnCount, t.DependenciesLeft,
		t.DependencyPolicy, t.Dependencies, t.DependenciesTruncated, t.WaitpointID, t.Parked, t.Waitpoint, t.ConcurrencyKey})
}

// UnmarshalJSON reads the API's form of a task.
func (t *Task) UnmarshalJSON(b []byte) error {
	var w taskWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*t = Task{w.TenantID, w.TaskID, w.Queue, w.Status, w.Owner, w.LeaseUntil, w.FencingToken, w.Version, w.Attempt,
		w.Priority, w.ArtifactID, w.Payload, w.Result, w.CreatedAt, w.UpdatedAt, w.MaxAttempts,
		time.Duration(w.BackoffInitialMs) * time.Millisecond, time.Duration(w.BackoffMaxMs) * time.Millisecond,
		w.AvailableAt, w.LastError, w.FailedAt, time.Duration(w.RetentionMs) * time.Millisecond, w.ExpiresAt,
		w.CancelRequested, w.DependsOnCount, w.DependenciesLeft, w.DependencyPolicy, w.Dependencies, w.DependenciesTruncated,
		w.WaitpointID, w.Parked, w.Waitpoint, w.ConcurrencyKey}
	return nil
}
