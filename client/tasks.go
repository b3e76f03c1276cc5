package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/baton-dev/baton/fsm/wire"
)

// Task is a unit of work in a queue, as stored by the cluster.
type Task struct {
	TenantID     string          `json:"tenant_id"`
	TaskID       string          `json:"task_id"`
	Queue        string          `json:"queue"`
	Status       string          `json:"status"`
	Owner        string          `json:"owner"`
	LeaseUntil   *time.Time      `json:"lease_until"` // nil when no lease
	FencingToken uint64          `json:"fencing_token"`
	Version      uint64          `json:"version"`
	Attempt      uint64          `json:"attempt"`
	Priority     int64           `json:"priority"`
	ArtifactID   string          `json:"artifact_id"`
	Payload      json.RawMessage `json:"payload"`
	Result       json.RawMessage `json:"result"`
	CreatedAt    time.Time       `json:"created_at"`
	UpdatedAt    time.Time       `json:"updated_at"`
	// Attempts, backoff and delays (docs/api.md). MaxAttempts 0 is
	// unlimited; zero backoff fields are the server's defaults.
	MaxAttempts    uint64        `json:"max_attempts"`
	BackoffInitial time.Duration `json:"-"`
	BackoffMax     time.Duration `json:"-"`
	AvailableAt    *time.Time    `json:"available_at"` // nil: claimable at any time
	LastError      string        `json:"last_error"`
	FailedAt       *time.Time    `json:"failed_at"` // nil: no failed attempt
	// Retention (docs/api.md "Retention"): the task's own period (0: its
	// queue's), and when it will be deleted (nil: never; set while its
	// status is done, dead or cancelled and a period applies).
	Retention time.Duration `json:"-"`
	ExpiresAt *time.Time    `json:"expires_at,omitempty"`
	// CancelRequested: someone cancelled the task while it was leased
	// (CancelTask); its holder should stop and acknowledge.
	CancelRequested bool `json:"cancel_requested,omitempty"`
	// Dependencies (CreateTaskRequest.DependsOn): how many the task was
	// created with, how many are not resolved yet (nil without any; no
	// claim takes the task while it is above 0), and the policy.
	DependsOnCount   uint64  `json:"depends_on_count,omitempty"`
	DependenciesLeft *uint64 `json:"dependencies_left,omitempty"`
	DependencyPolicy string  `json:"dependency_policy,omitempty"`
	// In a claim's answer only: the first dependencies (up to 100, in id
	// order) with their results and artifacts; DependenciesTruncated when
	// there are more (ListTaskDependencies lists them all).
	Dependencies          []Dependency `json:"dependencies,omitempty"`
	DependenciesTruncated bool         `json:"dependencies_truncated,omitempty"`
	// Waitpoints (ParkTask): the waitpoint the task was last parked on,
	// Parked while it waits there, and, in a claim's answer only, the
	// waitpoint's outcome.
	WaitpointID string            `json:"waitpoint_id,omitempty"`
	Parked      bool              `json:"parked,omitempty"`
	Waitpoint   *WaitpointOutcome `json:"waitpoint,omitempty"`
	// ConcurrencyKey as created (CreateTaskRequest).
	ConcurrencyKey string `json:"concurrency_key,omitempty"`
}

// Dependency is one dependency of a task: Resolved once it ended (Status
// is then the status it ended in, "deleted" for a deleted one), with its
// result and artifact.
type Dependency struct {
	TaskID     string          `json:"task_id"`
	Resolved   bool            `json:"resolved"`
	Status     string          `json:"status"`
	Result     json.RawMessage `json:"result"`
	ArtifactID string          `json:"artifact_id"`
}

// Dependency policies (CreateTaskRequest.DependencyPolicy): what a
// dependency that ends dead or cancelled, or is deleted, does to the
// dependent.
const (
	DependencyFail   = "fail"   // the dependent becomes dead (the default)
	DependencyCancel = "cancel" // the dependent becomes cancelled
	DependencyIgnore = "ignore" // counts as done
)

// DependencyList is one page of ListTaskDependencies; NextPageToken is
// empty on the last.
type DependencyList struct {
	Dependencies  []Dependency `json:"dependencies"`
	NextPageToken string       `json:"next_page_token"`
}

// Running reports whether the task is under a lease that is live by the
// local clock at now (the server decides by the leader's).
func (t *Task) Running(now time.Time) bool {
	return t.Owner != "" && t.LeaseUntil != nil && t.LeaseUntil.After(now)
}

// StatusCancelled is the status of a cancelled task (CancelTask).
const StatusCancelled = "cancelled"

// CancelTaskRequest is the body of CancelTask. With FencingToken, the
// lease's holder cancels at once (acknowledging a requested
// cancellation); Reason (at most 4,096 bytes) becomes last_error.
type CancelTaskRequest = wire.TaskCancel

// StatusDead is the status of a task that used its attempts or failed
// without retry (see FailTask, RetryTask).
const StatusDead = "dead"

// Fence guards a write: it applies only if Token is the current fencing
// token of task TaskID in the same tenant, else ErrFenced.
type Fence = wire.Fence

// CreateTaskRequest is the body of CreateTask. TaskID is generated when
// empty; Status defaults to "pending".
type CreateTaskRequest struct {
	TaskID   string          `json:"task_id,omitempty"`
	Queue    string          `json:"queue"`
	Status   string          `json:"status,omitempty"`
	Priority *int64          `json:"priority,omitempty"`
	Payload  json.RawMessage `json:"payload,omitempty"`
	// MaxAttempts caps the claims (0: unlimited); after the last failed
	// attempt the task is dead. Backoff after a failed attempt doubles
	// from BackoffInitial up to BackoffMax, with jitter (0: the server's
	// defaults).
	MaxAttempts    uint64        `json:"max_attempts,omitempty"`
	BackoffInitial time.Duration `json:"-"`
	BackoffMax     time.Duration `json:"-"`
	// A queue claim does not take the task before AvailableAt, or before
	// the server's time of the create plus Delay. Give one or neither.
	AvailableAt *time.Time    `json:"available_at,omitempty"`
	Delay       time.Duration `json:"-"`
	// Retention: the task is deleted this long after it enters done, dead
	// or cancelled (0: its queue's policy decides; by default, never).
	Retention time.Duration `json:"-"`
	// DependsOn: tasks of the tenant (at most 10,000) that must be done
	// before the task is claimable; a claim of it then carries their
	// results. DependencyPolicy (DependencyFail by default) is what one
	// that ends otherwise does to it.
	DependsOn        []string `json:"depends_on,omitempty"`
	DependencyPolicy string   `json:"dependency_policy,omitempty"`
	// ConcurrencyKey groups the task for its queue's ConcurrencyKeyLimit.
	ConcurrencyKey string `json:"concurrency_key,omitempty"`
}

// FailTaskRequest is the body of FailTask.
type FailTaskRequest struct {
	FencingToken uint64 `json:"fencing_token"`
	Error        string `json:"error,omitempty"`
	NonRetryable bool   `json:"non_retryable,omitempty"`
	// Status is the status to go back to when the task will be retried
	// (default "pending").
	Status string `json:"status,omitempty"`
}

// RetryTaskRequest is the body of RetryTask.
type RetryTaskRequest struct {
	ExpectVersion *uint64       `json:"expect_version,omitempty"`
	Status        string        `json:"status,omitempty"` // default "pending"
	AvailableAt   *time.Time    `json:"available_at,omitempty"`
	Delay         time.Duration `json:"-"`
}

// ListTasksOptions filters ListTasks; zero fields do not filter.
type ListTasksOptions struct {
	Queue     string
	Status    string
	Owner     string
	Limit     int
	PageToken string
}

// TaskList is one page of ListTasks. NextPageToken is empty on the last
// page; a page that is empty but has one ended at the server's walk bound
// (10,000 tasks examined, matching the filters and the caller's grants or
// not): keep going.
type TaskList struct {
	Tasks         []Task `json:"tasks"`
	NextPageToken string `json:"next_page_token"`
}

// ClaimRequest is the body of ClaimTask. Lease travels as whole
// milliseconds (lease_ms).
type ClaimRequest struct {
	Owner         string        `json:"owner"`
	Lease         time.Duration `json:"-"`
	ExpectStatus  *string       `json:"expect_status,omitempty"`
	ExpectVersion *uint64       `json:"expect_version,omitempty"`
	SetStatus     *string       `json:"set_status,omitempty"`
}

// QueueClaimRequest is the body of ClaimQueue. Statuses defaults to
// ["pending"] on the server; Wait is how long the server may wait for a
// claimable task before answering 204 (0: answer at once). Lease and Wait
// travel as whole milliseconds (lease_ms, wait_ms).
type QueueClaimRequest struct {
	Owner     string        `json:"owner"`
	Lease     time.Duration `json:"-"`
	Statuses  []string      `json:"statuses,omitempty"`
	SetStatus *string       `json:"set_status,omitempty"`
	Wait      time.Duration `json:"-"`
}

// RenewRequest is the body of RenewTask. Lease travels as whole
// milliseconds (lease_ms).
type RenewRequest struct {
	FencingToken uint64        `json:"fencing_token"`
	Lease        time.Duration `json:"-"`
}

// UpdateTaskRequest is the body of UpdateTask. Nil fields are left alone.
// With FencingToken the update applies only under that token (ErrFenced);
// without one, a task under someone's live lease refuses (ErrLeaseHeld).
// Release clears owner and lease_until in the same step.
type UpdateTaskRequest struct {
	FencingToken  *uint64         `json:"fencing_token,omitempty"`
	ExpectVersion *uint64         `json:"expect_version,omitempty"`
	ExpectStatus  *string         `json:"expect_status,omitempty"`
	Status        *string         `json:"status,omitempty"`
	ArtifactID    *string         `json:"artifact_id,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	Release       *bool           `json:"release,omitempty"`
	// With Release: a queue claim does not take the task before
	// AvailableAt, or the server's time of the update plus Delay.
	AvailableAt *time.Time    `json:"available_at,omitempty"`
	Delay       time.Duration `json:"-"`
	// Unstarted, with Release and the FencingToken of a live lease, says
	// the task was claimed and never started: the release gives back the
	// claim's attempt and the status its set_status replaced. No Status,
	// Result, Payload or ArtifactID with it. Needs a server of version 6.
	Unstarted bool `json:"unstarted,omitempty"`
}

// CreateTask creates a task. An existing id is ErrAlreadyExists.
func (c *Client) CreateTask(ctx context.Context, tenant string, req CreateTaskRequest, opts ...RequestOption) (*Task, error) {
	if err := required("tenant", tenant, "queue", req.Queue); err != nil {
		return nil, err
	}
	return c.doTask(ctx, http.MethodPost, tenantPath(tenant, "tasks"), req, opts)
}

// GetTask returns one task.
func (c *Client) GetTask(ctx context.Context, tenant, id string, opts ...RequestOption) (*Task, error) {
	if err := required("tenant", tenant, "task id", id); err != nil {
		return nil, err
	}
	return c.doTask(ctx, http.MethodGet, tenantPath(tenant, "tasks", id), nil, opts)
}

// ListTasks returns one page of the tenant's tasks.
func (c *Client) ListTasks(ctx context.Context, tenant string, f ListTasksOptions, opts ...RequestOption) (*TaskList, error) {
	if err := required("tenant", tenant); err != nil {
		return nil, err
	}
	q := url.Values{}
	setIf(q, "queue", f.Queue)
	setIf(q, "status", f.Status)
	setIf(q, "owner", f.Owner)
	setIf(q, "page_token", f.PageToken)
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out TaskList
	if _, err := c.Do(ctx, http.MethodGet, withQuery(tenantPath(tenant, "tasks"), q), nil, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteTask deletes a task; with expectVersion, only at that version
// (else ErrVersionMismatch).
func (c *Client) DeleteTask(ctx context.Context, tenant, id string, expectVersion *uint64, opts ...RequestOption) error {
	if err := required("tenant", tenant, "task id", id); err != nil {
		return err
	}
	q := url.Values{}
	if expectVersion != nil {
		q.Set("expect_version", strconv.FormatUint(*expectVersion, 10))
	}
	_, err := c.Do(ctx, http.MethodDelete, withQuery(tenantPath(tenant, "tasks", id), q), nil, nil, opts...)
	return err
}

// ClaimTask leases one task to req.Owner and returns it with its new
// fencing token. ErrLeaseHeld or ErrVersionMismatch when it cannot.
func (c *Client) ClaimTask(ctx context.Context, tenant, id string, req ClaimRequest, opts ...RequestOption) (*Task, error) {
	if err := required("tenant", tenant, "task id", id, "owner", req.Owner); err != nil {
		return nil, err
	}
	return c.doTask(ctx, http.MethodPost, tenantPath(tenant, "tasks", id, "claim"), req, opts)
}

// ClaimQueue leases the best claimable task of a queue (highest priority,
// then oldest). It returns (nil, nil) when none became claimable within
// req.Wait. The per-attempt timeout is extended by the wait.
func (c *Client) ClaimQueue(ctx context.Context, tenant, queue string, req QueueClaimRequest, opts ...RequestOption) (*Task, error) {
	if err := required("tenant", tenant, "queue", queue, "owner", req.Owner); err != nil {
		return nil, err
	}
	opts = append(opts, extendTimeout(req.Wait))
	var out Task
	meta, err := c.Do(ctx, http.MethodPost, tenantPath(tenant, "queues", queue, "claim"), req, &out, opts...)
	if err != nil || meta.Status == http.StatusNoContent {
		return nil, err
	}
	return &out, nil
}

// RenewTask extends the lease held under req.FencingToken; ErrFenced if
// someone claimed the task since.
func (c *Client) RenewTask(ctx context.Context, tenant, id string, req RenewRequest, opts ...RequestOption) (*Task, error) {
	if err := required("tenant", tenant, "task id", id); err != nil {
		return nil, err
	}
	return c.doTask(ctx, http.MethodPost, tenantPath(tenant, "tasks", id, "renew"), req, opts)
}

// UpdateTask changes a task; see UpdateTaskRequest for the guards.
func (c *Client) UpdateTask(ctx context.Context, tenant, id string, req UpdateTaskRequest, opts ...RequestOption) (*Task, error) {
	if err := required("tenant", tenant, "task id", id); err != nil {
		return nil, err
	}
	return c.doTask(ctx, http.MethodPost, tenantPath(tenant, "tasks", id, "update"), req, opts)
}

// FailTask ends the attempt held under req.FencingToken as failed: the
// task is retried after its backoff, or is dead (StatusDead) after its
// last attempt or when req.NonRetryable. ErrFenced for a stale token.
func (c *Client) FailTask(ctx context.Context, tenant, id string, req FailTaskRequest, opts ...RequestOption) (*Task, error) {
	if err := required("tenant", tenant, "task id", id); err != nil {
		return nil, err
	}
	return c.doTask(ctx, http.MethodPost, tenantPath(tenant, "tasks", id, "fail"), req.wire(), opts)
}

// RetryTask puts a task (typically a dead one) back to a claimable status
// with its attempts reset. ErrLeaseHeld while someone holds its lease.
func (c *Client) RetryTask(ctx context.Context, tenant, id string, req RetryTaskRequest, opts ...RequestOption) (*Task, error) {
	if err := required("tenant", tenant, "task id", id); err != nil {
		return nil, err
	}
	return c.doTask(ctx, http.MethodPost, tenantPath(tenant, "tasks", id, "retry"), req, opts)
}

// CancelTask cancels a task: one without a live lease becomes
// StatusCancelled at once, with its fencing token retired; a leased one
// gets CancelRequested, and is cancelled when its holder acknowledges
// (CancelTask with its token), releases or fails it, or its lease runs out.
// ErrVersionMismatch for a task that is done or dead.
func (c *Client) CancelTask(ctx context.Context, tenant, id string, req CancelTaskRequest, opts ...RequestOption) (*Task, error) {
	if err := required("tenant", tenant, "task id", id); err != nil {
		return nil, err
	}
	return c.doTask(ctx, http.MethodPost, tenantPath(tenant, "tasks", id, "cancel"), req, opts)
}

// ListTaskDependencies returns one page of a task's dependencies in id
// order, each with its outcome once resolved (limit 0: the server's
// default, 100).
func (c *Client) ListTaskDependencies(ctx context.Context, tenant, id string, limit int, pageToken string, opts ...RequestOption) (*DependencyList, error) {
	if err := required("tenant", tenant, "task id", id); err != nil {
		return nil, err
	}
	q := url.Values{}
	setIf(q, "page_token", pageToken)
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out DependencyList
	if _, err := c.Do(ctx, http.MethodGet, withQuery(tenantPath(tenant, "tasks", id, "dependencies"), q), nil, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *Client) doTask(ctx context.Context, method, path string, body any, opts []RequestOption) (*Task, error) {
	var out Task
	if _, err := c.Do(ctx, method, path, body, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

func setIf(q url.Values, key, value string) {
	if value != "" {
		q.Set(key, value)
	}
}

// QueuePolicy is a queue's lifecycle defaults: tasks created in the queue
// afterwards take them for the fields their create leaves zero. Zero
// fields give no default.
type QueuePolicy struct {
	MaxAttempts    uint64        `json:"max_attempts"`
	BackoffInitial time.Duration `json:"-"`
	BackoffMax     time.Duration `json:"-"`
	// Retention: tasks of the queue that enter done, dead or cancelled are
	// deleted this long after (unless they set their own); 0 keeps them.
	// Read when a task enters one of those statuses, so it also applies
	// to tasks created before it was set.
	Retention time.Duration `json:"-"`
	// Flow control (0: no limit): at most MaxLeased tasks leased at once,
	// ClaimsPerSecond claims a second with a burst of ClaimBurst, at most
	// ConcurrencyKeyLimit leased tasks per CreateTaskRequest.ConcurrencyKey.
	// A claim by id at a limit is ErrRateLimited; a queue claim finds
	// nothing.
	MaxLeased           int64 `json:"max_leased,omitempty"`
	ClaimsPerSecond     int64 `json:"claims_per_second,omitempty"`
	ClaimBurst          int64 `json:"claim_burst,omitempty"`
	ConcurrencyKeyLimit int64 `json:"concurrency_key_limit,omitempty"`
}

// SetQueuePolicy sets (all zero: clears) a queue's lifecycle defaults; it
// needs the cluster admin token.
func (c *Client) SetQueuePolicy(ctx context.Context, tenant, queue string, p QueuePolicy, opts ...RequestOption) (*QueuePolicy, error) {
	if err := required("tenant", tenant, "queue", queue); err != nil {
		return nil, err
	}
	var out QueuePolicy
	if _, err := c.Do(ctx, http.MethodPut, tenantPath(tenant, "queues", queue, "policy"), p, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetQueuePolicy returns a queue's lifecycle defaults (zeros: none).
func (c *Client) GetQueuePolicy(ctx context.Context, tenant, queue string, opts ...RequestOption) (*QueuePolicy, error) {
	if err := required("tenant", tenant, "queue", queue); err != nil {
		return nil, err
	}
	var out QueuePolicy
	if _, err := c.Do(ctx, http.MethodGet, tenantPath(tenant, "queues", queue, "policy"), nil, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}
