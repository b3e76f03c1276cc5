package wire

import "encoding/json"

// Request bodies of the API (docs/api.md), each defined once: the server
// decodes them, the SDK encodes them. The SDK's own request types, where
// they differ (durations instead of *_ms fields, plain fields instead of
// tri-state pointers), are converted to these before they are sent.
//
// Pointers are the fields whose absence means something other than their
// zero value; omitempty leaves out what the SDK did not set, and changes
// nothing for the server, which decodes either form.

// Fence guards a write: it applies only if Token is the current fencing
// token of task TaskID in the same tenant, else the write is refused with
// CodeFenced.
type Fence struct {
	TaskID string `json:"task_id"`
	Token  uint64 `json:"token"`
}

// Grant allows a principal the actions on one resource's objects whose
// names start with Prefix. It is also the state machine's stored form of a
// grant, so its fields and tags are part of the replicated format: never
// rename them or add omitempty.
type Grant struct {
	Resource string   `json:"resource"`
	Prefix   string   `json:"prefix"`
	Actions  []string `json:"actions"`
}

// KVPut is the body of PUT /v1/tenants/{t}/kv/{ns}/{key}.
type KVPut struct {
	Value         json.RawMessage `json:"value"`
	ExpectVersion *uint64         `json:"expect_version,omitempty"`
	TTLMs         int64           `json:"ttl_ms,omitempty"` // 0: no expiry
	Fence         *Fence          `json:"fence,omitempty"`
}

// OpBegin is the body of POST /v1/tenants/{t}/ops/{op_id}/begin.
type OpBegin struct {
	Kind         string `json:"kind"`
	ParamsDigest string `json:"params_digest"`
	TaskID       string `json:"task_id,omitempty"`
	Fence        *Fence `json:"fence,omitempty"`
}

// OpFinish is the body of POST /v1/tenants/{t}/ops/{op_id}/finish.
type OpFinish struct {
	State  string          `json:"state"`
	Result json.RawMessage `json:"result,omitempty"`
	Fence  *Fence          `json:"fence,omitempty"`
}

// RefSet is the body of PUT /v1/tenants/{t}/refs/{ref}. ExpectArtifactID
// nil sets the ref unconditionally; "" requires it to be absent.
type RefSet struct {
	ArtifactID       string  `json:"artifact_id"`
	ExpectArtifactID *string `json:"expect_artifact_id,omitempty"`
	Fence            *Fence  `json:"fence,omitempty"`
}

// PrincipalCreate is the body of POST /v1/tenants/{t}/principals.
type PrincipalCreate struct {
	Name   string  `json:"name"`
	Grants []Grant `json:"grants"`
}

// Quota is the body of PUT /v1/tenants/{t}/quota. MaxBytes and MaxKeys
// are required (0: no limit); RatePerSec and Burst, when given, set the
// tenant's request rate limit.
type Quota struct {
	MaxBytes   *int64   `json:"max_bytes"`
	MaxKeys    *int64   `json:"max_keys"`
	RatePerSec *float64 `json:"rate_per_sec,omitempty"`
	Burst      *int64   `json:"burst,omitempty"`
}

// MemberAdd is the body of POST /v1/cluster/members. Voter nil is true.
type MemberAdd struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	Voter    *bool  `json:"voter,omitempty"`
}

// MemberMeta is the body of PUT /v1/cluster/members/{id}/meta: the
// addresses a node publishes for itself (its id is the path's).
type MemberMeta struct {
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
}

// Transfer is the body of POST /v1/cluster/transfer-leadership.
type Transfer struct {
	To string `json:"to,omitempty"`
}

// Transaction ops (POST /v1/tenants/{t}/txn): each op is an object with
// "op" naming it and the fields of its request beside it. The SDK leaves
// Op empty and sets "op" itself (client.TxnOp).

// TxnKVPut is a "kv.put" op.
type TxnKVPut struct {
	Op        string `json:"op,omitempty"`
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	KVPut
}

// TxnKVDelete is a "kv.delete" op.
type TxnKVDelete struct {
	Op            string  `json:"op,omitempty"`
	Namespace     string  `json:"namespace"`
	Key           string  `json:"key"`
	ExpectVersion *uint64 `json:"expect_version,omitempty"`
	Fence         *Fence  `json:"fence,omitempty"`
}

// TxnRefSet is a "ref.set" op.
type TxnRefSet struct {
	Op  string `json:"op,omitempty"`
	Ref string `json:"ref"`
	RefSet
}

// Tasks (docs/api.md "Tasks"). A time travels as an RFC 3339 string, a
// duration as integer milliseconds in a *_ms field.

// Availability is when a queue claim may take a task: an RFC 3339 time
// (AvailableAt) or a delay from the leader's time of the write (DelayMs),
// not both. It is embedded in the bodies that take it.
type Availability struct {
	AvailableAt string `json:"available_at,omitempty"`
	DelayMs     int64  `json:"delay_ms,omitempty"`
}

// TaskCreate is the body of POST /v1/tenants/{t}/tasks. TaskID "" is
// generated; Priority nil is 0; zero lifecycle fields take the queue's
// policy or the server's defaults.
type TaskCreate struct {
	TaskID           string          `json:"task_id,omitempty"`
	Queue            string          `json:"queue"`
	Status           string          `json:"status,omitempty"`
	Priority         *int64          `json:"priority,omitempty"`
	Payload          json.RawMessage `json:"payload,omitempty"`
	MaxAttempts      uint64          `json:"max_attempts,omitempty"`
	BackoffInitialMs int64           `json:"backoff_initial_ms,omitempty"`
	BackoffMaxMs     int64           `json:"backoff_max_ms,omitempty"`
	Availability
	RetentionMs int64 `json:"retention_ms,omitempty"` // 0: the queue's
	// DependsOn: task ids of the tenant that must be done before the task
	// is claimable; DependencyPolicy ("fail", "cancel" or "ignore"; ""
	// is fail) is what a dependency that ends otherwise does to it.
	DependsOn        []string `json:"depends_on,omitempty"`
	DependencyPolicy string   `json:"dependency_policy,omitempty"`
	// ConcurrencyKey groups the task for its queue's
	// concurrency_key_limit.
	ConcurrencyKey string `json:"concurrency_key,omitempty"`
}

// TaskClaim is the body of POST /v1/tenants/{t}/tasks/{id}/claim.
type TaskClaim struct {
	Owner         string  `json:"owner"`
	LeaseMs       int64   `json:"lease_ms"`
	ExpectStatus  *string `json:"expect_status,omitempty"`
	ExpectVersion *uint64 `json:"expect_version,omitempty"`
	SetStatus     *string `json:"set_status,omitempty"`
}

// QueueClaim is the body of POST /v1/tenants/{t}/queues/{queue}/claim.
// Statuses empty is ["pending"]; WaitMs 0 answers at once.
type QueueClaim struct {
	Owner     string   `json:"owner"`
	LeaseMs   int64    `json:"lease_ms"`
	Statuses  []string `json:"statuses,omitempty"`
	SetStatus *string  `json:"set_status,omitempty"`
	WaitMs    int64    `json:"wait_ms,omitempty"`
	// Max, when not 0, claims up to Max tasks in one command, answered
	// {"tasks": [...]} (1 to fsm.MaxClaimBatch).
	Max int64 `json:"max,omitempty"`
}

// TaskRenew is the body of POST /v1/tenants/{t}/tasks/{id}/renew.
// FencingToken is required.
type TaskRenew struct {
	FencingToken *uint64 `json:"fencing_token"`
	LeaseMs      int64   `json:"lease_ms"`
}

// TaskUpdate is the body of POST /v1/tenants/{t}/tasks/{id}/update. Nil
// fields are left alone; Availability goes with Release true.
type TaskUpdate struct {
	FencingToken  *uint64         `json:"fencing_token,omitempty"`
	ExpectVersion *uint64         `json:"expect_version,omitempty"`
	ExpectStatus  *string         `json:"expect_status,omitempty"`
	Status        *string         `json:"status,omitempty"`
	ArtifactID    *string         `json:"artifact_id,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	Release       *bool           `json:"release,omitempty"`
	// Unstarted, with release and the lease's fencing_token: the task was
	// claimed and never started; the release gives back the claim's
	// attempt and the status its set_status replaced (version 6).
	Unstarted bool `json:"unstarted,omitempty"`
	Availability
}

// TaskFail is the body of POST /v1/tenants/{t}/tasks/{id}/fail.
// FencingToken is required.
type TaskFail struct {
	FencingToken *uint64 `json:"fencing_token"`
	Error        string  `json:"error,omitempty"`
	NonRetryable bool    `json:"non_retryable,omitempty"`
	Status       string  `json:"status,omitempty"` // "": pending
}

// TaskRetry is the body of POST /v1/tenants/{t}/tasks/{id}/retry.
type TaskRetry struct {
	ExpectVersion *uint64 `json:"expect_version,omitempty"`
	Status        string  `json:"status,omitempty"` // "": pending
	Availability
}

// TaskCancel is the body of POST /v1/tenants/{t}/tasks/{id}/cancel. With
// FencingToken the lease's holder cancels, or acknowledges a requested
// cancellation. Reason (at most 4,096 bytes) becomes the task's
// last_error.
type TaskCancel struct {
	FencingToken  *uint64 `json:"fencing_token,omitempty"`
	ExpectVersion *uint64 `json:"expect_version,omitempty"`
	Reason        string  `json:"reason,omitempty"`
}

// WaitpointCreate is the body of POST /v1/tenants/{t}/waitpoints;
// WaitpointID "" is generated.
type WaitpointCreate struct {
	WaitpointID string `json:"waitpoint_id,omitempty"`
	TimeoutMs   int64  `json:"timeout_ms"`
}

// WaitpointComplete is the body of POST
// /v1/tenants/{t}/waitpoints/{id}/complete.
type WaitpointComplete struct {
	Payload json.RawMessage `json:"payload"`
}

// TaskWait is the body of POST /v1/tenants/{t}/tasks/{id}/wait: the
// holder parks its task on a waitpoint.
type TaskWait struct {
	FencingToken *uint64 `json:"fencing_token"`
	WaitpointID  string  `json:"waitpoint_id"`
}

// ScheduleCreate is the body of POST /v1/tenants/{t}/schedules: a cron
// expression (in TimeZone, "" is UTC) or a fixed IntervalMs, one of them.
type ScheduleCreate struct {
	ScheduleID string          `json:"schedule_id"`
	Queue      string          `json:"queue"`
	Cron       string          `json:"cron,omitempty"`
	TimeZone   string          `json:"timezone,omitempty"`
	IntervalMs int64           `json:"interval_ms,omitempty"`
	CatchUp    string          `json:"catch_up,omitempty"`
	Priority   int64           `json:"priority,omitempty"`
	Payload    json.RawMessage `json:"payload,omitempty"`
}

// QueuePolicy is the body of PUT /v1/tenants/{t}/queues/{queue}/policy,
// and the shape of the policy the server answers (a record the state
// machine renders, fsm.QueuePolicy, with the same members).
type QueuePolicy struct {
	MaxAttempts      uint64 `json:"max_attempts"`
	BackoffInitialMs int64  `json:"backoff_initial_ms"`
	BackoffMaxMs     int64  `json:"backoff_max_ms"`
	RetentionMs      int64  `json:"retention_ms,omitempty"`
	// Flow control: at most MaxLeased tasks leased at once, claims at
	// ClaimsPerSecond with a burst of ClaimBurst, at most
	// ConcurrencyKeyLimit leased tasks per concurrency key (0: none).
	MaxLeased           int64 `json:"max_leased,omitempty"`
	ClaimsPerSecond     int64 `json:"claims_per_second,omitempty"`
	ClaimBurst          int64 `json:"claim_burst,omitempty"`
	ConcurrencyKeyLimit int64 `json:"concurrency_key_limit,omitempty"`
}

// Txn is the body of POST /v1/tenants/{t}/txn: 1 to fsm.MaxTxnOps ops,
// each one of the Txn* objects below, told apart by its "op".
type Txn struct {
	Ops []json.RawMessage `json:"ops"`
}

// TxnTaskCreate is a "task.create" op.
type TxnTaskCreate struct {
	Op string `json:"op,omitempty"`
	TaskCreate
}

// TxnTaskClaim is a "task.claim" op: the task is named by TaskID.
type TxnTaskClaim struct {
	Op     string `json:"op,omitempty"`
	TaskID string `json:"task_id"`
	TaskClaim
}

// TxnTaskUpdate is a "task.update" op: the task is named by TaskID.
type TxnTaskUpdate struct {
	Op     string `json:"op,omitempty"`
	TaskID string `json:"task_id"`
	TaskUpdate
}

// Artifacts and chunks (docs/api.md "Artifacts").

// ChunkRef names one chunk of content: its digest and size in bytes. It is
// also the state machine's stored form (fsm.ChunkRef), so its fields and
// tags are part of the replicated format: never rename them.
type ChunkRef struct {
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// ArtifactPublish is the body of POST
// /v1/tenants/{t}/artifacts/{name}/versions. Size is required.
type ArtifactPublish struct {
	Chunks    []ChunkRef      `json:"chunks"`
	Digest    string          `json:"digest"`
	Size      *int64          `json:"size"`
	MediaType string          `json:"media_type,omitempty"`
	Sources   []string        `json:"sources,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	TaskID    string          `json:"task_id,omitempty"`
	Fence     *Fence          `json:"fence,omitempty"`
}

// ArtifactPolicy is the body of PUT /v1/tenants/{t}/artifact-policies.
// Both fields are required; KeepLast 0 clears the prefix's policy.
type ArtifactPolicy struct {
	Prefix   *string `json:"prefix"`
	KeepLast *uint64 `json:"keep_last"`
}

// ChunksMissing is the body of POST /v1/tenants/{t}/chunks/missing.
type ChunksMissing struct {
	Digests []string `json:"digests"`
}

// ChunkHeld is the body of POST
// /v1/internal/tenants/{t}/chunks/{digest}/held, which the node that
// received a chunk sends the leader once a majority holds it.
type ChunkHeld struct {
	Size int64 `json:"size"`
}

// Checkpoints (docs/api.md "Checkpoints").

// CheckpointPut is the body of PUT
// /v1/tenants/{t}/threads/{thread}/checkpoints/{id}: Data, or DataChunks
// for data held in chunks, not both. ParentID nil is a namespace's first
// checkpoint.
type CheckpointPut struct {
	ParentID   *string         `json:"parent_id,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`
	Fork       bool            `json:"fork,omitempty"`
	Fence      *Fence          `json:"fence,omitempty"`
	DataChunks []ChunkRef      `json:"data_chunks,omitempty"`
	// BlobVersions names the channel values the checkpoint holds, by
	// version; Blobs brings those of them that are new to the namespace.
	BlobVersions map[string]string `json:"blob_versions,omitempty"`
	Blobs        []CheckpointBlob  `json:"blobs,omitempty"`
}

// CheckpointBlob is one channel value of a checkpoint put: bytes of a
// serializer's type (LangGraph's serde), base64 in JSON, or the chunks
// that hold them (Chunks, uploaded first) for a large value.
type CheckpointBlob struct {
	Channel string     `json:"channel"`
	Version string     `json:"version"`
	Type    string     `json:"type"`
	Data    []byte     `json:"b64"`
	Chunks  []ChunkRef `json:"chunks,omitempty"`
}

// CheckpointWrites is the body of PUT
// /v1/tenants/{t}/threads/{thread}/checkpoints/{id}/writes/{task_id}: a
// task's pending writes (LangGraph's put_writes), and its task path.
type CheckpointWrites struct {
	Writes   []CheckpointWrite `json:"writes"`
	TaskPath string            `json:"task_path,omitempty"`
	Fence    *Fence            `json:"fence,omitempty"`
}

// CheckpointWrite is one pending write: the value a task wrote to a
// channel, at index Idx of the task's writes (nil: the write's position
// in Writes). Negative indexes are LangGraph's special channels. The
// value is JSON (Value), or bytes of a serializer's type (Type and Data:
// base64 in JSON, bin in application/msgpack).
type CheckpointWrite struct {
	Idx     *int64          `json:"idx,omitempty"`
	Channel string          `json:"channel"`
	Value   json.RawMessage `json:"value"`
	Type    string          `json:"type,omitempty"`
	Data    []byte          `json:"b64,omitempty"`
}

// ThreadCopy is the body of POST /v1/tenants/{t}/threads/{thread}/copy.
type ThreadCopy struct {
	Target string `json:"target"`
	Fence  *Fence `json:"fence,omitempty"`
}

// ThreadPrune is the body of POST /v1/tenants/{t}/checkpoints/prune;
// Strategy is "keep_latest" or "delete".
type ThreadPrune struct {
	Threads  []string `json:"threads"`
	Strategy string   `json:"strategy"`
	Fence    *Fence   `json:"fence,omitempty"`
}

// CheckpointPolicy is the body of PUT /v1/tenants/{t}/checkpoint-policies:
// a retention policy for the threads whose id starts with Prefix (both
// bounds 0 clear it).
type CheckpointPolicy struct {
	Prefix   *string `json:"prefix"`
	KeepLast uint64  `json:"keep_last"`
	MaxAgeMs int64   `json:"max_age_ms"`
}

// DeleteRuns is the body of POST /v1/tenants/{t}/checkpoints/delete-runs.
type DeleteRuns struct {
	RunIDs []string `json:"run_ids"`
	Fence  *Fence   `json:"fence,omitempty"`
}

// ThreadDelete is the body of DELETE /v1/tenants/{t}/threads/{thread}, which
// may also have none.
type ThreadDelete struct {
	Fence *Fence `json:"fence,omitempty"`
}

// Sessions and internal routes.

// SessionOpen is the body of POST /v1/sessions: an empty object, or no
// body at all.
type SessionOpen struct{}

// Failpoints is the body of PUT /v1/internal/failpoints and the answer to
// it and to GET (nodes started with --failpoints; the chaos suite's).
type Failpoints struct {
	CutRaftTo     []string `json:"cut_raft_to"`
	ClockOffsetMs int64    `json:"clock_offset_ms"`
}
