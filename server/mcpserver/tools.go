package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-dev/baton/client"
)

// Task is a task as the tools show it.
type Task struct {
	TaskID       string `json:"task_id"`
	Queue        string `json:"queue"`
	Status       string `json:"status"`
	Owner        string `json:"owner"`
	LeaseUntil   string `json:"lease_until,omitempty" jsonschema:"RFC 3339; absent without a lease"`
	FencingToken uint64 `json:"fencing_token" jsonschema:"the claim's fencing token; the session keeps it for you"`
	Version      uint64 `json:"version"`
	Attempt      uint64 `json:"attempt"`
	Priority     int64  `json:"priority"`
	ArtifactID   string `json:"artifact_id"`
	Payload      any    `json:"payload"`
	Result       any    `json:"result"`
	LastError    string `json:"last_error"`
}

func taskOut(t *client.Task) *Task {
	out := &Task{TaskID: t.TaskID, Queue: t.Queue, Status: t.Status, Owner: t.Owner, FencingToken: t.FencingToken,
		Version: t.Version, Attempt: t.Attempt, Priority: t.Priority, ArtifactID: t.ArtifactID,
		Payload: raw(t.Payload), Result: raw(t.Result), LastError: t.LastError}
	if t.LeaseUntil != nil {
		out.LeaseUntil = t.LeaseUntil.UTC().Format(time.RFC3339Nano)
	}
	return out
}

// raw decodes a JSON value for the structured output; nil for none.
func raw(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(b, &v) != nil {
		return nil
	}
	return v
}

// encode encodes a value the model gave; nil stays absent.
func encode(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	return json.Marshal(v)
}

func ptr[T any](v T) *T { return &v }

// annotations of the tools: read-only, or a write that is idempotent
// and/or destructive (overwrites what was there).
func readOnly(title string) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)}
}

func write(title string, idempotent, destructive bool) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{Title: title, IdempotentHint: idempotent, DestructiveHint: ptr(destructive), OpenWorldHint: ptr(false)}
}

type (
	CreateTaskIn struct {
		Queue    string `json:"queue" jsonschema:"the queue to put the task in"`
		TaskID   string `json:"task_id,omitempty" jsonschema:"the task's id; generated when absent"`
		Payload  any    `json:"payload,omitempty" jsonschema:"what the worker needs to know, any JSON value"`
		Priority int64  `json:"priority,omitempty" jsonschema:"higher is claimed first; default 0"`
	}
	ClaimTaskIn struct {
		Queue        string `json:"queue" jsonschema:"the queue to take a task from"`
		LeaseSeconds int    `json:"lease_seconds,omitempty" jsonschema:"lease length, 1 to 86400; default 60; renewed for you while the session lives"`
		WaitSeconds  int    `json:"wait_seconds,omitempty" jsonschema:"wait up to this long (0 to 60) for a task when none is ready; default 0"`
		SetStatus    string `json:"set_status,omitempty" jsonschema:"status the claim sets, e.g. running"`
	}
	ClaimTaskOut struct {
		Claimed bool   `json:"claimed" jsonschema:"false when no task was ready within wait_seconds"`
		Task    *Task  `json:"task,omitempty"`
		Message string `json:"message"`
	}
	Empty        struct{}
	HeartbeatOut struct {
		TaskID     string `json:"task_id"`
		LeaseUntil string `json:"lease_until"`
	}
	CompleteTaskIn struct {
		Result     any    `json:"result,omitempty" jsonschema:"the task's result, any JSON value"`
		ArtifactID string `json:"artifact_id,omitempty" jsonschema:"an artifact id (sha256:...) to attach to the task"`
		Status     string `json:"status,omitempty" jsonschema:"final status; default done"`
	}
	FailTaskIn struct {
		Error        string `json:"error" jsonschema:"what went wrong (at most 4096 bytes)"`
		NonRetryable bool   `json:"non_retryable,omitempty" jsonschema:"true: the task becomes dead instead of being retried"`
	}
	PublishIn struct {
		Name      string `json:"name" jsonschema:"the artifact's name; each publish makes a new version"`
		Text      string `json:"text,omitempty" jsonschema:"the content, as text"`
		Path      string `json:"path,omitempty" jsonschema:"a local file to publish instead of text (the stdio server only)"`
		MediaType string `json:"media_type,omitempty" jsonschema:"e.g. text/markdown"`
		Metadata  any    `json:"metadata,omitempty" jsonschema:"a JSON object kept with the version"`
	}
	Artifact struct {
		ArtifactID string `json:"artifact_id" jsonschema:"sha256:...; what a ref points at"`
		Name       string `json:"name"`
		Version    uint64 `json:"version"`
		Size       int64  `json:"size"`
		Digest     string `json:"digest"`
		MediaType  string `json:"media_type"`
		TaskID     string `json:"task_id"`
		Text       string `json:"text,omitempty"`
	}
	ReadArtifactIn struct {
		Name       string `json:"name,omitempty" jsonschema:"the artifact's name (or give artifact_id)"`
		Version    uint64 `json:"version,omitempty" jsonschema:"a version of name; default the latest"`
		ArtifactID string `json:"artifact_id,omitempty" jsonschema:"sha256:... as a ref or a task names it"`
	}
	ListArtifactsIn struct {
		Prefix    string `json:"prefix,omitempty"`
		Limit     int    `json:"limit,omitempty" jsonschema:"1 to 1000; default 100"`
		PageToken string `json:"page_token,omitempty" jsonschema:"next_page_token of the previous call"`
	}
	ListArtifactsOut struct {
		Artifacts     []client.ArtifactSummary `json:"artifacts"`
		NextPageToken string                   `json:"next_page_token"`
	}
	SetRefIn struct {
		Ref              string `json:"ref" jsonschema:"the ref's name, e.g. report-42/approved"`
		ArtifactID       string `json:"artifact_id" jsonschema:"the artifact id (sha256:...) to point at"`
		ExpectAbsent     bool   `json:"expect_absent,omitempty" jsonschema:"only if the ref does not exist yet (approve exactly once)"`
		ExpectArtifactID string `json:"expect_artifact_id,omitempty" jsonschema:"only if the ref points at this artifact now"`
	}
	GetRefIn struct {
		Ref string `json:"ref"`
	}
	Ref struct {
		Ref        string `json:"ref"`
		ArtifactID string `json:"artifact_id"`
		Name       string `json:"name"`
		Version    uint64 `json:"version"`
		Revision   uint64 `json:"revision"`
	}
	WriteCheckpointIn struct {
		Thread       string `json:"thread" jsonschema:"the thread (conversation, run) the checkpoint belongs to"`
		CheckpointID string `json:"checkpoint_id,omitempty" jsonschema:"generated (time-ordered) when absent"`
		Data         any    `json:"data" jsonschema:"the state to keep, any JSON value"`
		Metadata     any    `json:"metadata,omitempty"`
		Namespace    string `json:"namespace,omitempty"`
	}
	ReadCheckpointIn struct {
		Thread       string `json:"thread"`
		CheckpointID string `json:"checkpoint_id,omitempty" jsonschema:"default the latest"`
		Namespace    string `json:"namespace,omitempty"`
	}
	Checkpoint struct {
		Thread       string `json:"thread"`
		Namespace    string `json:"namespace,omitempty"`
		CheckpointID string `json:"checkpoint_id"`
		ParentID     string `json:"parent_id"`
		Data         any    `json:"data"`
		Metadata     any    `json:"metadata"`
		CreatedAt    string `json:"created_at"`
	}
	KVGetIn struct {
		Namespace string `json:"namespace"`
		Key       string `json:"key"`
	}
	KVPutIn struct {
		Namespace     string  `json:"namespace"`
		Key           string  `json:"key"`
		Value         any     `json:"value" jsonschema:"any JSON value"`
		ExpectVersion *uint64 `json:"expect_version,omitempty" jsonschema:"only if the entry's version is this; 0: only if absent"`
		TTLSeconds    int     `json:"ttl_seconds,omitempty" jsonschema:"the entry expires after this long"`
	}
	KVEntry struct {
		Namespace string `json:"namespace"`
		Key       string `json:"key"`
		Value     any    `json:"value"`
		Version   uint64 `json:"version"`
		ExpiresAt string `json:"expires_at,omitempty"`
	}
	KVSearchIn struct {
		Namespace string `json:"namespace"`
		Prefix    string `json:"prefix,omitempty" jsonschema:"keys starting with it"`
		Limit     int    `json:"limit,omitempty" jsonschema:"1 to 1000; default 100"`
		PageToken string `json:"page_token,omitempty"`
	}
	KVSearchOut struct {
		Entries       []KVEntry `json:"entries"`
		NextPageToken string    `json:"next_page_token"`
	}
	OpBeginIn struct {
		OpID   string `json:"op_id" jsonschema:"a stable id of the side effect, e.g. mail-report-42"`
		Kind   string `json:"kind" jsonschema:"what it is, e.g. send_email"`
		Params any    `json:"params" jsonschema:"its parameters; a retry must give the same"`
	}
	OpBeginOut struct {
		Op      Op     `json:"op"`
		Created bool   `json:"created" jsonschema:"false: the op was begun before; look at its state before doing it again"`
		Advice  string `json:"advice"`
	}
	OpFinishIn struct {
		OpID   string `json:"op_id"`
		State  string `json:"state" jsonschema:"succeeded, failed or unknown"`
		Result any    `json:"result,omitempty"`
	}
	Op struct {
		OpID   string `json:"op_id"`
		Kind   string `json:"kind"`
		TaskID string `json:"task_id"`
		State  string `json:"state"`
		Result any    `json:"result"`
	}
	WaitIn struct {
		Resources      []string `json:"resources,omitempty" jsonschema:"any of tasks, refs, artifacts, kv, checkpoints, ops; default all"`
		Prefix         string   `json:"prefix,omitempty" jsonschema:"only changes whose key starts with it"`
		After          string   `json:"after,omitempty" jsonschema:"the cursor a previous call returned: changes after it; default now"`
		TimeoutSeconds int      `json:"timeout_seconds,omitempty" jsonschema:"1 to 60; default 30"`
	}
	WaitOut struct {
		Changed bool    `json:"changed" jsonschema:"false: nothing changed within timeout_seconds"`
		Events  []Event `json:"events"`
		Cursor  string  `json:"cursor" jsonschema:"give it as after to the next call so no change is missed"`
	}
	Event struct {
		Resource string `json:"resource"`
		Key      string `json:"key"`
		Type     string `json:"type" jsonschema:"put or delete"`
		Value    any    `json:"value,omitempty"`
	}
)

func (s *Session) addTools(srv *mcp.Server) {
	c, tenant := s.cfg.Client, s.cfg.Tenant

	mcp.AddTool(srv, &mcp.Tool{Name: "create_task", Description: "Create a task in a queue for some worker to claim.",
		Annotations: write("Create a task", false, false)},
		func(ctx context.Context, _ *mcp.CallToolRequest, in CreateTaskIn) (*mcp.CallToolResult, *Task, error) {
			payload, err := encode(in.Payload)
			if err != nil {
				return nil, nil, err
			}
			req := client.CreateTaskRequest{Queue: in.Queue, TaskID: in.TaskID, Payload: payload}
			if in.Priority != 0 {
				req.Priority = &in.Priority
			}
			t, err := c.CreateTask(ctx, tenant, req)
			if err != nil {
				return nil, nil, s.explain("create_task", err)
			}
			return nil, taskOut(t), nil
		})

	mcp.AddTool(srv, &mcp.Tool{Name: "claim_task",
		Description: "Take the best ready task of a queue. The session keeps the claim and its fencing token, renews the lease while it lives, and fences every later write with it; finish with complete_task or fail_task.",
		Annotations: write("Claim a task", false, false)},
		func(ctx context.Context, _ *mcp.CallToolRequest, in ClaimTaskIn) (*mcp.CallToolResult, *ClaimTaskOut, error) {
			if cl, err := s.current(); err == nil {
				return nil, nil, alreadyHolding(cl)
			}
			lease := DefaultLease
			if in.LeaseSeconds != 0 {
				lease = time.Duration(in.LeaseSeconds) * time.Second
			}
			if lease <= 0 || lease > MaxLease {
				return nil, nil, fmt.Errorf("claim_task: lease_seconds must be 1 to %d, got %d", int(MaxLease/time.Second), in.LeaseSeconds)
			}
			wait := time.Duration(in.WaitSeconds) * time.Second
			if wait < 0 || wait > MaxClaimWait {
				return nil, nil, fmt.Errorf("claim_task: wait_seconds must be 0 to %d, got %d", int(MaxClaimWait/time.Second), in.WaitSeconds)
			}
			req := client.QueueClaimRequest{Owner: s.cfg.Owner, Lease: lease, Wait: wait}
			if in.SetStatus != "" {
				req.SetStatus = &in.SetStatus
			}
			t, err := c.ClaimQueue(ctx, tenant, in.Queue, req)
			if err != nil {
				return nil, nil, s.explain("claim_task", err)
			}
			if t == nil {
				return nil, &ClaimTaskOut{Message: fmt.Sprintf("no task of queue %q was ready; call again (with wait_seconds to wait) or do something else", in.Queue)}, nil
			}
			if err := s.hold(ctx, t, lease); err != nil {
				return nil, nil, err
			}
			return nil, &ClaimTaskOut{Claimed: true, Task: taskOut(t),
				Message: fmt.Sprintf("you hold task %q now; its lease is renewed for you; finish with complete_task or fail_task", t.TaskID)}, nil
		})

	mcp.AddTool(srv, &mcp.Tool{Name: "heartbeat", Description: "Renew the lease of the task you hold now (the session also renews it on its own).",
		Annotations: write("Renew the lease", true, false)},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ Empty) (*mcp.CallToolResult, *HeartbeatOut, error) {
			cl, err := s.current()
			if err != nil {
				return nil, nil, err
			}
			t, err := c.RenewTask(ctx, tenant, cl.task, client.RenewRequest{FencingToken: cl.token, Lease: cl.lease})
			if err != nil {
				return nil, nil, s.explain("heartbeat", err)
			}
			out := &HeartbeatOut{TaskID: t.TaskID}
			if t.LeaseUntil != nil {
				out.LeaseUntil = t.LeaseUntil.UTC().Format(time.RFC3339Nano)
			}
			return nil, out, nil
		})

	mcp.AddTool(srv, &mcp.Tool{Name: "complete_task", Description: "Finish the task you hold: set its final status (default done) and result, and release it.",
		Annotations: write("Complete the task", false, false)},
		func(ctx context.Context, _ *mcp.CallToolRequest, in CompleteTaskIn) (*mcp.CallToolResult, *Task, error) {
			cl, err := s.current()
			if err != nil {
				return nil, nil, err
			}
			result, err := encode(in.Result)
			if err != nil {
				return nil, nil, err
			}
			status := in.Status
			if status == "" {
				status = "done"
			}
			req := client.UpdateTaskRequest{FencingToken: &cl.token, Status: &status, Result: result, Release: ptr(true)}
			if in.ArtifactID != "" {
				req.ArtifactID = &in.ArtifactID
			}
			t, err := c.UpdateTask(ctx, tenant, cl.task, req)
			if err != nil {
				return nil, nil, s.explain("complete_task", err)
			}
			s.drop(cl)
			return nil, taskOut(t), nil
		})

	mcp.AddTool(srv, &mcp.Tool{Name: "fail_task", Description: "Give up the task you hold: it is retried later (with backoff) by some worker, or becomes dead if non_retryable or out of attempts.",
		Annotations: write("Fail the task", false, false)},
		func(ctx context.Context, _ *mcp.CallToolRequest, in FailTaskIn) (*mcp.CallToolResult, *Task, error) {
			cl, err := s.current()
			if err != nil {
				return nil, nil, err
			}
			t, err := c.FailTask(ctx, tenant, cl.task, client.FailTaskRequest{FencingToken: cl.token, Error: in.Error, NonRetryable: in.NonRetryable})
			if err != nil {
				return nil, nil, s.explain("fail_task", err)
			}
			s.drop(cl)
			return nil, taskOut(t), nil
		})

	publishDesc := "Publish content as a new version of a named artifact (immutable, content-addressed). Fenced by your claim when you hold one."
	if s.cfg.Files {
		publishDesc += " Give text, or path: a local file."
	} else {
		publishDesc += " Give the content as text."
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "publish_artifact", Description: publishDesc,
		Annotations: write("Publish an artifact", true, false)},
		func(ctx context.Context, _ *mcp.CallToolRequest, in PublishIn) (*mcp.CallToolResult, *Artifact, error) {
			var r io.Reader
			size := int64(len(in.Text))
			switch {
			case in.Path != "" && in.Text != "":
				return nil, nil, errors.New("publish_artifact: give text or path, not both")
			case in.Path != "" && !s.cfg.Files:
				return nil, nil, errors.New("publish_artifact: this server does not read files (it is not on your machine): give the content as text")
			case in.Path != "":
				f, err := os.Open(in.Path)
				if err != nil {
					return nil, nil, fmt.Errorf("publish_artifact: %v", err)
				}
				defer f.Close()
				st, err := f.Stat()
				if err != nil {
					return nil, nil, fmt.Errorf("publish_artifact: %v", err)
				}
				if !st.Mode().IsRegular() || st.Size() > MaxPublishBytes {
					return nil, nil, fmt.Errorf("publish_artifact: %s is not a regular file of at most %d bytes; publish larger files with baton artifact put", in.Path, MaxPublishBytes)
				}
				r, size = f, st.Size()
			default:
				r = strings.NewReader(in.Text)
			}
			meta, err := encode(in.Metadata)
			if err != nil {
				return nil, nil, err
			}
			fence, err := s.fence()
			if err != nil {
				return nil, nil, err
			}
			uo := client.UploadOptions{MediaType: in.MediaType, Metadata: meta, Fence: fence, Size: size}
			if fence != nil {
				uo.TaskID = fence.TaskID
			}
			m, err := c.UploadArtifact(ctx, tenant, in.Name, r, uo)
			if err != nil {
				return nil, nil, s.explain("publish_artifact", err)
			}
			return nil, artifactOut(m, ""), nil
		})

	mcp.AddTool(srv, &mcp.Tool{Name: "read_artifact", Description: fmt.Sprintf("Read an artifact's text: by name (latest or a version) or by artifact_id. At most %d bytes.", MaxReadBytes),
		Annotations: readOnly("Read an artifact")},
		func(ctx context.Context, _ *mcp.CallToolRequest, in ReadArtifactIn) (*mcp.CallToolResult, *Artifact, error) {
			m, text, err := s.readArtifact(ctx, in)
			if err != nil {
				return nil, nil, err
			}
			return nil, artifactOut(m, text), nil
		})

	mcp.AddTool(srv, &mcp.Tool{Name: "list_artifacts", Description: "List artifact names (with their latest version) starting with a prefix.",
		Annotations: readOnly("List artifacts")},
		func(ctx context.Context, _ *mcp.CallToolRequest, in ListArtifactsIn) (*mcp.CallToolResult, *ListArtifactsOut, error) {
			l, err := c.ListArtifacts(ctx, tenant, client.ListArtifactsOptions{Prefix: in.Prefix, Limit: in.Limit, PageToken: in.PageToken})
			if err != nil {
				return nil, nil, s.explain("list_artifacts", err)
			}
			out := &ListArtifactsOut{Artifacts: l.Artifacts, NextPageToken: l.NextPageToken}
			if out.Artifacts == nil {
				out.Artifacts = []client.ArtifactSummary{}
			}
			return nil, out, nil
		})

	mcp.AddTool(srv, &mcp.Tool{Name: "set_ref", Description: "Point a named ref at an artifact, optionally only if it is absent (expect_absent: approve exactly once) or points at a given artifact. Fenced by your claim when you hold one.",
		Annotations: write("Set a ref", true, true)},
		func(ctx context.Context, _ *mcp.CallToolRequest, in SetRefIn) (*mcp.CallToolResult, *Ref, error) {
			fence, err := s.fence()
			if err != nil {
				return nil, nil, err
			}
			r, err := c.SetRef(ctx, tenant, in.Ref, client.SetRefRequest{ArtifactID: in.ArtifactID, ExpectAbsent: in.ExpectAbsent, Expect: in.ExpectArtifactID, Fence: fence})
			if err != nil {
				return nil, nil, s.explain("set_ref", err)
			}
			return nil, refOut(r), nil
		})

	mcp.AddTool(srv, &mcp.Tool{Name: "get_ref", Description: "Read which artifact a ref points at.", Annotations: readOnly("Get a ref")},
		func(ctx context.Context, _ *mcp.CallToolRequest, in GetRefIn) (*mcp.CallToolResult, *Ref, error) {
			r, err := c.GetRef(ctx, tenant, in.Ref)
			if err != nil {
				return nil, nil, s.explain("get_ref", err)
			}
			return nil, refOut(r), nil
		})

	mcp.AddTool(srv, &mcp.Tool{Name: "write_checkpoint", Description: "Save a checkpoint of a thread's state (to resume later). Fenced by your claim when you hold one.",
		Annotations: write("Write a checkpoint", false, false)},
		func(ctx context.Context, _ *mcp.CallToolRequest, in WriteCheckpointIn) (*mcp.CallToolResult, *Checkpoint, error) {
			data, err := encode(in.Data)
			if err != nil {
				return nil, nil, err
			}
			if data == nil {
				data = json.RawMessage("null")
			}
			meta, err := encode(in.Metadata)
			if err != nil {
				return nil, nil, err
			}
			fence, err := s.fence()
			if err != nil {
				return nil, nil, err
			}
			id := in.CheckpointID
			if id == "" {
				id = client.NewIdempotencyKey() // UUIDv7: time-ordered
			}
			cp, err := c.PutCheckpoint(ctx, tenant, in.Thread, id, client.PutCheckpointRequest{NS: in.Namespace, Data: data, Metadata: meta, Fence: fence})
			if err != nil {
				return nil, nil, s.explain("write_checkpoint", err)
			}
			return nil, checkpointOut(cp), nil
		})

	mcp.AddTool(srv, &mcp.Tool{Name: "read_checkpoint", Description: "Read a thread's latest checkpoint, or one by id.", Annotations: readOnly("Read a checkpoint")},
		func(ctx context.Context, _ *mcp.CallToolRequest, in ReadCheckpointIn) (*mcp.CallToolResult, *Checkpoint, error) {
			var cp *client.Checkpoint
			var err error
			if in.CheckpointID == "" {
				cp, err = c.LatestCheckpointNS(ctx, tenant, in.Thread, in.Namespace)
			} else {
				cp, err = c.GetCheckpointNS(ctx, tenant, in.Thread, in.Namespace, in.CheckpointID)
			}
			if err != nil {
				return nil, nil, s.explain("read_checkpoint", err)
			}
			return nil, checkpointOut(cp), nil
		})

	mcp.AddTool(srv, &mcp.Tool{Name: "kv_get", Description: "Read an entry of the shared knowledge store.", Annotations: readOnly("Read a KV entry")},
		func(ctx context.Context, _ *mcp.CallToolRequest, in KVGetIn) (*mcp.CallToolResult, *KVEntry, error) {
			e, err := c.GetKV(ctx, tenant, in.Namespace, in.Key)
			if err != nil {
				return nil, nil, s.explain("kv_get", err)
			}
			return nil, kvOut(e), nil
		})

	mcp.AddTool(srv, &mcp.Tool{Name: "kv_put", Description: "Write an entry of the shared knowledge store, optionally only at a version (0: only if absent). Fenced by your claim when you hold one.",
		Annotations: write("Write a KV entry", true, true)},
		func(ctx context.Context, _ *mcp.CallToolRequest, in KVPutIn) (*mcp.CallToolResult, *KVEntry, error) {
			v, err := encode(in.Value)
			if err != nil {
				return nil, nil, err
			}
			if v == nil {
				v = json.RawMessage("null")
			}
			fence, err := s.fence()
			if err != nil {
				return nil, nil, err
			}
			e, err := c.PutKV(ctx, tenant, in.Namespace, in.Key, client.PutKVRequest{Value: v, ExpectVersion: in.ExpectVersion,
				TTL: time.Duration(in.TTLSeconds) * time.Second, Fence: fence})
			if err != nil {
				return nil, nil, s.explain("kv_put", err)
			}
			return nil, kvOut(e), nil
		})

	mcp.AddTool(srv, &mcp.Tool{Name: "kv_search", Description: "List the entries of a knowledge-store namespace whose keys start with a prefix.", Annotations: readOnly("Search the KV store")},
		func(ctx context.Context, _ *mcp.CallToolRequest, in KVSearchIn) (*mcp.CallToolResult, *KVSearchOut, error) {
			l, err := c.ListKV(ctx, tenant, in.Namespace, client.ListKVOptions{Prefix: in.Prefix, Limit: in.Limit, PageToken: in.PageToken})
			if err != nil {
				return nil, nil, s.explain("kv_search", err)
			}
			out := &KVSearchOut{Entries: []KVEntry{}, NextPageToken: l.NextPageToken}
			for i := range l.Entries {
				out.Entries = append(out.Entries, *kvOut(&l.Entries[i]))
			}
			return nil, out, nil
		})

	mcp.AddTool(srv, &mcp.Tool{Name: "op_begin", Description: "Record that you are about to do an external side effect (send a mail, post a page), so that a retry finds it instead of doing it twice. Fenced by your claim when you hold one.",
		Annotations: write("Begin an operation", true, false)},
		func(ctx context.Context, _ *mcp.CallToolRequest, in OpBeginIn) (*mcp.CallToolResult, *OpBeginOut, error) {
			digest, err := client.ParamsDigest(in.Params)
			if err != nil {
				return nil, nil, fmt.Errorf("op_begin: params: %v", err)
			}
			fence, err := s.fence()
			if err != nil {
				return nil, nil, err
			}
			req := client.BeginOpRequest{Kind: in.Kind, ParamsDigest: digest, Fence: fence}
			if fence != nil {
				req.TaskID = fence.TaskID
			}
			op, created, err := c.BeginOp(ctx, tenant, in.OpID, req)
			if err != nil {
				return nil, nil, s.explain("op_begin", err)
			}
			out := &OpBeginOut{Op: opOut(op), Created: created, Advice: "do the side effect now, then call op_finish"}
			if !created {
				out.Advice = fmt.Sprintf("this op was begun before and is %s: do not repeat a succeeded one; for started or unknown, check the outside world before doing it again", op.State)
			}
			return nil, out, nil
		})

	mcp.AddTool(srv, &mcp.Tool{Name: "op_finish", Description: "Record the outcome of a side effect begun with op_begin: succeeded, failed or unknown. Fenced by your claim when you hold one.",
		Annotations: write("Finish an operation", true, false)},
		func(ctx context.Context, _ *mcp.CallToolRequest, in OpFinishIn) (*mcp.CallToolResult, *Op, error) {
			result, err := encode(in.Result)
			if err != nil {
				return nil, nil, err
			}
			fence, err := s.fence()
			if err != nil {
				return nil, nil, err
			}
			op, err := c.FinishOp(ctx, tenant, in.OpID, client.FinishOpRequest{State: in.State, Result: result, Fence: fence})
			if err != nil {
				return nil, nil, s.explain("op_finish", err)
			}
			o := opOut(op)
			return nil, &o, nil
		})

	s.addWait(srv)
}

// addWait registers wait_for_change.
func (s *Session) addWait(srv *mcp.Server) {
	c, tenant := s.cfg.Client, s.cfg.Tenant
	mcp.AddTool(srv, &mcp.Tool{Name: "wait_for_change", Description: "Wait (up to timeout_seconds) for the next change of tasks, refs, artifacts, kv, checkpoints or ops under a key prefix. Pass the returned cursor as after next time so that no change is missed.",
		Annotations: readOnly("Wait for a change")},
		func(ctx context.Context, _ *mcp.CallToolRequest, in WaitIn) (*mcp.CallToolResult, *WaitOut, error) {
			d := DefaultChange
			if in.TimeoutSeconds != 0 {
				d = time.Duration(in.TimeoutSeconds) * time.Second
			}
			if d <= 0 || d > MaxChangeWait {
				return nil, nil, fmt.Errorf("wait_for_change: timeout_seconds must be 1 to %d, got %d", int(MaxChangeWait/time.Second), in.TimeoutSeconds)
			}
			wctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			opts := client.WatchOptions{Resources: in.Resources, Prefix: in.Prefix, AfterID: in.After}
			if in.After == "" {
				// From now: the commit index a node knows now, so that the
				// cursor given back means "after this" even when nothing
				// changes, and the next call misses nothing in between.
				var rz struct {
					CommitIndex uint64 `json:"commit_index"`
				}
				if _, err := c.Do(wctx, http.MethodGet, "/readyz", nil, &rz); err != nil {
					return nil, nil, s.explain("wait_for_change", err)
				}
				opts.FromIndex = rz.CommitIndex
			}
			w := c.Watch(wctx, tenant, opts)
			defer w.Close()
			ev, err := w.Next(wctx)
			out := &WaitOut{Events: []Event{}, Cursor: in.After}
			if out.Cursor == "" && opts.FromIndex != 0 {
				out.Cursor = fmt.Sprint(opts.FromIndex)
			}
			switch {
			case err == nil:
				out.Changed = true
				out.Cursor = ev.ID
				out.Events = append(out.Events, Event{Resource: ev.Resource, Key: ev.Key, Type: ev.Type, Value: raw(ev.Value)})
			case wctx.Err() != nil && ctx.Err() == nil:
				// Timed out: nothing changed.
			default:
				return nil, nil, s.explain("wait_for_change", err)
			}
			return nil, out, nil
		})
}

func (s *Session) readArtifact(ctx context.Context, in ReadArtifactIn) (*client.Manifest, string, error) {
	c, tenant := s.cfg.Client, s.cfg.Tenant
	var m *client.Manifest
	var err error
	switch {
	case in.ArtifactID != "" && in.Name != "":
		return nil, "", errors.New("read_artifact: give name or artifact_id, not both")
	case in.ArtifactID != "":
		m, err = c.GetArtifactByID(ctx, tenant, in.ArtifactID)
	case in.Name != "":
		m, err = c.GetManifest(ctx, tenant, in.Name, in.Version)
	default:
		return nil, "", errors.New("read_artifact: give name or artifact_id")
	}
	if err != nil {
		return nil, "", s.explain("read_artifact", err)
	}
	if m.Size > MaxReadBytes {
		return nil, "", fmt.Errorf("read_artifact: %s version %d is %d bytes, over the %d a tool answer carries; read it with baton artifact get", m.Name, m.Version, m.Size, MaxReadBytes)
	}
	var buf bytes.Buffer
	if _, err := c.DownloadArtifact(ctx, tenant, m.Name, m.Version, &buf); err != nil {
		return nil, "", s.explain("read_artifact", err)
	}
	if !utf8.Valid(buf.Bytes()) {
		return nil, "", fmt.Errorf("read_artifact: %s version %d (%s) is not text; read it with baton artifact get", m.Name, m.Version, m.MediaType)
	}
	return m, buf.String(), nil
}

func artifactOut(m *client.Manifest, text string) *Artifact {
	return &Artifact{ArtifactID: m.ArtifactID, Name: m.Name, Version: m.Version, Size: m.Size, Digest: m.Digest,
		MediaType: m.MediaType, TaskID: m.TaskID, Text: text}
}

func refOut(r *client.Ref) *Ref {
	return &Ref{Ref: r.Ref, ArtifactID: r.ArtifactID, Name: r.Name, Version: r.Version, Revision: r.Revision}
}

func checkpointOut(cp *client.Checkpoint) *Checkpoint {
	return &Checkpoint{Thread: cp.ThreadID, Namespace: cp.CheckpointNS, CheckpointID: cp.CheckpointID, ParentID: cp.ParentID,
		Data: raw(cp.Data), Metadata: raw(cp.Metadata), CreatedAt: cp.CreatedAt.UTC().Format(time.RFC3339Nano)}
}

func kvOut(e *client.KVEntry) *KVEntry {
	out := &KVEntry{Namespace: e.Namespace, Key: e.Key, Value: raw(e.Value), Version: e.Version}
	if e.ExpiresAt != nil {
		out.ExpiresAt = e.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	return out
}

func opOut(op *client.Op) Op {
	return Op{OpID: op.OpID, Kind: op.Kind, TaskID: op.TaskID, State: op.State, Result: raw(op.Result)}
}
