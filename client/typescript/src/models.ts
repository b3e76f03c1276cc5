// The API's objects, as the server answers them (docs/api.md): field names
// are the wire's. Fencing tokens and KV versions are log positions
// (index << 16 | n); they stay exact in a JavaScript number while the log
// index is below 2^37.

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** A write guard on a task's lease: {"task_id", "token"}. */
export interface Fence {
  task_id: string;
  token: number;
}

export interface Task {
  tenant_id: string;
  task_id: string;
  queue: string;
  status: string;
  owner: string;
  lease_until: string | null;
  fencing_token: number;
  version: number;
  attempt: number;
  priority: number;
  artifact_id: string;
  payload: unknown;
  result: unknown;
  created_at: string;
  updated_at: string;
  max_attempts: number;
  backoff_initial_ms: number;
  backoff_max_ms: number;
  available_at: string | null;
  last_error: string;
  failed_at: string | null;
  retention_ms?: number;
  expires_at?: string;
  /** Someone cancelled the task while it was leased: its holder should stop (absent unless set). */
  cancel_requested?: boolean;
  /** Dependencies (createTask's depends_on): absent for a task created without any. */
  depends_on_count?: number;
  /** Those not resolved yet; no claim takes the task while above 0. */
  dependencies_left?: number;
  dependency_policy?: DependencyPolicy;
  /** In a claim's answer only: the first 100 dependencies with their outputs. */
  dependencies?: Dependency[];
  dependencies_truncated?: boolean;
  /** The waitpoint the task was last parked on (parkTask), and parked while it waits there. */
  waitpoint_id?: string;
  parked?: boolean;
  /** In a claim's answer of a task that was parked: the waitpoint's outcome. */
  waitpoint?: WaitpointOutcome;
  concurrency_key?: string;
}

/** What a dependency that ends dead or cancelled (or is deleted) does to its dependent. */
export type DependencyPolicy = "fail" | "cancel" | "ignore";

/** One dependency of a task, with its outcome once resolved ("deleted" for a deleted one). */
export interface Dependency {
  task_id: string;
  resolved: boolean;
  status: string;
  result: unknown;
  artifact_id: string;
}

/** Something to wait for: pending until completed once with a payload, or timed_out. */
export interface Waitpoint {
  tenant_id: string;
  waitpoint_id: string;
  state: "pending" | "completed" | "timed_out";
  payload: unknown;
  version: number;
  /** The task parked on it, "" if none. */
  task_id: string;
  created_at: string;
  timeout_at: string;
  resolved_at: string | null;
}

export interface WaitpointOutcome {
  waitpoint_id: string;
  state: "completed" | "timed_out";
  payload: unknown;
}

/** Which ticks missed while no leader ticked create tasks. */
export type CatchUp = "latest" | "all" | "skip";

/**
 * A task in `queue` at every tick of `cron` (in `timezone`) or of
 * `interval_ms`, exactly once per tick: its id is
 * `<schedule_id>:<tick in Unix ms>` (scheduleTaskId).
 */
export interface Schedule {
  tenant_id: string;
  schedule_id: string;
  queue: string;
  cron?: string;
  timezone?: string;
  interval_ms?: number;
  catch_up: CatchUp;
  priority: number;
  payload: unknown;
  paused: boolean;
  next_at: string;
  last_tick_at: string | null;
  /** The tasks it created. */
  ticks: number;
  version: number;
  created_at: string;
  updated_at: string;
}

export interface QueueStats {
  queue: string;
  tasks: number;
  by_status: Record<string, number>;
  waiting: number;
  due_later: number;
  dead: number;
  /** Under a lease live at as_of, whatever their status. */
  running: number;
  /** With an owner whose lease ran out by as_of. */
  lease_expired: number;
  /** Without a lease, waiting on dependencies. */
  blocked: number;
  oldest_pending_at: string | null;
  oldest_pending_age_ms: number;
  claims_per_minute: number;
  as_of: string;
}

export interface QueuePolicy {
  max_attempts: number;
  backoff_initial_ms: number;
  backoff_max_ms: number;
  retention_ms?: number;
  /** Flow control (absent or 0: no limit): tasks leased at once. */
  max_leased?: number;
  /** Claims a second, with a burst of claim_burst (default 1). */
  claims_per_second?: number;
  claim_burst?: number;
  /** Leased tasks per concurrency_key. */
  concurrency_key_limit?: number;
}

export interface ChunkRef {
  digest: string;
  size: number;
}

export interface Manifest {
  artifact_id: string;
  name: string;
  version: number;
  digest: string;
  size: number;
  chunks: ChunkRef[];
  media_type?: string;
  sources?: string[];
  metadata?: unknown;
  task_id?: string;
  fencing_token: number;
  created_by: string;
  created_at: string;
}

export interface ArtifactSummary {
  name: string;
  latest_version: number;
  versions: number;
}

export interface ArtifactPolicy {
  prefix: string;
  keep_last: number;
}

export interface Ref {
  ref: string;
  artifact_id: string;
  name: string;
  version: number;
  revision: number;
  updated_at: string;
}

export interface PendingWrite {
  task_id: string;
  task_path?: string;
  idx: number;
  channel: string;
  value: unknown;
}

/** A channel value stored by (channel, version) of a namespace. */
export interface Blob {
  channel: string;
  version: string;
  type: string;
  b64: string;
}

export interface Checkpoint {
  thread_id: string;
  checkpoint_ns?: string;
  checkpoint_id: string;
  parent_id?: string;
  data: unknown;
  data_chunks?: ChunkRef[];
  metadata: unknown;
  created_at: string;
  pending_writes?: PendingWrite[];
  blobs?: Blob[];
  blob_versions?: Record<string, string>;
}

export interface CheckpointPolicy {
  prefix: string;
  keep_last: number;
  max_age_ms: number;
}

export interface KVEntry {
  namespace: string;
  key: string;
  value: unknown;
  version: number;
  updated_at: string;
  expires_at: string | null;
}

export interface Op {
  op_id: string;
  kind: string;
  params_digest: string;
  task_id?: string;
  state: "started" | "succeeded" | "failed" | "unknown";
  result: unknown;
  created_at: string;
  updated_at: string;
}

export interface Principal {
  name: string;
  token?: string;
  grants: Grant[];
}

export interface Grant {
  resource: string;
  prefix: string;
  actions: string[];
}

export interface Quota {
  tenant: string;
  max_bytes: number;
  max_keys: number;
  rate_per_sec: number;
  burst: number;
  used_bytes: number;
  used_keys: number;
}

export interface Member {
  id: string;
  raft_addr: string;
  http_addr: string;
  voter?: boolean;
  state?: string;
}

export interface ClusterStatus {
  node_id: string;
  state: string;
  leader: { id: string; http_addr: string; raft_addr: string };
  term: number;
  commit_index: number;
  applied_index: number;
  state_digest: string;
  members: Member[];
  [k: string]: unknown;
}

export interface WatchEvent {
  /** INDEX or INDEX.POS: pass the last one as `afterId` to resume. */
  id: string;
  index: number;
  resource: string;
  key: string;
  type: "put" | "delete";
  value?: unknown;
}

/** A page of a list, with the token of the next (absent or "" on the last). */
export interface Page<T> {
  items: T[];
  nextPageToken: string;
  /** X-Baton-Index of the answer. */
  index: number;
}
