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
}

export interface QueueStats {
  queue: string;
  tasks: number;
  by_status: Record<string, number>;
  waiting: number;
  due_later: number;
  dead: number;
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
