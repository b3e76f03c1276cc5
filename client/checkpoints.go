package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Checkpoint is one link of a thread's append-only chain of execution
// checkpoints. PendingWrites is filled only when a checkpoint is read on its
// own (GetCheckpoint, LatestCheckpoint), not by ListCheckpoints.
//
// The checkpoint methods map one to one onto the operations of a LangGraph
// checkpointer (BaseCheckpointSaver), with thread_id as the thread and
// checkpoint_id as the checkpoint id:
//
//   - put(config, checkpoint, metadata, new_versions) → PutCheckpoint, with
//     ParentID = the config's checkpoint_id (empty for a thread's first
//     checkpoint). ErrVersionMismatch means another writer extended the
//     thread first; its details carry "current_head". Re-putting the same
//     id with the same content is a no-op, so retries are safe.
//   - put_writes(config, writes, task_id) → PutWrites, idempotent per
//     (checkpoint, task id).
//   - get_tuple(config) → GetCheckpoint when the config names a checkpoint,
//     LatestCheckpoint otherwise; both return the pending writes, and
//     ParentID gives the parent config.
//   - list(config, before=..., limit=...) → ListCheckpoints with
//     ListCheckpointsOptions{Before, Limit}, newest first.
//   - delete_thread(thread_id) → DeleteThread.
//
// A deliberate fork (LangGraph's replay from an earlier checkpoint) sets
// Fork, so the parent need not be the head.
type Checkpoint struct {
	ThreadID      string          `json:"thread_id"`
	CheckpointID  string          `json:"checkpoint_id"`
	ParentID      string          `json:"parent_id"` // "" for a thread's first checkpoint
	Data          json.RawMessage `json:"data"`
	Metadata      json.RawMessage `json:"metadata"`
	CreatedAt     time.Time       `json:"created_at"`
	PendingWrites []PendingWrites `json:"pending_writes,omitempty"`
}

// PendingWrites are the writes one task made in the step after a checkpoint.
type PendingWrites struct {
	TaskID string          `json:"task_id"`
	Writes json.RawMessage `json:"writes"` // a JSON array
}

// PutCheckpointRequest is the body of PutCheckpoint. ParentID must be the
// thread's current head (empty for the first checkpoint) unless Fork is
// set, in which case it may name any checkpoint of the thread.
type PutCheckpointRequest struct {
	ParentID string          `json:"parent_id,omitempty"`
	Data     json.RawMessage `json:"data"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
	Fork     bool            `json:"fork,omitempty"`
	Fence    *Fence          `json:"fence,omitempty"`
}

// PutCheckpoint appends checkpoint id to a thread. The same id with the
// same content again returns the stored checkpoint; with other content it
// is ErrAlreadyExists. A parent that is not the head (without Fork) is
// ErrVersionMismatch with the head in the "current_head" detail.
func (c *Client) PutCheckpoint(ctx context.Context, tenant, thread, id string, req PutCheckpointRequest, opts ...RequestOption) (*Checkpoint, error) {
	if err := required("tenant", tenant, "thread", thread, "checkpoint id", id); err != nil {
		return nil, err
	}
	return c.doCheckpoint(ctx, http.MethodPut, tenantPath(tenant, "threads", thread, "checkpoints", id), req, opts)
}

// GetCheckpoint returns one checkpoint with its pending writes.
func (c *Client) GetCheckpoint(ctx context.Context, tenant, thread, id string, opts ...RequestOption) (*Checkpoint, error) {
	if err := required("tenant", tenant, "thread", thread, "checkpoint id", id); err != nil {
		return nil, err
	}
	return c.doCheckpoint(ctx, http.MethodGet, tenantPath(tenant, "threads", thread, "checkpoints", id), nil, opts)
}

// LatestCheckpoint returns the thread's head with its pending writes;
// ErrNotFound when the thread has no checkpoint.
func (c *Client) LatestCheckpoint(ctx context.Context, tenant, thread string, opts ...RequestOption) (*Checkpoint, error) {
	return c.GetCheckpoint(ctx, tenant, thread, "latest", opts...)
}

// ListCheckpointsOptions selects the checkpoints of ListCheckpoints; zero
// fields do not filter.
type ListCheckpointsOptions struct {
	Before string // only checkpoints older than this one
	Limit  int    // at most this many; 0 means the server's default
}

// ListCheckpoints returns a thread's checkpoints newest first (see
// ListCheckpointsOptions). Pending writes are not included.
func (c *Client) ListCheckpoints(ctx context.Context, tenant, thread string, f ListCheckpointsOptions, opts ...RequestOption) ([]Checkpoint, error) {
	if err := required("tenant", tenant, "thread", thread); err != nil {
		return nil, err
	}
	q := url.Values{}
	setIf(q, "before", f.Before)
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out struct {
		Checkpoints []Checkpoint `json:"checkpoints"`
	}
	if _, err := c.Do(ctx, http.MethodGet, withQuery(tenantPath(tenant, "threads", thread, "checkpoints"), q), nil, &out, opts...); err != nil {
		return nil, err
	}
	return out.Checkpoints, nil
}

// PutWritesRequest is the body of PutWrites: the pending writes (a JSON
// array) that task TaskID made in the step after a checkpoint. TaskID
// travels in the path; Fence may be nil.
type PutWritesRequest struct {
	TaskID string          `json:"-"`
	Writes json.RawMessage `json:"writes"`
	Fence  *Fence          `json:"fence,omitempty"`
}

// PutWrites records the pending writes req.TaskID made in the step after
// checkpoint. Recording the same writes again is a no-op; other writes for
// the same (checkpoint, task) are ErrAlreadyExists.
func (c *Client) PutWrites(ctx context.Context, tenant, thread, checkpoint string, req PutWritesRequest, opts ...RequestOption) error {
	if err := required("tenant", tenant, "thread", thread, "checkpoint id", checkpoint, "task id", req.TaskID); err != nil {
		return err
	}
	path := tenantPath(tenant, "threads", thread, "checkpoints", checkpoint, "writes", req.TaskID)
	_, err := c.Do(ctx, http.MethodPut, path, req, nil, opts...)
	return err
}

// DeleteThread deletes a thread with all its checkpoints and pending
// writes; ErrNotFound when it has none. fence may be nil.
func (c *Client) DeleteThread(ctx context.Context, tenant, thread string, fence *Fence, opts ...RequestOption) error {
	if err := required("tenant", tenant, "thread", thread); err != nil {
		return err
	}
	var body any
	if fence != nil {
		body = struct {
			Fence *Fence `json:"fence"`
		}{fence}
	}
	_, err := c.Do(ctx, http.MethodDelete, tenantPath(tenant, "threads", thread), body, nil, opts...)
	return err
}

func (c *Client) doCheckpoint(ctx context.Context, method, path string, body any, opts []RequestOption) (*Checkpoint, error) {
	var out Checkpoint
	if _, err := c.Do(ctx, method, path, body, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}
