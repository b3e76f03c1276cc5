package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/baton-dev/baton/fsm/wire"
)

// Checkpoint is one link of the append-only chain of execution checkpoints
// of a thread's namespace. PendingWrites is filled when a checkpoint is
// read on its own (GetCheckpoint, LatestCheckpoint and their NS forms),
// and by ListCheckpoints when asked to.
//
// The checkpoint methods map one to one onto the operations of a LangGraph
// checkpointer (BaseCheckpointSaver), with thread_id as the thread,
// checkpoint_ns as the namespace (NS: "" is the default one) and
// checkpoint_id as the checkpoint id:
//
//   - put(config, checkpoint, metadata, new_versions) → PutCheckpoint, with
//     ParentID = the config's checkpoint_id (empty for the namespace's
//     first checkpoint) and NS = its checkpoint_ns. ErrVersionMismatch
//     means another writer extended the namespace first; its details carry
//     "current_head". Re-putting the same id with the same content is a
//     no-op, so retries are safe. Data of any size: past
//     CheckpointInlineMax it goes through the chunk store.
//   - put_writes(config, writes, task_id, task_path) → PutWrites, keyed
//     by (checkpoint, task id, index) as LangGraph keys them.
//   - get_tuple(config) → GetCheckpointNS when the config names a
//     checkpoint, LatestCheckpointNS otherwise; both return the pending
//     writes and the whole data, and ParentID gives the parent config.
//   - list(config, filter=..., before=..., limit=...) → ListCheckpoints
//     with ListCheckpointsOptions{NS, Filter, Before, Limit,
//     PendingWrites: true}, newest first.
//   - delete_thread(thread_id) → DeleteThread, every namespace.
//
// A deliberate fork (LangGraph's replay from an earlier checkpoint) sets
// Fork, so the parent need not be the head.
//
// A thread id is any UTF-8 without control characters, 1 to 256 bytes (an
// e-mail address, a path); a namespace the same, 0 to 512 bytes.
type Checkpoint struct {
	ThreadID      string          `json:"thread_id"`
	CheckpointNS  string          `json:"checkpoint_ns,omitempty"` // "" for the default namespace
	CheckpointID  string          `json:"checkpoint_id"`
	ParentID      string          `json:"parent_id"` // "" for a namespace's first checkpoint
	Data          json.RawMessage `json:"data"`
	Metadata      json.RawMessage `json:"metadata"`
	CreatedAt     time.Time       `json:"created_at"`
	DataChunks    []ChunkRef      `json:"data_chunks,omitempty"` // where Data is held, for a large checkpoint
	ExpiresAt     *time.Time      `json:"expires_at,omitempty"`  // when a retention policy's max age deletes it
	Blobs         []Blob          `json:"blobs,omitempty"`       // the channel values it names, with their bytes
	PendingWrites []PendingWrite  `json:"pending_writes,omitempty"`
}

// PendingWrite is one write a task made in the step after a checkpoint:
// the value it wrote to a channel, at index Idx of the task's writes
// (negative for LangGraph's special channels: error, scheduled, interrupt,
// resume). A checkpoint's writes come ordered by task id, then index.
//
// A write is a JSON Value, or Data, bytes of a serializer's Type
// (LangGraph's (type, bytes), as the Python saver writes them).
type PendingWrite struct {
	TaskID   string          `json:"task_id"`
	TaskPath string          `json:"task_path,omitempty"`
	Idx      int64           `json:"idx"`
	Channel  string          `json:"channel"`
	Value    json.RawMessage `json:"value,omitempty"`
	Type     string          `json:"type,omitempty"`
	Data     []byte          `json:"b64,omitempty"`
}

// Write is one write of a PutWritesRequest: Value written to Channel, at
// index Idx of the task's writes; nil Idx is the write's position in the
// request. With Type set, Data (bytes of that serializer's type) is
// written instead of Value.
type Write struct {
	Channel string
	Value   json.RawMessage
	Idx     *int64
	Type    string
	Data    []byte
}

// CheckpointInlineMax is the largest Data that PutCheckpoint sends in the
// request itself; larger data is cut into chunks (as UploadArtifact does),
// uploaded, and named by the checkpoint, so that a checkpoint may be far
// larger than a request's 1 MiB limit (up to the server's
// --max-checkpoint-bytes).
const CheckpointInlineMax = 512 << 10

// PutCheckpointRequest is the body of PutCheckpoint. ParentID must be the
// head of the thread's namespace NS (empty for its first checkpoint)
// unless Fork is set, in which case it may name any checkpoint of it.
type PutCheckpointRequest struct {
	NS       string          `json:"-"` // the checkpoint namespace; "" is the default one
	ParentID string          `json:"parent_id,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
	Fork     bool            `json:"fork,omitempty"`
	Fence    *Fence          `json:"fence,omitempty"`
	// DataChunks, set by PutCheckpoint itself for data over
	// CheckpointInlineMax, name chunks the tenant holds whose bytes, in
	// order, are the data. Leave it empty.
	DataChunks []ChunkRef `json:"data_chunks,omitempty"`
	// BlobVersions names the channel values the checkpoint holds, by
	// version; Blobs brings those new to the namespace (the others an
	// earlier checkpoint of it put). See docs/api.md "Checkpoints".
	BlobVersions map[string]string `json:"blob_versions,omitempty"`
	Blobs        []Blob            `json:"-"` // sent as blobs
}

// Blob is a channel value of a checkpoint, stored once per (channel,
// version) of its namespace: bytes of a serializer's type.
//
// Chunks, in an answer, are the chunks that hold a large value (Data has
// its bytes either way); PutCheckpoint sends Data.
type Blob struct {
	Channel string     `json:"channel"`
	Version string     `json:"version"`
	Type    string     `json:"type"`
	Data    []byte     `json:"b64"`
	Chunks  []ChunkRef `json:"chunks,omitempty"`
}

// PutCheckpoint appends checkpoint id to a thread's namespace (req.NS). The
// same id with the same content again returns the stored checkpoint; with
// other content it is ErrAlreadyExists. A parent that is not the head
// (without Fork) is ErrVersionMismatch with the head in the
// "current_head" detail.
//
// Data over CheckpointInlineMax is compacted, cut into chunks and uploaded
// first (only the chunks the tenant lacks), which needs a checkpoints (or
// artifacts) write grant; the answer carries the data either way.
func (c *Client) PutCheckpoint(ctx context.Context, tenant, thread, id string, req PutCheckpointRequest, opts ...RequestOption) (*Checkpoint, error) {
	if err := required("tenant", tenant, "thread", thread, "checkpoint id", id); err != nil {
		return nil, err
	}
	if len(req.Data) <= CheckpointInlineMax || len(req.DataChunks) > 0 {
		return c.doCheckpoint(ctx, http.MethodPut, checkpointPath(tenant, thread, req.NS, "checkpoints", id), req.wire(), opts)
	}
	var data bytes.Buffer
	if err := json.Compact(&data, req.Data); err != nil {
		return nil, fmt.Errorf("%w: checkpoint data is not valid JSON: %v", ErrInvalidArgument, err)
	}
	u := newUploader(c, tenant, UploadOptions{}, collectOptions(ctx, opts))
	up, err := u.run(ctx, bytes.NewReader(data.Bytes()))
	if err != nil {
		return nil, fmt.Errorf("uploading checkpoint data: %w", err)
	}
	req.Data, req.DataChunks = nil, up.Chunks
	// The server reads the chunks back to check they are JSON.
	opts = append(opts, extendTimeout(time.Duration(up.Size/(64<<20))*time.Second))
	cp, err := c.doCheckpoint(ctx, http.MethodPut, checkpointPath(tenant, thread, req.NS, "checkpoints", id), req.wire(), opts)
	if err != nil {
		return nil, err
	}
	cp.Data = data.Bytes()
	return cp, nil
}

// GetCheckpoint returns one checkpoint of the default namespace with its
// pending writes (GetCheckpointNS for another namespace).
func (c *Client) GetCheckpoint(ctx context.Context, tenant, thread, id string, opts ...RequestOption) (*Checkpoint, error) {
	return c.GetCheckpointNS(ctx, tenant, thread, "", id, opts...)
}

// GetCheckpointNS returns one checkpoint of namespace ns ("" the default)
// with its pending writes and its whole data, however large.
func (c *Client) GetCheckpointNS(ctx context.Context, tenant, thread, ns, id string, opts ...RequestOption) (*Checkpoint, error) {
	if err := required("tenant", tenant, "thread", thread, "checkpoint id", id); err != nil {
		return nil, err
	}
	return c.doCheckpoint(ctx, http.MethodGet, checkpointPath(tenant, thread, ns, "checkpoints", id), nil, opts)
}

// LatestCheckpoint returns the head of the thread's default namespace with
// its pending writes; ErrNotFound when it has no checkpoint.
func (c *Client) LatestCheckpoint(ctx context.Context, tenant, thread string, opts ...RequestOption) (*Checkpoint, error) {
	return c.GetCheckpointNS(ctx, tenant, thread, "", "latest", opts...)
}

// LatestCheckpointNS returns the head of the thread's namespace ns with its
// pending writes; ErrNotFound when the namespace has no checkpoint.
func (c *Client) LatestCheckpointNS(ctx context.Context, tenant, thread, ns string, opts ...RequestOption) (*Checkpoint, error) {
	return c.GetCheckpointNS(ctx, tenant, thread, ns, "latest", opts...)
}

// ListCheckpointsOptions selects the checkpoints of ListCheckpoints; zero
// fields do not filter.
type ListCheckpointsOptions struct {
	NS     string // the checkpoint namespace; "" is the default one
	Before string // only checkpoints older than this one (none when it does not exist)
	Limit  int    // at most this many matches; 0 means the server's default (100)
	// Filter keeps the checkpoints whose metadata has every member of it
	// with an equal JSON value (LangGraph's filter); nil or empty: all.
	Filter map[string]any
	// PendingWrites fills each checkpoint's PendingWrites, in the same
	// answer (LangGraph's list returns them with every tuple).
	PendingWrites bool
}

// ListCheckpoints returns the checkpoints of a thread's namespace newest
// first (see ListCheckpointsOptions), each with its whole data: the data
// of large checkpoints is read one checkpoint at a time. Pending writes are
// included when f.PendingWrites is set. A server page examines a bounded number of checkpoints, so
// under a filter that few match it may end short, or empty, with a token:
// ListCheckpoints follows those until it has Limit (100 when 0) matches or
// the namespace ends.
func (c *Client) ListCheckpoints(ctx context.Context, tenant, thread string, f ListCheckpointsOptions, opts ...RequestOption) ([]Checkpoint, error) {
	if err := required("tenant", tenant, "thread", thread); err != nil {
		return nil, err
	}
	q := url.Values{}
	if f.NS != "" {
		q.Set("checkpoint_ns", f.NS)
	}
	setIf(q, "before", f.Before)
	if f.PendingWrites {
		q.Set("pending_writes", "true")
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if len(f.Filter) > 0 {
		b, err := json.Marshal(f.Filter)
		if err != nil {
			return nil, fmt.Errorf("%w: filter: %v", ErrInvalidArgument, err)
		}
		q.Set("filter", string(b))
	}
	want := f.Limit
	if want <= 0 {
		want = defaultCheckpointListLimit
	}
	list := []Checkpoint{}
	for {
		var out struct {
			Checkpoints   []Checkpoint `json:"checkpoints"`
			NextPageToken string       `json:"next_page_token"`
		}
		if _, err := c.Do(ctx, http.MethodGet, withQuery(checkpointPath(tenant, thread, "", "checkpoints"), q), nil, &out, opts...); err != nil {
			return nil, err
		}
		list = append(list, out.Checkpoints...)
		if len(list) >= want || out.NextPageToken == "" {
			break
		}
		q.Del("before")
		q.Set("page_token", out.NextPageToken)
		q.Set("limit", strconv.Itoa(want-len(list)))
	}
	for i := range list {
		cp := &list[i]
		if len(cp.DataChunks) == 0 {
			continue
		}
		full, err := c.GetCheckpointNS(ctx, tenant, thread, f.NS, cp.CheckpointID, opts...)
		if err != nil {
			return nil, fmt.Errorf("reading the data of checkpoint %s: %w", cp.CheckpointID, err)
		}
		cp.Data = full.Data
	}
	return list, nil
}

// defaultCheckpointListLimit is the server's page size when a list gives
// no limit, which ListCheckpoints also takes as its total.
const defaultCheckpointListLimit = 100

// PutWritesRequest is the body of PutWrites: the pending writes that task
// TaskID (at TaskPath, optional) made in the step after a checkpoint of
// namespace NS. TaskID and NS travel in the URL; Fence may be nil.
type PutWritesRequest struct {
	NS       string  `json:"-"`
	TaskID   string  `json:"-"`
	TaskPath string  `json:"task_path,omitempty"`
	Writes   []Write `json:"-"` // sent as writes
	Fence    *Fence  `json:"fence,omitempty"`
}

// PutWrites records the pending writes req.TaskID made in the step after
// checkpoint, as LangGraph's put_writes: a write at an index >= 0 that is
// already recorded for the task stays as it was (a retried step writes the
// same), one at a negative index replaces what was there, and writes at
// new indexes are added to the task's.
func (c *Client) PutWrites(ctx context.Context, tenant, thread, checkpoint string, req PutWritesRequest, opts ...RequestOption) error {
	if err := required("tenant", tenant, "thread", thread, "checkpoint id", checkpoint, "task id", req.TaskID); err != nil {
		return err
	}
	path := checkpointPath(tenant, thread, req.NS, "checkpoints", checkpoint, "writes", req.TaskID)
	_, err := c.Do(ctx, http.MethodPut, path, req.wire(), nil, opts...)
	return err
}

// DeleteThread deletes a thread with all its checkpoints and pending
// writes, in every namespace; ErrNotFound when it has none. Chunks that
// held its checkpoints' data are collected after the server's grace
// period unless something else names them. fence may be nil.
func (c *Client) DeleteThread(ctx context.Context, tenant, thread string, fence *Fence, opts ...RequestOption) error {
	if err := required("tenant", tenant, "thread", thread); err != nil {
		return err
	}
	var body any // no body without a fence
	if fence != nil {
		body = wire.ThreadDelete{Fence: fence}
	}
	_, err := c.Do(ctx, http.MethodDelete, checkpointPath(tenant, thread, ""), body, nil, opts...)
	return err
}

// checkpointPath is the path of a thread, or of segments under it, with
// checkpoint_ns in the query when ns is not the default namespace. The
// thread id is one percent-encoded segment; "." and ".." are written %2E
// so that nothing on the way cleans them away as path steps.
func checkpointPath(tenant, thread, ns string, segments ...string) string {
	th := url.PathEscape(thread)
	if th == "." || th == ".." {
		th = strings.ReplaceAll(th, ".", "%2E")
	}
	var b strings.Builder
	b.WriteString(tenantPath(tenant, "threads"))
	b.WriteByte('/')
	b.WriteString(th)
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return withQuery(b.String(), nsQuery(ns))
}

// nsQuery is the query that names namespace ns (none for the default).
func nsQuery(ns string) url.Values {
	if ns == "" {
		return nil
	}
	return url.Values{"checkpoint_ns": {ns}}
}

func (c *Client) doCheckpoint(ctx context.Context, method, path string, body any, opts []RequestOption) (*Checkpoint, error) {
	var out Checkpoint
	if _, err := c.Do(ctx, method, path, body, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}
