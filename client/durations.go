package client

import (
	"encoding/json"
	"time"

	"github.com/baton-dev/baton/client/wire"
)

// The request structs carry durations as time.Duration and expectations
// as plain fields; the API carries integer milliseconds in *_ms fields and
// an optional expect_artifact_id. Each struct below is sent as its wire
// form: the same fields in the same order, with the milliseconds in place
// of the duration (truncated to whole milliseconds). A new field of a
// request struct needs its twin here; TestWireFormsHaveEveryField fails
// until it has one.
//
// The Txn* constructors embed the wire forms rather than the request
// structs, whose MarshalJSON would otherwise be promoted and hide the
// op's own fields.

type claimWire struct {
	Owner         string  `json:"owner"`
	LeaseMS       int64   `json:"lease_ms"`
	ExpectStatus  *string `json:"expect_status,omitempty"`
	ExpectVersion *uint64 `json:"expect_version,omitempty"`
	SetStatus     *string `json:"set_status,omitempty"`
}

func (r ClaimRequest) wire() claimWire {
	return claimWire{r.Owner, r.Lease.Milliseconds(), r.ExpectStatus, r.ExpectVersion, r.SetStatus}
}

// MarshalJSON encodes the request as the API's body, Lease as lease_ms.
func (r ClaimRequest) MarshalJSON() ([]byte, error) { return json.Marshal(r.wire()) }

type queueClaimWire struct {
	Owner     string   `json:"owner"`
	LeaseMS   int64    `json:"lease_ms"`
	Statuses  []string `json:"statuses,omitempty"`
	SetStatus *string  `json:"set_status,omitempty"`
	WaitMS    int64    `json:"wait_ms,omitempty"`
}

// MarshalJSON encodes the request as the API's body, Lease as lease_ms and
// Wait as wait_ms (left out when 0).
func (r QueueClaimRequest) MarshalJSON() ([]byte, error) {
	return json.Marshal(queueClaimWire{r.Owner, r.Lease.Milliseconds(), r.Statuses, r.SetStatus, r.Wait.Milliseconds()})
}

type renewWire struct {
	FencingToken uint64 `json:"fencing_token"`
	LeaseMS      int64  `json:"lease_ms"`
}

// MarshalJSON encodes the request as the API's body, Lease as lease_ms.
func (r RenewRequest) MarshalJSON() ([]byte, error) {
	return json.Marshal(renewWire{r.FencingToken, r.Lease.Milliseconds()})
}

func (r PutKVRequest) wire() wire.KVPut {
	return wire.KVPut{Value: r.Value, ExpectVersion: r.ExpectVersion, TTLMs: r.TTL.Milliseconds(), Fence: r.Fence}
}

// MarshalJSON encodes the request as the API's body, TTL as ttl_ms (left
// out when 0: no expiry).
func (r PutKVRequest) MarshalJSON() ([]byte, error) { return json.Marshal(r.wire()) }

type createTaskWire struct {
	TaskID           string          `json:"task_id,omitempty"`
	Queue            string          `json:"queue"`
	Status           string          `json:"status,omitempty"`
	Priority         *int64          `json:"priority,omitempty"`
	Payload          json.RawMessage `json:"payload,omitempty"`
	MaxAttempts      uint64          `json:"max_attempts,omitempty"`
	BackoffInitialMS int64           `json:"backoff_initial_ms,omitempty"`
	BackoffMaxMS     int64           `json:"backoff_max_ms,omitempty"`
	AvailableAt      *time.Time      `json:"available_at,omitempty"`
	DelayMS          int64           `json:"delay_ms,omitempty"`
	RetentionMS      int64           `json:"retention_ms,omitempty"`
}

// MarshalJSON encodes the request as the API's body, the backoff, the
// delay and the retention as *_ms (left out when 0).
func (r CreateTaskRequest) MarshalJSON() ([]byte, error) {
	return json.Marshal(createTaskWire{r.TaskID, r.Queue, r.Status, r.Priority, r.Payload, r.MaxAttempts,
		r.BackoffInitial.Milliseconds(), r.BackoffMax.Milliseconds(), r.AvailableAt, r.Delay.Milliseconds(),
		r.Retention.Milliseconds()})
}

type updateTaskWire struct {
	FencingToken  *uint64         `json:"fencing_token,omitempty"`
	ExpectVersion *uint64         `json:"expect_version,omitempty"`
	ExpectStatus  *string         `json:"expect_status,omitempty"`
	Status        *string         `json:"status,omitempty"`
	ArtifactID    *string         `json:"artifact_id,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	Release       *bool           `json:"release,omitempty"`
	AvailableAt   *time.Time      `json:"available_at,omitempty"`
	DelayMS       int64           `json:"delay_ms,omitempty"`
}

func (r UpdateTaskRequest) wire() updateTaskWire {
	return updateTaskWire{r.FencingToken, r.ExpectVersion, r.ExpectStatus, r.Status, r.ArtifactID,
		r.Result, r.Payload, r.Release, r.AvailableAt, r.Delay.Milliseconds()}
}

// MarshalJSON encodes the request as the API's body, Delay as delay_ms
// (left out when 0).
func (r UpdateTaskRequest) MarshalJSON() ([]byte, error) { return json.Marshal(r.wire()) }

type retryTaskWire struct {
	ExpectVersion *uint64    `json:"expect_version,omitempty"`
	Status        string     `json:"status,omitempty"`
	AvailableAt   *time.Time `json:"available_at,omitempty"`
	DelayMS       int64      `json:"delay_ms,omitempty"`
}

// MarshalJSON encodes the request as the API's body, Delay as delay_ms
// (left out when 0).
func (r RetryTaskRequest) MarshalJSON() ([]byte, error) {
	return json.Marshal(retryTaskWire{r.ExpectVersion, r.Status, r.AvailableAt, r.Delay.Milliseconds()})
}

type queuePolicyWire struct {
	MaxAttempts      uint64 `json:"max_attempts"`
	BackoffInitialMS int64  `json:"backoff_initial_ms"`
	BackoffMaxMS     int64  `json:"backoff_max_ms"`
	RetentionMS      int64  `json:"retention_ms,omitempty"`
}

// MarshalJSON encodes the policy as the API's body, the backoff and the
// retention as *_ms.
func (p QueuePolicy) MarshalJSON() ([]byte, error) {
	return json.Marshal(queuePolicyWire{p.MaxAttempts, p.BackoffInitial.Milliseconds(), p.BackoffMax.Milliseconds(),
		p.Retention.Milliseconds()})
}

// UnmarshalJSON reads the API's form of a policy.
func (p *QueuePolicy) UnmarshalJSON(b []byte) error {
	var w queuePolicyWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*p = QueuePolicy{w.MaxAttempts, time.Duration(w.BackoffInitialMS) * time.Millisecond, time.Duration(w.BackoffMaxMS) * time.Millisecond,
		time.Duration(w.RetentionMS) * time.Millisecond}
	return nil
}

type taskWire struct {
	TenantID         string          `json:"tenant_id"`
	TaskID           string          `json:"task_id"`
	Queue            string          `json:"queue"`
	Status           string          `json:"status"`
	Owner            string          `json:"owner"`
	LeaseUntil       *time.Time      `json:"lease_until"`
	FencingToken     uint64          `json:"fencing_token"`
	Version          uint64          `json:"version"`
	Attempt          uint64          `json:"attempt"`
	Priority         int64           `json:"priority"`
	ArtifactID       string          `json:"artifact_id"`
	Payload          json.RawMessage `json:"payload"`
	Result           json.RawMessage `json:"result"`
	CreatedAt        time.Time       `json:"created_at"`
	UpdatedAt        time.Time       `json:"updated_at"`
	MaxAttempts      uint64          `json:"max_attempts"`
	BackoffInitialMS int64           `json:"backoff_initial_ms"`
	BackoffMaxMS     int64           `json:"backoff_max_ms"`
	AvailableAt      *time.Time      `json:"available_at"`
	LastError        string          `json:"last_error"`
	FailedAt         *time.Time      `json:"failed_at"`
	RetentionMS      int64           `json:"retention_ms,omitempty"`
	ExpiresAt        *time.Time      `json:"expires_at,omitempty"`
}

// MarshalJSON encodes the task as the API does, the backoff and the
// retention as *_ms.
func (t Task) MarshalJSON() ([]byte, error) {
	return json.Marshal(taskWire{t.TenantID, t.TaskID, t.Queue, t.Status, t.Owner, t.LeaseUntil, t.FencingToken,
		t.Version, t.Attempt, t.Priority, t.ArtifactID, t.Payload, t.Result, t.CreatedAt, t.UpdatedAt, t.MaxAttempts,
		t.BackoffInitial.Milliseconds(), t.BackoffMax.Milliseconds(), t.AvailableAt, t.LastError, t.FailedAt,
		t.Retention.Milliseconds(), t.ExpiresAt})
}

// UnmarshalJSON reads the API's form of a task.
func (t *Task) UnmarshalJSON(b []byte) error {
	var w taskWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*t = Task{w.TenantID, w.TaskID, w.Queue, w.Status, w.Owner, w.LeaseUntil, w.FencingToken, w.Version, w.Attempt,
		w.Priority, w.ArtifactID, w.Payload, w.Result, w.CreatedAt, w.UpdatedAt, w.MaxAttempts,
		time.Duration(w.BackoffInitialMS) * time.Millisecond, time.Duration(w.BackoffMaxMS) * time.Millisecond,
		w.AvailableAt, w.LastError, w.FailedAt, time.Duration(w.RetentionMS) * time.Millisecond, w.ExpiresAt}
	return nil
}
