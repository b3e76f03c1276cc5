// BatonClient: every resource of the HTTP API (docs/api.md), over the
// Transport's failover, retries and client sessions.

import { readFileSync, createReadStream, createWriteStream, promises as fsp } from "node:fs";
import { createHash } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { chunksOf, split } from "./cdc.js";
import { BatonError, DigestMismatch, InvalidArgument, NotFound, Unavailable } from "./errors.js";
import type {
  ArtifactPolicy, ArtifactSummary, CatchUp, Checkpoint, CheckpointPolicy, ChunkRef, ClusterStatus, Dependency,
  DependencyPolicy, Fence, Grant, KVEntry, Manifest, Member, Op, Page, PendingWrite, Principal, QueuePolicy, QueueStats,
  Quota, Ref, Schedule, Task, Blob, Waitpoint,
} from "./models.js";
import {
  Backoff, DEFAULT_MAX_RETRY_MS, DEFAULT_TIMEOUT_MS, Transport, checkIdempotencyKey, classify, isWrite,
  newIdempotencyKey, readBody, sleep,
} from "./transport.js";
import type { Answer, Call, Meta } from "./transport.js";
import { Watch, type WatchOptions } from "./watch.js";

export interface ClientOptions {
  /** URLs or host:port (https when a CA is given), a list or one comma-separated string. */
  endpoints?: string | string[];
  /** The admin token or a principal's. */
  token?: string;
  /** A PEM file of the CA that signed the nodes' certificates. */
  caFile?: string;
  /** The PEM itself, instead of caFile. */
  ca?: string | Buffer;
  /** A client certificate (PEM file) for a cluster that requires one (batond --client-ca-file). */
  certFile?: string;
  /** The client certificate's key (PEM file). */
  keyFile?: string;
  /** The client certificate and key themselves, instead of certFile and keyFile. */
  cert?: string | Buffer;
  key?: string | Buffer;
  /** The default tenant of calls that name none. */
  tenant?: string;
  /** Per attempt, in milliseconds (10 s). */
  timeoutMs?: number;
  /** The retry budget of one call, in milliseconds (15 s). */
  maxRetryMs?: number;
  /** false: every write gets a random Idempotency-Key instead of a session place. */
  sessions?: boolean;
  /** Connections per endpoint at most (256). */
  maxSockets?: number;
}

/** Options every call takes. */
export interface CallOptions {
  tenant?: string;
  /** An explicit Idempotency-Key for a write, instead of its session place. */
  idempotencyKey?: string;
  /** ?consistency=stale: the receiving node answers from its own state. */
  stale?: boolean;
  signal?: AbortSignal;
}

export const DEFAULT_ENDPOINTS = "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003";

/** One path segment, percent-encoded (/ too; "." and ".." as %2E). */
export function seg(s: string): string {
  if (s === "." || s === "..") return s.replace(/\./g, "%2E");
  return encodeURIComponent(s);
}

/** A KV key or ref name: segments joined by /. */
export function keyPath(s: string): string {
  return s.split("/").map(seg).join("/");
}

export function query(path: string, params: Record<string, unknown>): string {
  const q: string[] = [];
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null) continue;
    const s = Array.isArray(v) ? v.map(text).join(",") : text(v);
    q.push(`${encodeURIComponent(k)}=${encodeURIComponent(s)}`);
  }
  if (q.length === 0) return path;
  return path + (path.includes("?") ? "&" : "?") + q.join("&");
}

/** A query value or an id as text: JSON for objects. */
export function text(v: unknown): string {
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "boolean" || typeof v === "bigint") return String(v);
  return JSON.stringify(v) ?? "";
}

function compact<T extends Record<string, unknown>>(o: T): Partial<T> {
  const r: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) r[k] = v;
  return r as Partial<T>;
}

export function sha256(b: Uint8Array): string {
  return "sha256:" + createHash("sha256").update(b).digest("hex");
}

const DIGEST_RE = /^sha256:[0-9a-f]{64}$/;
/** Checkpoint data over this many bytes of JSON goes through the chunk store (as the Go SDK's CheckpointInlineMax). */
export const CHECKPOINT_INLINE_MAX = 512 << 10;
const MISSING_BATCH = 10_000;
const UPLOAD_BATCH_CHUNKS = 64;
const UPLOAD_BATCH_BYTES = 64 << 20;

/** A transaction op: {"op": KIND, ...fields of the single request}. */
export type TxnOp = { op: "task.create" | "task.claim" | "task.update" | "kv.put" | "kv.delete" | "ref.set" } & Record<string, unknown>;

export interface UploadStats {
  size: number;
  chunks: number;
  chunksUploaded: number;
  bytesSent: number;
}

/** What an upload reads: bytes, a file path, or a stream of blocks. */
export type UploadSource = Uint8Array | string | { path: string } | AsyncIterable<Uint8Array>;

export class BatonClient {
  readonly transport: Transport;
  tenant: string | undefined;
  /** Chunk uploads in flight at once. */
  uploadParallel = 4;

  constructor(o: ClientOptions = {}) {
    const eps = o.endpoints ?? DEFAULT_ENDPOINTS;
    const list = (Array.isArray(eps) ? eps : eps.split(",")).map((e) => e.trim()).filter((e) => e !== "");
    const ca = o.ca ?? (o.caFile ? readFileSync(o.caFile) : undefined);
    const cert = o.cert ?? (o.certFile ? readFileSync(o.certFile) : undefined);
    const key = o.key ?? (o.keyFile ? readFileSync(o.keyFile) : undefined);
    if ((cert === undefined) !== (key === undefined)) {
      throw new InvalidArgument("a client certificate needs its key, and a key its certificate (certFile and keyFile)");
    }
    this.transport = new Transport({
      endpoints: list, token: o.token, ca, cert, key, timeoutMs: o.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      maxRetryMs: o.maxRetryMs ?? DEFAULT_MAX_RETRY_MS, sessions: o.sessions ?? true, maxSockets: o.maxSockets,
    });
    this.tenant = o.tenant;
  }

  /**
   * A client configured from BATON_ENDPOINTS, BATON_TOKEN, BATON_CACERT,
   * BATON_CERT, BATON_KEY and BATON_TENANT (what `batond local` prints and
   * the CLI reads); options given override them.
   */
  static fromEnv(overrides: ClientOptions = {}, env: NodeJS.ProcessEnv = process.env): BatonClient {
    const o: ClientOptions = { endpoints: env["BATON_ENDPOINTS"] || DEFAULT_ENDPOINTS };
    if (env["BATON_TOKEN"]) o.token = env["BATON_TOKEN"];
    if (env["BATON_CACERT"]) o.caFile = env["BATON_CACERT"];
    if (env["BATON_CERT"]) o.certFile = env["BATON_CERT"];
    if (env["BATON_KEY"]) o.keyFile = env["BATON_KEY"];
    if (env["BATON_TENANT"]) o.tenant = env["BATON_TENANT"];
    return new BatonClient({ ...o, ...overrides });
  }

  /** Closes the client's idle connections. */
  close(): void {
    this.transport.close();
  }

  get endpoints(): string[] {
    return this.transport.endpoints;
  }

  tenantOf(o?: { tenant?: string | undefined }): string {
    const t = o?.tenant ?? this.tenant;
    if (!t) throw new InvalidArgument("tenant is required: pass { tenant } or set a default tenant on the client");
    return t;
  }

  private tp(o?: { tenant?: string | undefined }): string {
    return "/v1/tenants/" + seg(this.tenantOf(o));
  }

  /** One logical call; the answer's body as JSON (undefined for none) and its metadata. */
  async call<T>(method: string, path: string, body?: unknown, o: CallOptions & { raw?: Uint8Array; wantValue?: boolean; extraTimeoutMs?: number } = {}): Promise<{ value: T; meta: Meta; answer: Answer }> {
    const c: Call = {
      method, path: o.stale ? query(path, { consistency: "stale" }) : path, attempts: 0,
      timeoutMs: this.transport.timeoutMs + (o.extraTimeoutMs ?? 0), wantValue: o.wantValue ?? true, signal: o.signal,
    };
    if (o.raw !== undefined) {
      c.body = Buffer.from(o.raw.buffer, o.raw.byteOffset, o.raw.byteLength);
      c.contentType = "application/octet-stream";
    } else if (body !== undefined) {
      c.body = Buffer.from(JSON.stringify(body));
      c.contentType = "application/json";
    }
    if (o.idempotencyKey !== undefined && isWrite(method)) c.key = checkIdempotencyKey(o.idempotencyKey);
    const answer = await this.transport.send(c);
    const text = answer.status === 204 || answer.body.length === 0 ? "" : answer.body.toString("utf8");
    const value = (text ? JSON.parse(text) : undefined) as T;
    return { value, meta: answer, answer };
  }

  private async v<T>(method: string, path: string, body?: unknown, o: CallOptions & { raw?: Uint8Array; wantValue?: boolean; extraTimeoutMs?: number } = {}): Promise<T> {
    return (await this.call<T>(method, path, body, o)).value;
  }

  /** Any API call, with failover, retries and sessions: the decoded JSON answer (undefined for 204). */
  async request<T = unknown>(method: string, path: string, body?: unknown, o: CallOptions = {}): Promise<T> {
    return this.v<T>(method, path, body, { ...o, wantValue: false });
  }

  // Tenants, principals, quotas, sessions.

  /** Creates a tenant (admin); true when created, false when it existed. */
  async createTenant(name: string, o: CallOptions = {}): Promise<boolean> {
    const r = await this.call("PUT", "/v1/tenants/" + seg(name), undefined, { ...o, wantValue: false });
    return r.meta.status === 201;
  }
  async listTenants(): Promise<string[]> {
    return (await this.v<{ tenants: string[] }>("GET", "/v1/tenants")).tenants ?? [];
  }
  async createPrincipal(name: string, grants: Grant[], o: CallOptions = {}): Promise<Principal> {
    return this.v("POST", this.tp(o) + "/principals", { name, grants }, o);
  }
  async deletePrincipal(name: string, o: CallOptions = {}): Promise<void> {
    await this.v("DELETE", this.tp(o) + "/principals/" + seg(name), undefined, { ...o, wantValue: false });
  }
  async rotatePrincipal(name: string, o: CallOptions = {}): Promise<Principal> {
    return this.v("POST", this.tp(o) + "/principals/" + seg(name) + "/rotate", {}, o);
  }
  async listPrincipals(o: CallOptions = {}): Promise<Principal[]> {
    return (await this.v<{ principals: Principal[] }>("GET", this.tp(o) + "/principals", undefined, o)).principals ?? [];
  }
  async setQuota(q: { max_bytes: number; max_keys: number; rate_per_sec?: number; burst?: number }, o: CallOptions = {}): Promise<Quota> {
    return this.v("PUT", this.tp(o) + "/quota", q, o);
  }
  async getQuota(o: CallOptions = {}): Promise<Quota> {
    return this.v("GET", this.tp(o) + "/quota", undefined, o);
  }

  // Tasks and queues.

  /**
   * Creates a task. With depends_on it is claimable once those tasks are
   * done, and its claim carries their results (Task.dependencies);
   * dependency_policy is what one that ends otherwise does to it.
   * concurrency_key groups it for its queue's concurrency_key_limit.
   */
  async createTask(t: {
    queue: string; task_id?: string; status?: string; priority?: number; payload?: unknown; max_attempts?: number;
    backoff_initial_ms?: number; backoff_max_ms?: number; available_at?: string; delay_ms?: number; retention_ms?: number;
    depends_on?: string[]; dependency_policy?: DependencyPolicy; concurrency_key?: string;
  }, o: CallOptions = {}): Promise<Task> {
    return this.v("POST", this.tp(o) + "/tasks", compact(t), o);
  }
  async getTask(id: string, o: CallOptions = {}): Promise<Task> {
    return this.v("GET", this.tp(o) + "/tasks/" + seg(id), undefined, o);
  }
  async listTasks(f: { queue?: string; status?: string; owner?: string; limit?: number; pageToken?: string } = {}, o: CallOptions = {}): Promise<Page<Task>> {
    const path = query(this.tp(o) + "/tasks", { queue: f.queue, status: f.status, owner: f.owner, limit: f.limit, page_token: f.pageToken || undefined });
    return this.page<Task>(path, "tasks", o);
  }
  async *iterTasks(f: { queue?: string; status?: string; owner?: string; pageSize?: number } = {}, o: CallOptions = {}): AsyncGenerator<Task> {
    let token = "";
    for (;;) {
      const p = await this.listTasks({ ...f, limit: f.pageSize, pageToken: token }, o);
      yield* p.items;
      if (!p.nextPageToken) return;
      token = p.nextPageToken;
    }
  }
  async deleteTask(id: string, f: { expectVersion?: number } = {}, o: CallOptions = {}): Promise<void> {
    await this.v("DELETE", query(this.tp(o) + "/tasks/" + seg(id), { expect_version: f.expectVersion }), undefined, { ...o, wantValue: false });
  }
  /** Claims a task by id. */
  async claimTask(id: string, c: { owner: string; leaseMs: number; expectStatus?: string; expectVersion?: number; setStatus?: string }, o: CallOptions = {}): Promise<Task> {
    return this.v("POST", this.tp(o) + "/tasks/" + seg(id) + "/claim", compact({
      owner: c.owner, lease_ms: c.leaseMs, expect_status: c.expectStatus, expect_version: c.expectVersion, set_status: c.setStatus,
    }), o);
  }
  /**
   * Claims the best claimable task of a queue, waiting up to waitMs for one
   * (a long poll, at most 60 s); undefined when none came.
   */
  async claim(queue: string, c: { owner: string; leaseMs: number; statuses?: string[]; setStatus?: string; waitMs?: number }, o: CallOptions = {}): Promise<Task | undefined> {
    const r = await this.call<Task>("POST", this.tp(o) + "/queues/" + seg(queue) + "/claim", compact({
      owner: c.owner, lease_ms: c.leaseMs, statuses: c.statuses, set_status: c.setStatus, wait_ms: c.waitMs,
    }), { ...o, extraTimeoutMs: c.waitMs ?? 0 });
    // 204: nothing was claimable. A 200 without its body was cut on the
    // way (it may have claimed): wantValue sends it again, same place.
    return r.meta.status === 204 ? undefined : r.value;
  }
  async renewTask(id: string, r: { fencingToken: number; leaseMs: number }, o: CallOptions = {}): Promise<Task> {
    return this.v("POST", this.tp(o) + "/tasks/" + seg(id) + "/renew", { fencing_token: r.fencingToken, lease_ms: r.leaseMs }, o);
  }
  /**
   * Changes a task: the fields given; release: true clears the owner and
   * lease in the same step. unstarted: true, with release and the
   * fencingToken of a live lease, says the task was claimed and never
   * started: the release gives back the claim's attempt and the status its
   * setStatus replaced (no status, result, payload or artifactId with it;
   * a server of version 6).
   */
  async updateTask(id: string, u: {
    fencingToken?: number; expectVersion?: number; expectStatus?: string; status?: string; artifactId?: string;
    result?: unknown; payload?: unknown; release?: boolean; unstarted?: boolean; availableAt?: string; delayMs?: number;
  }, o: CallOptions = {}): Promise<Task> {
    return this.v("POST", this.tp(o) + "/tasks/" + seg(id) + "/update", compact({
      fencing_token: u.fencingToken, expect_version: u.expectVersion, expect_status: u.expectStatus, status: u.status,
      artifact_id: u.artifactId, result: u.result, payload: u.payload, release: u.release, unstarted: u.unstarted || undefined,
      available_at: u.availableAt, delay_ms: u.delayMs,
    }), o);
  }
  async failTask(id: string, f: { fencingToken: number; error?: string; nonRetryable?: boolean; status?: string }, o: CallOptions = {}): Promise<Task> {
    return this.v("POST", this.tp(o) + "/tasks/" + seg(id) + "/fail", compact({
      fencing_token: f.fencingToken, error: f.error, non_retryable: f.nonRetryable, status: f.status,
    }), o);
  }
  async retryTask(id: string, r: { expectVersion?: number; status?: string; availableAt?: string; delayMs?: number } = {}, o: CallOptions = {}): Promise<Task> {
    return this.v("POST", this.tp(o) + "/tasks/" + seg(id) + "/retry", compact({
      expect_version: r.expectVersion, status: r.status, available_at: r.availableAt, delay_ms: r.delayMs,
    }), o);
  }
  /**
   * Cancels a task: at once without a live lease (its fencing token
   * retired), else cancel_requested until its holder acknowledges (this
   * call with its fencingToken), releases or fails it, or its lease runs
   * out. VersionMismatch for a task that is done or dead.
   */
  async cancelTask(id: string, c: { fencingToken?: number; expectVersion?: number; reason?: string } = {}, o: CallOptions = {}): Promise<Task> {
    return this.v("POST", this.tp(o) + "/tasks/" + seg(id) + "/cancel", compact({
      fencing_token: c.fencingToken, expect_version: c.expectVersion, reason: c.reason,
    }), o);
  }
  /** One page of a task's dependencies in id order, each with its outcome once resolved. */
  async listTaskDependencies(id: string, f: { limit?: number; pageToken?: string } = {}, o: CallOptions = {}): Promise<Page<Dependency>> {
    return this.page<Dependency>(query(this.tp(o) + "/tasks/" + seg(id) + "/dependencies", { limit: f.limit, page_token: f.pageToken || undefined }), "dependencies", o);
  }
  async *iterTaskDependencies(id: string, f: { pageSize?: number } = {}, o: CallOptions = {}): AsyncGenerator<Dependency> {
    let token = "";
    for (;;) {
      const p = await this.listTaskDependencies(id, { limit: f.pageSize, pageToken: token }, o);
      yield* p.items;
      if (!p.nextPageToken) return;
      token = p.nextPageToken;
    }
  }
  /**
   * Parks a task held under fencingToken on a waitpoint: the lease ends
   * (its token retired) and no claim takes the task until the waitpoint is
   * completed or times out; that claim carries Task.waitpoint.
   */
  async parkTask(id: string, p: { fencingToken: number; waitpointId: string }, o: CallOptions = {}): Promise<Task> {
    return this.v("POST", this.tp(o) + "/tasks/" + seg(id) + "/wait", { fencing_token: p.fencingToken, waitpoint_id: p.waitpointId }, o);
  }
  async queueStats(queue: string, o: CallOptions = {}): Promise<QueueStats> {
    return this.v("GET", this.tp(o) + "/queues/" + seg(queue), undefined, o);
  }
  async listQueues(f: { limit?: number; pageToken?: string } = {}, o: CallOptions = {}): Promise<Page<QueueStats>> {
    return this.page<QueueStats>(query(this.tp(o) + "/queues", { limit: f.limit, page_token: f.pageToken || undefined }), "queues", o);
  }
  /**
   * Sets a queue's defaults and limits (cluster admin); fields left out are
   * 0, all zeros clear it. Flow control: at most max_leased tasks leased at
   * once, claims_per_second with claim_burst, concurrency_key_limit leased
   * tasks per concurrency_key; at a limit a queue claim finds nothing and a
   * claim by id is RateLimited.
   */
  async setQueuePolicy(queue: string, p: Partial<QueuePolicy>, o: CallOptions = {}): Promise<QueuePolicy> {
    return this.v("PUT", this.tp(o) + "/queues/" + seg(queue) + "/policy", { max_attempts: 0, backoff_initial_ms: 0, backoff_max_ms: 0, ...p }, o);
  }
  async getQueuePolicy(queue: string, o: CallOptions = {}): Promise<QueuePolicy> {
    return this.v("GET", this.tp(o) + "/queues/" + seg(queue) + "/policy", undefined, o);
  }

  // Waitpoints.

  /** Creates a pending waitpoint that times out after timeoutMs (at most 30 days); an id is generated without waitpointId. */
  async createWaitpoint(w: { timeoutMs: number; waitpointId?: string }, o: CallOptions = {}): Promise<Waitpoint> {
    return this.v("POST", this.tp(o) + "/waitpoints", compact({ waitpoint_id: w.waitpointId, timeout_ms: w.timeoutMs }), o);
  }
  /** Reads a waitpoint; with waitMs (at most 60 s) once it is no longer pending, or when the wait ends (a long poll). */
  async getWaitpoint(id: string, f: { waitMs?: number } = {}, o: CallOptions = {}): Promise<Waitpoint> {
    return this.v("GET", query(this.tp(o) + "/waitpoints/" + seg(id), { wait_ms: f.waitMs || undefined }), undefined, { ...o, extraTimeoutMs: f.waitMs ?? 0 });
  }
  /**
   * Completes a waitpoint with payload (JSON). Again with the same payload
   * it answers as the first time; VersionMismatch for another payload or a
   * waitpoint that timed out.
   */
  async completeWaitpoint(id: string, payload: unknown, o: CallOptions = {}): Promise<Waitpoint> {
    return this.v("POST", this.tp(o) + "/waitpoints/" + seg(id) + "/complete", { payload: payload ?? null }, o);
  }

  // Schedules.

  /**
   * Creates a schedule: a task in queue at every tick of cron (five fields
   * or @hourly..., in the IANA timezone, UTC by default) or of interval_ms
   * (at least 1,000), one of them. InvalidArgument for a cron expression or
   * zone that does not parse.
   */
  async createSchedule(s: {
    schedule_id: string; queue: string; cron?: string; timezone?: string; interval_ms?: number; catch_up?: CatchUp;
    priority?: number; payload?: unknown;
  }, o: CallOptions = {}): Promise<Schedule> {
    return this.v("POST", this.tp(o) + "/schedules", compact(s), o);
  }
  async getSchedule(id: string, o: CallOptions = {}): Promise<Schedule> {
    return this.v("GET", this.tp(o) + "/schedules/" + seg(id), undefined, o);
  }
  /** One page of the schedules on queues the caller may read, in id order. */
  async listSchedules(f: { limit?: number; pageToken?: string } = {}, o: CallOptions = {}): Promise<Page<Schedule>> {
    return this.page<Schedule>(query(this.tp(o) + "/schedules", { limit: f.limit, page_token: f.pageToken || undefined }), "schedules", o);
  }
  async *iterSchedules(f: { pageSize?: number } = {}, o: CallOptions = {}): AsyncGenerator<Schedule> {
    let token = "";
    for (;;) {
      const p = await this.listSchedules({ limit: f.pageSize, pageToken: token }, o);
      yield* p.items;
      if (!p.nextPageToken) return;
      token = p.nextPageToken;
    }
  }
  /** Stops a schedule's ticks. */
  async pauseSchedule(id: string, o: CallOptions = {}): Promise<Schedule> {
    return this.v("POST", this.tp(o) + "/schedules/" + seg(id) + "/pause", undefined, o);
  }
  /** Starts a paused schedule again at its first tick after now (the ticks of the pause are not made up). */
  async resumeSchedule(id: string, o: CallOptions = {}): Promise<Schedule> {
    return this.v("POST", this.tp(o) + "/schedules/" + seg(id) + "/resume", undefined, o);
  }
  /** Deletes a schedule; the tasks it created stay. */
  async deleteSchedule(id: string, o: CallOptions = {}): Promise<void> {
    await this.v("DELETE", this.tp(o) + "/schedules/" + seg(id), undefined, { ...o, wantValue: false });
  }

  // Transactions.

  /** Applies all ops or none; the answer of each, in order. */
  async txn(ops: TxnOp[], o: CallOptions = {}): Promise<unknown[]> {
    return (await this.v<{ results: unknown[] }>("POST", this.tp(o) + "/txn", { ops }, o)).results;
  }

  // Chunks and artifacts.

  async missingChunks(digests: string[], o: CallOptions = {}): Promise<string[]> {
    return (await this.v<{ missing: string[] }>("POST", this.tp(o) + "/chunks/missing", { digests }, o)).missing ?? [];
  }
  /** Stores one chunk; true when it was new to the tenant. */
  async putChunk(data: Uint8Array, o: CallOptions = {}): Promise<boolean> {
    const r = await this.call("PUT", this.tp(o) + "/chunks/" + sha256(data), undefined, { ...o, raw: data, extraTimeoutMs: data.length / (16 << 10) });
    return r.meta.status === 201;
  }
  async getChunk(digest: string, o: CallOptions = {}): Promise<Buffer> {
    const r = await this.call("GET", this.tp(o) + "/chunks/" + digest, undefined, { ...o, wantValue: false });
    const b = r.answer.body;
    if (sha256(b) !== digest) throw new DigestMismatch(`chunk ${digest}: got ${b.length} bytes hashing to ${sha256(b)}`);
    return b;
  }
  /** Publishes a manifest of held chunks as the next version of name. */
  async publishArtifact(name: string, m: {
    chunks: ChunkRef[]; digest: string; size: number; mediaType?: string; sources?: string[]; metadata?: unknown; taskId?: string; fence?: Fence;
  }, o: CallOptions = {}): Promise<Manifest> {
    return this.v("POST", this.tp(o) + "/artifacts/" + seg(name) + "/versions", compact({
      chunks: m.chunks, digest: m.digest, size: m.size, media_type: m.mediaType, sources: m.sources, metadata: m.metadata,
      task_id: m.taskId, fence: m.fence,
    }), { ...o, idempotencyKey: o.idempotencyKey ?? newIdempotencyKey(), extraTimeoutMs: m.size / (64 << 10) });
  }
  /**
   * Cuts content into content-defined chunks (byte for byte the Go SDK's),
   * uploads only those the tenant lacks, and publishes the manifest as the
   * next version of name. The content is read once, as a stream; calling it
   * again after a failure sends only the chunks still missing.
   */
  async uploadArtifact(name: string, source: UploadSource, m: { mediaType?: string; sources?: string[]; metadata?: unknown; taskId?: string; fence?: Fence; stats?: UploadStats } = {}, o: CallOptions = {}): Promise<Manifest> {
    const tenant = this.tenantOf(o);
    const st = m.stats ?? { size: 0, chunks: 0, chunksUploaded: 0, bytesSent: 0 };
    const whole = createHash("sha256");
    const refs: ChunkRef[] = [];
    let batch: [string, Uint8Array][] = [];
    let batchBytes = 0;
    for await (const chunk of chunksOf(blocksOf(source))) {
      whole.update(chunk);
      const d = sha256(chunk);
      refs.push({ digest: d, size: chunk.length });
      st.size += chunk.length;
      st.chunks++;
      batch.push([d, chunk]);
      batchBytes += chunk.length;
      if (batch.length >= UPLOAD_BATCH_CHUNKS || batchBytes >= UPLOAD_BATCH_BYTES) {
        await this.storeChunks(tenant, batch, st, o.signal);
        batch = [];
        batchBytes = 0;
      }
    }
    if (batch.length) await this.storeChunks(tenant, batch, st, o.signal);
    return this.publishArtifact(name, { chunks: refs, digest: "sha256:" + whole.digest("hex"), size: st.size, mediaType: m.mediaType,
      sources: m.sources, metadata: m.metadata, taskId: m.taskId, fence: m.fence }, { ...o, tenant });
  }
  private async storeChunks(tenant: string, batch: [string, Uint8Array][], st: UploadStats, signal?: AbortSignal): Promise<void> {
    const uniq = new Map<string, Uint8Array>();
    for (const [d, b] of batch) if (!uniq.has(d)) uniq.set(d, b);
    const keys = [...uniq.keys()];
    for (let i = 0; i < keys.length; i += MISSING_BATCH) {
      const missing = (await this.missingChunks(keys.slice(i, i + MISSING_BATCH), { tenant, signal })).filter((d) => uniq.has(d));
      let next = 0;
      const worker = async () => {
        while (next < missing.length) {
          const b = uniq.get(missing[next++]!)!;
          await this.putChunk(b, { tenant, signal });
          st.chunksUploaded++;
          st.bytesSent += b.length;
        }
      };
      await Promise.all(Array.from({ length: Math.min(this.uploadParallel, missing.length) }, worker));
    }
  }
  async getManifest(name: string, version: number, o: CallOptions = {}): Promise<Manifest> {
    return this.v("GET", this.tp(o) + "/artifacts/" + seg(name) + `/versions/${version}`, undefined, o);
  }
  async listVersions(name: string, o: CallOptions = {}): Promise<Manifest[]> {
    return (await this.v<{ versions: Manifest[] }>("GET", this.tp(o) + "/artifacts/" + seg(name) + "/versions", undefined, o)).versions ?? [];
  }
  async getArtifactById(artifactId: string, o: CallOptions = {}): Promise<Manifest> {
    return this.v("GET", this.tp(o) + "/artifacts/by-id/" + seg(artifactId), undefined, o);
  }
  async listArtifacts(f: { prefix?: string; limit?: number; pageToken?: string } = {}, o: CallOptions = {}): Promise<Page<ArtifactSummary>> {
    return this.page<ArtifactSummary>(query(this.tp(o) + "/artifacts", { prefix: f.prefix, limit: f.limit, page_token: f.pageToken || undefined }), "artifacts", o);
  }
  async deleteArtifactVersion(name: string, version: number, f: { expectArtifactId?: string } = {}, o: CallOptions = {}): Promise<void> {
    await this.v("DELETE", query(this.tp(o) + "/artifacts/" + seg(name) + `/versions/${version}`, { expect_artifact_id: f.expectArtifactId }), undefined, { ...o, wantValue: false });
  }
  /** Deletes every version of name; one by one, oldest first, when the server asks for that. */
  async deleteArtifact(name: string, f: { expectVersion?: number } = {}, o: CallOptions = {}): Promise<void> {
    try {
      await this.v("DELETE", query(this.tp(o) + "/artifacts/" + seg(name), { expect_version: f.expectVersion }), undefined, { ...o, wantValue: false });
    } catch (e) {
      if (!(e instanceof InvalidArgument) || !e.details["delete_by_version"]) throw e;
      for (const m of await this.listVersions(name, o)) {
        try {
          await this.deleteArtifactVersion(name, m.version, {}, o);
        } catch (e2) {
          if (!(e2 instanceof NotFound)) throw e2;
        }
      }
    }
  }
  async setArtifactPolicy(prefix: string, keepLast: number, o: CallOptions = {}): Promise<ArtifactPolicy> {
    return this.v("PUT", this.tp(o) + "/artifact-policies", { prefix, keep_last: keepLast }, o);
  }
  async listArtifactPolicies(o: CallOptions = {}): Promise<ArtifactPolicy[]> {
    return (await this.v<{ policies: ArtifactPolicy[] }>("GET", this.tp(o) + "/artifact-policies", undefined, o)).policies ?? [];
  }
  /**
   * Streams a version's content to write(block), checking its size and
   * digest (DigestMismatch). A stream cut midway starts again on another
   * endpoint after restart() (which must discard what was written).
   */
  async downloadArtifact(name: string, version: number, sink: { write(b: Buffer): void | Promise<void>; restart(): void | Promise<void> }, o: CallOptions = {}): Promise<number> {
    const path = this.tp(o) + "/artifacts/" + seg(name) + `/versions/${version}/content`;
    const deadline = Date.now() + this.transport.maxRetryMs;
    const bo = new Backoff();
    for (let round = 0; ; round++) {
      if (round > 0) await sink.restart();
      const res = await this.openStream(path, { Accept: "*/*" }, o.signal);
      const want = String(res.headers["etag"] ?? "").replace(/"/g, "");
      const length = Number(res.headers["content-length"] ?? -1);
      const h = createHash("sha256");
      let n = 0;
      try {
        for await (const b of res as AsyncIterable<Buffer>) {
          h.update(b);
          await sink.write(b);
          n += b.length;
        }
        if (!res.complete || (length >= 0 && n < length)) throw new Error(`cut after ${n} of ${length} bytes`);
      } catch (e) {
        res.destroy();
        if (o.signal?.aborted || Date.now() >= deadline) {
          throw new Unavailable(`download of ${name} v${version} cut after ${n} bytes: ${(e as Error).message}`, { cause: e });
        }
        await sleep(bo.delay(0, deadline - Date.now()), o.signal);
        continue;
      }
      const got = "sha256:" + h.digest("hex");
      if ((length >= 0 && n !== length) || (DIGEST_RE.test(want) && got !== want)) {
        throw new DigestMismatch(`${name} v${version}: got ${n} bytes hashing to ${got}, want ${length} bytes, ${want}`);
      }
      return n;
    }
  }
  /** A version's content in memory, verified. */
  async readArtifact(name: string, version: number, o: CallOptions = {}): Promise<Buffer> {
    let parts: Buffer[] = [];
    await this.downloadArtifact(name, version, { write: (b) => void parts.push(b), restart: () => void (parts = []) }, o);
    return Buffer.concat(parts);
  }
  /** Downloads to a file, written beside it first and renamed once its digest checked. */
  async downloadArtifactTo(name: string, version: number, path: string, o: CallOptions = {}): Promise<number> {
    const tmp = path + ".part";
    let out = createWriteStream(tmp);
    const write = (b: Buffer) => new Promise<void>((res, rej) => out.write(b, (e) => (e ? rej(e) : res())));
    try {
      const n = await this.downloadArtifact(name, version, {
        write,
        restart: async () => {
          await new Promise<void>((r) => out.end(r));
          out = createWriteStream(tmp);
        },
      }, o);
      await new Promise<void>((r) => out.end(r));
      await fsp.rename(tmp, path);
      return n;
    } finally {
      out.destroy();
      await fsp.rm(tmp, { force: true });
    }
  }

  /** A streamed GET with failover; the caller reads or destroys the answer. */
  async openStream(path: string, extraHeaders: Record<string, string>, signal?: AbortSignal, fromIndex?: number): Promise<IncomingMessage & { endpointIndex: number }> {
    const t = this.transport;
    const deadline = Date.now() + t.maxRetryMs;
    const n = t.endpoints.length;
    const start = fromIndex ?? t.preferredIndex;
    const bo = new Backoff();
    for (let i = 0; ; i++) {
      const idx = (start + i) % n;
      const call: Call = { method: "GET", path, attempts: 0, timeoutMs: t.timeoutMs, wantValue: false, extraHeaders, signal };
      const ep = t.endpoints[idx]!;
      let r: ReturnType<typeof classify>;
      try {
        const res = await t.open(ep, call, t.timeoutMs);
        if (res.statusCode === 200) {
          t.prefer(idx, text(res.headers["x-baton-leader"] ?? ""));
          return Object.assign(res, { endpointIndex: idx });
        }
        const body = await readBody(res, t.timeoutMs).catch(() => Buffer.alloc(0));
        r = classify(res.statusCode ?? 0, res.headers, body);
      } catch (e) {
        r = t.transportFailure(ep, call, e);
      }
      if (!r.retry) throw r.error!;
      const remaining = deadline - Date.now();
      let delay = (i + 1) % n === 0 ? bo.delay(r.retryAfterMs, remaining) : 0;
      if (r.rateLimited) delay = r.retryAfterMs;
      if (delay >= remaining) throw r.error!;
      await sleep(delay, signal);
    }
  }

  // Refs.

  async setRef(ref: string, artifactId: string, f: { expectArtifactId?: string; fence?: Fence } = {}, o: CallOptions = {}): Promise<Ref> {
    return this.v("PUT", this.tp(o) + "/refs/" + keyPath(ref), compact({ artifact_id: artifactId, expect_artifact_id: f.expectArtifactId, fence: f.fence }), o);
  }
  async getRef(ref: string, o: CallOptions = {}): Promise<Ref> {
    return this.v("GET", this.tp(o) + "/refs/" + keyPath(ref), undefined, o);
  }
  async listRefs(f: { prefix?: string } = {}, o: CallOptions = {}): Promise<Ref[]> {
    return (await this.v<{ refs: Ref[] }>("GET", query(this.tp(o) + "/refs", { prefix: f.prefix }), undefined, o)).refs ?? [];
  }
  async deleteRef(ref: string, f: { expectArtifactId?: string } = {}, o: CallOptions = {}): Promise<void> {
    await this.v("DELETE", query(this.tp(o) + "/refs/" + keyPath(ref), { expect_artifact_id: f.expectArtifactId }), undefined, { ...o, wantValue: false });
  }

  // Checkpoints.

  private cp(thread: string, o: CallOptions): string {
    return this.tp(o) + "/threads/" + seg(thread);
  }
  /**
   * Puts a checkpoint; parentId must be the namespace's head unless fork is
   * true. Data of over CHECKPOINT_INLINE_MAX bytes of JSON is cut into
   * chunks and uploaded first (only those the tenant lacks), then named by
   * data_chunks; the answer carries the data either way.
   */
  async putCheckpoint(thread: string, checkpointId: string, data: unknown, f: {
    ns?: string; parentId?: string; metadata?: unknown; fork?: boolean; fence?: Fence; blobVersions?: Record<string, string>; blobs?: Blob[];
  } = {}, o: CallOptions = {}): Promise<Checkpoint> {
    const json = Buffer.from(JSON.stringify(data === undefined ? null : data));
    let dataChunks: ChunkRef[] | undefined;
    if (json.length > CHECKPOINT_INLINE_MAX) {
      const tenant = this.tenantOf(o);
      const chunks = split(json);
      dataChunks = chunks.map((c) => ({ digest: sha256(c), size: c.length }));
      const st = { size: 0, chunks: 0, chunksUploaded: 0, bytesSent: 0 };
      await this.storeChunks(tenant, chunks.map((c, i) => [dataChunks![i]!.digest, c]), st, o.signal);
    }
    const body = compact({
      parent_id: f.parentId || undefined, data: dataChunks ? undefined : data === undefined ? null : data, data_chunks: dataChunks,
      metadata: f.metadata, fork: f.fork || undefined, fence: f.fence,
      blob_versions: f.blobVersions && Object.keys(f.blobVersions).length ? f.blobVersions : undefined,
      blobs: f.blobs && f.blobs.length ? f.blobs : undefined,
    });
    const cp = await this.v<Checkpoint>("PUT", query(this.cp(thread, o) + "/checkpoints/" + seg(checkpointId), { checkpoint_ns: f.ns || undefined }), body,
      { ...o, extraTimeoutMs: dataChunks ? json.length / (64 << 10) : 0 });
    if (dataChunks) cp.data = JSON.parse(json.toString("utf8")) as unknown;
    return cp;
  }
  async getCheckpoint(thread: string, checkpointId: string, f: { ns?: string } = {}, o: CallOptions = {}): Promise<Checkpoint> {
    return this.v("GET", query(this.cp(thread, o) + "/checkpoints/" + seg(checkpointId), { checkpoint_ns: f.ns || undefined }), undefined, o);
  }
  async latestCheckpoint(thread: string, f: { ns?: string } = {}, o: CallOptions = {}): Promise<Checkpoint> {
    return this.v("GET", query(this.cp(thread, o) + "/checkpoints/latest", { checkpoint_ns: f.ns || undefined }), undefined, o);
  }
  /** One page of a namespace's checkpoints, newest first. */
  async listCheckpoints(thread: string, f: { ns?: string; filter?: Record<string, unknown>; before?: string; limit?: number; pageToken?: string; pendingWrites?: boolean } = {}, o: CallOptions = {}): Promise<Page<Checkpoint>> {
    return this.page<Checkpoint>(query(this.cp(thread, o) + "/checkpoints", {
      checkpoint_ns: f.ns || undefined, filter: f.filter, before: f.pageToken ? undefined : f.before, limit: f.limit,
      page_token: f.pageToken || undefined, pending_writes: f.pendingWrites || undefined,
    }), "checkpoints", o);
  }
  /** A namespace's checkpoints, following the pages until limit matches. */
  async *iterCheckpoints(thread: string, f: { ns?: string; filter?: Record<string, unknown>; before?: string; limit?: number; pendingWrites?: boolean } = {}, o: CallOptions = {}): AsyncGenerator<Checkpoint> {
    yield* this.follow((pageToken, limit) => this.listCheckpoints(thread, { ...f, pageToken, limit }, o), f.limit);
  }
  /**
   * One page of checkpoints across threads (thread absent: every thread the
   * caller may read) and namespaces (ns absent: every one; "" the default).
   */
  async listTenantCheckpoints(f: { thread?: string; ns?: string; filter?: Record<string, unknown>; beforeId?: string; limit?: number; pageToken?: string; pendingWrites?: boolean } = {}, o: CallOptions = {}): Promise<Page<Checkpoint>> {
    return this.page<Checkpoint>(query(this.tp(o) + "/checkpoints", {
      thread: f.thread, checkpoint_ns: f.ns, filter: f.filter, before_id: f.beforeId, limit: f.limit,
      page_token: f.pageToken || undefined, pending_writes: f.pendingWrites || undefined,
    }), "checkpoints", o);
  }
  async *iterTenantCheckpoints(f: { thread?: string; ns?: string; filter?: Record<string, unknown>; beforeId?: string; limit?: number; pendingWrites?: boolean } = {}, o: CallOptions = {}): AsyncGenerator<Checkpoint> {
    yield* this.follow((pageToken, limit) => this.listTenantCheckpoints({ ...f, pageToken, limit }, o), f.limit);
  }
  private async *follow<T>(page: (token: string | undefined, limit: number | undefined) => Promise<Page<T>>, limit?: number): AsyncGenerator<T> {
    let token: string | undefined;
    let left = limit;
    for (;;) {
      const p = await page(token, left === undefined ? undefined : Math.min(left, 1000));
      for (const it of p.items) {
        if (left !== undefined && left <= 0) return;
        yield it;
        if (left !== undefined) left--;
      }
      if (!p.nextPageToken || (left !== undefined && left <= 0)) return;
      token = p.nextPageToken;
    }
  }
  /** Records a task's pending writes on a checkpoint: [{channel, value, idx?}]. */
  async putWrites(thread: string, checkpointId: string, taskId: string, writes: { channel: string; value: unknown; idx?: number }[], f: { ns?: string; taskPath?: string; fence?: Fence } = {}, o: CallOptions = {}): Promise<PendingWrite[]> {
    const r = await this.call<{ writes?: PendingWrite[] }>("PUT", query(this.cp(thread, o) + "/checkpoints/" + seg(checkpointId) + "/writes/" + seg(taskId), { checkpoint_ns: f.ns || undefined }),
      compact({ writes, task_path: f.taskPath || undefined, fence: f.fence }), o);
    return r.value?.writes ?? [];
  }
  async deleteThread(thread: string, f: { fence?: Fence } = {}, o: CallOptions = {}): Promise<void> {
    await this.v("DELETE", this.cp(thread, o), f.fence ? { fence: f.fence } : undefined, { ...o, wantValue: false });
  }
  async copyThread(thread: string, target: string, f: { fence?: Fence } = {}, o: CallOptions = {}): Promise<{ source: string; target: string; checkpoints: number }> {
    return this.v("POST", this.cp(thread, o) + "/copy", compact({ target, fence: f.fence }), o);
  }
  async pruneCheckpoints(threads: string[], strategy: "keep_latest" | "delete" = "keep_latest", f: { fence?: Fence } = {}, o: CallOptions = {}): Promise<number> {
    return (await this.v<{ deleted: number }>("POST", this.tp(o) + "/checkpoints/prune", compact({ threads, strategy, fence: f.fence }), o)).deleted;
  }
  async deleteRuns(runIds: string[], f: { fence?: Fence } = {}, o: CallOptions = {}): Promise<number> {
    return (await this.v<{ deleted: number }>("POST", this.tp(o) + "/checkpoints/delete-runs", compact({ run_ids: runIds, fence: f.fence }), o)).deleted;
  }
  async setCheckpointPolicy(prefix: string, p: { keepLast?: number; maxAgeMs?: number }, o: CallOptions = {}): Promise<CheckpointPolicy> {
    return this.v("PUT", this.tp(o) + "/checkpoint-policies", compact({ prefix, keep_last: p.keepLast, max_age_ms: p.maxAgeMs }), o);
  }
  async listCheckpointPolicies(o: CallOptions = {}): Promise<CheckpointPolicy[]> {
    return (await this.v<{ policies: CheckpointPolicy[] }>("GET", this.tp(o) + "/checkpoint-policies", undefined, o)).policies ?? [];
  }

  // Knowledge store (KV).

  async kvPut(namespace: string, key: string, value: unknown, f: { expectVersion?: number; ttlMs?: number; fence?: Fence } = {}, o: CallOptions = {}): Promise<KVEntry> {
    return this.v("PUT", this.tp(o) + "/kv/" + seg(namespace) + "/" + keyPath(key), compact({ value: value === undefined ? null : value, expect_version: f.expectVersion, ttl_ms: f.ttlMs, fence: f.fence }), o);
  }
  async kvGet(namespace: string, key: string, o: CallOptions = {}): Promise<KVEntry> {
    return this.v("GET", this.tp(o) + "/kv/" + seg(namespace) + "/" + keyPath(key), undefined, o);
  }
  async kvDelete(namespace: string, key: string, f: { expectVersion?: number } = {}, o: CallOptions = {}): Promise<void> {
    await this.v("DELETE", query(this.tp(o) + "/kv/" + seg(namespace) + "/" + keyPath(key), { expect_version: f.expectVersion }), undefined, { ...o, wantValue: false });
  }
  async kvList(namespace: string, f: { prefix?: string; limit?: number; pageToken?: string } = {}, o: CallOptions = {}): Promise<Page<KVEntry>> {
    return this.page<KVEntry>(query(this.tp(o) + "/kv/" + seg(namespace), { prefix: f.prefix, limit: f.limit, page_token: f.pageToken || undefined }), "entries", o);
  }
  async *iterKV(namespace: string, f: { prefix?: string; pageSize?: number } = {}, o: CallOptions = {}): AsyncGenerator<KVEntry> {
    let token = "";
    for (;;) {
      const p = await this.kvList(namespace, { prefix: f.prefix, limit: f.pageSize, pageToken: token }, o);
      yield* p.items;
      if (!p.nextPageToken) return;
      token = p.nextPageToken;
    }
  }

  // Operations ledger.

  async beginOp(opId: string, b: { kind: string; paramsDigest: string; taskId?: string; fence?: Fence }, o: CallOptions = {}): Promise<{ op: Op; created: boolean }> {
    const r = await this.call<Op>("POST", this.tp(o) + "/ops/" + seg(opId) + "/begin", compact({ kind: b.kind, params_digest: b.paramsDigest, task_id: b.taskId, fence: b.fence }), o);
    return { op: r.value, created: r.meta.status === 201 };
  }
  async finishOp(opId: string, f: { state: "succeeded" | "failed" | "unknown"; result?: unknown; fence?: Fence }, o: CallOptions = {}): Promise<Op> {
    return this.v("POST", this.tp(o) + "/ops/" + seg(opId) + "/finish", compact({ state: f.state, result: f.result, fence: f.fence }), o);
  }
  async getOp(opId: string, o: CallOptions = {}): Promise<Op> {
    return this.v("GET", this.tp(o) + "/ops/" + seg(opId), undefined, o);
  }

  // Watch.

  /** A tenant's changes as an async iterator that resumes across reconnects; close() it. */
  watch(w: WatchOptions = {}, o: CallOptions = {}): Watch {
    return new Watch(this, this.tenantOf(o), w);
  }

  // Cluster.

  async clusterStatus(o: CallOptions = {}): Promise<ClusterStatus> {
    return this.v("GET", "/v1/cluster", undefined, o);
  }
  async addMember(m: { id: string; raft_addr: string; http_addr: string; voter?: boolean }, o: CallOptions = {}): Promise<Member> {
    return this.v("POST", "/v1/cluster/members", compact(m), o);
  }
  async removeMember(id: string, o: CallOptions = {}): Promise<void> {
    await this.v("DELETE", "/v1/cluster/members/" + seg(id), undefined, { ...o, wantValue: false });
  }
  async promoteMember(id: string, o: CallOptions = {}): Promise<Member> {
    return this.v("POST", "/v1/cluster/members/" + seg(id) + "/promote", undefined, o);
  }
  async transferLeadership(to?: string, o: CallOptions = {}): Promise<{ previous: string; leader: string }> {
    return this.v("POST", "/v1/cluster/leadership-transfer", to ? { to } : {}, o);
  }

  /**
   * A full backup of the cluster (admin): its stream (docs/operations.md
   * "Backup and restore", beginning "BATONBAK") handed to write(block);
   * the byte count. `baton`'s restore reads it.
   */
  async backup(write: (block: Buffer) => void | Promise<void>, o: CallOptions = {}): Promise<number> {
    const res = await this.openStream("/v1/cluster/backup", { Accept: "application/octet-stream" }, o.signal);
    let n = 0;
    try {
      for await (const b of res as AsyncIterable<Buffer>) {
        await write(b);
        n += b.length;
      }
      if (!res.complete) throw new Unavailable(`backup cut after ${n} bytes`);
    } finally {
      res.destroy();
    }
    return n;
  }

  private async page<T>(path: string, field: string, o: CallOptions): Promise<Page<T>> {
    const r = await this.call<Record<string, unknown>>("GET", path, undefined, o);
    const items = (r.value?.[field] ?? []) as T[];
    return { items, nextPageToken: text(r.value?.["next_page_token"] ?? ""), index: r.meta.index };
  }
}

/** The blocks of an upload source. */
async function* blocksOf(source: UploadSource): AsyncGenerator<Uint8Array> {
  if (source instanceof Uint8Array) {
    yield source;
    return;
  }
  const path = typeof source === "string" ? source : "path" in source ? source.path : undefined;
  if (path !== undefined) {
    yield* createReadStream(path, { highWaterMark: 1 << 20 }) as AsyncIterable<Buffer>;
    return;
  }
  yield* source as AsyncIterable<Uint8Array>;
}

export { BatonError };

/** The id of the task a schedule's tick creates: `<schedule_id>:<tick in Unix ms>`. */
export function scheduleTaskId(schedule: Schedule | string, tick: string | Date | number): string {
  const id = typeof schedule === "string" ? schedule : schedule.schedule_id;
  const ms = typeof tick === "number" ? tick : typeof tick === "string" ? Date.parse(tick) : tick.getTime();
  return `${id}:${ms}`;
}
