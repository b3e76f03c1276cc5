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

// Waitpoint states.
const (
	WaitpointPending   = "pending"
	WaitpointCompleted = "completed"
	WaitpointTimedOut  = "timed_out"
)

// Waitpoint is something to wait for (a person's approval, another
// system's callback): pending until completed once with a payload, or
// timed out (docs/api.md "Waitpoints").
type Waitpoint struct {
	TenantID    string          `json:"tenant_id"`
	WaitpointID string          `json:"waitpoint_id"`
	State       string          `json:"state"`
	Payload     json.RawMessage `json:"payload"`
	Version     uint64          `json:"version"`
	TaskID      string          `json:"task_id"` // the task parked on it, "" if none
	CreatedAt   time.Time       `json:"created_at"`
	TimeoutAt   time.Time       `json:"timeout_at"`
	ResolvedAt  *time.Time      `json:"resolved_at"`
}

// WaitpointOutcome is, in a claim's answer of a task that was parked, the
// waitpoint's state and payload.
type WaitpointOutcome struct {
	WaitpointID string          `json:"waitpoint_id"`
	State       string          `json:"state"`
	Payload     json.RawMessage `json:"payload"`
}

// CreateWaitpoint creates a pending waitpoint that times out after
// timeout (whole milliseconds, at most 30 days); id "" is generated.
func (c *Client) CreateWaitpoint(ctx context.Context, tenant, id string, timeout time.Duration, opts ...RequestOption) (*Waitpoint, error) {
	if err := required("tenant", tenant); err != nil {
		return nil, err
	}
	var out Waitpoint
	req := wire.WaitpointCreate{WaitpointID: id, TimeoutMs: timeout.Milliseconds()}
	if _, err := c.Do(ctx, http.MethodPost, tenantPath(tenant, "waitpoints"), req, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetWaitpoint reads a waitpoint; with wait > 0 (at most 60s) the server
// answers once it is no longer pending, or when the wait ends.
func (c *Client) GetWaitpoint(ctx context.Context, tenant, id string, wait time.Duration, opts ...RequestOption) (*Waitpoint, error) {
	if err := required("tenant", tenant, "waitpoint id", id); err != nil {
		return nil, err
	}
	q := url.Values{}
	if wait > 0 {
		q.Set("wait_ms", strconv.FormatInt(wait.Milliseconds(), 10))
	}
	var out Waitpoint
	if _, err := c.Do(ctx, http.MethodGet, withQuery(tenantPath(tenant, "waitpoints", id), q), nil, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// CompleteWaitpoint completes a waitpoint with payload (JSON). Completing
// it again with the same payload answers as the first time;
// ErrVersionMismatch for another payload or a waitpoint that timed out.
func (c *Client) CompleteWaitpoint(ctx context.Context, tenant, id string, payload json.RawMessage, opts ...RequestOption) (*Waitpoint, error) {
	if err := required("tenant", tenant, "waitpoint id", id); err != nil {
		return nil, err
	}
	var out Waitpoint
	if _, err := c.Do(ctx, http.MethodPost, tenantPath(tenant, "waitpoints", id, "complete"), wire.WaitpointComplete{Payload: payload}, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// ParkTask parks task id, held under token, on a waitpoint: the lease
// ends and no claim takes the task until the waitpoint resolves; its
// claim then carries Task.Waitpoint.
func (c *Client) ParkTask(ctx context.Context, tenant, id string, token uint64, waitpointID string, opts ...RequestOption) (*Task, error) {
	if err := required("tenant", tenant, "task id", id, "waitpoint id", waitpointID); err != nil {
		return nil, err
	}
	return c.doTask(ctx, http.MethodPost, tenantPath(tenant, "tasks", id, "wait"), wire.TaskWait{FencingToken: &token, WaitpointID: waitpointID}, opts)
}
