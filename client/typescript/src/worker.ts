// Worker: claims tasks from a queue and runs a handler on each, renewing
// the lease in the background. The handler's writes through its
// TaskContext carry the claim's fence, so a worker whose lease was taken
// over can never overwrite its successor's work: the cluster refuses the
// write (Fenced), the context marks the lease lost, aborts ctx.signal and
// refuses later writes locally (LeaseLost). A renewal that shows the task
// was cancelled (cancelTask) aborts ctx.signal too (reason CancelRequested),
// and the worker acknowledges the cancellation once the handler ends.

import { randomUUID } from "node:crypto";
import type { BatonClient, CallOptions, TxnOp, UploadSource, UploadStats } from "./client.js";
import { BatonError, CancelRequested, Fenced, InvalidArgument, LeaseLost, LeaseReleased, NotFound, Unavailable } from "./errors.js";
import type { Checkpoint, Fence, KVEntry, Manifest, PendingWrite, Ref, Task } from "./models.js";
import { Backoff, sleep } from "./transport.js";
import { once } from "./once.js";

const MAX_FAIL_ERROR = 4096;

/** Thrown by a handler: the task becomes dead at once, without more attempts. */
export class NonRetryable extends Error {}

export interface TaskContextOptions {
  leaseMs: number;
  renewEveryMs: number;
  safetyMarginMs: number;
  /** When the claim was sent (Date.now()): the lease counts from then. */
  sentAt: number;
}

/** A hold on one claimed task, renewed in the background while held. */
export class TaskContext {
  private deadline: number;
  private err: BatonError | undefined;
  private lostFlag = false;
  private releasing = 0;
  private cancelReq = false;
  /** ctx.signal: aborted when the lease is lost or the task cancelled. */
  private readonly ctl = new AbortController();
  /** The fenced writes' signal: aborted when the lease is lost only (a cancelled task's holder may still save). */
  private readonly lostCtl = new AbortController();
  private readonly stopRenew = new AbortController();
  private renewer: Promise<void> | undefined;

  constructor(readonly client: BatonClient, readonly tenant: string, public task: Task, private readonly o: TaskContextOptions) {
    this.deadline = o.sentAt + o.leaseMs - o.safetyMarginMs;
  }

  /** The claim's fencing token. */
  get token(): number {
    return this.task.fencing_token;
  }
  /** The guard every write of this context carries. */
  get fence(): Fence {
    return { task_id: this.task.task_id, token: this.task.fencing_token };
  }
  /**
   * Aborted once the lease is lost (reason LeaseLost) or the task was
   * cancelled while held (reason CancelRequested): pass it to long
   * operations, and stop when it fires.
   */
  get signal(): AbortSignal {
    return this.ctl.signal;
  }
  /** True once a renewal (the background one or heartbeat) showed the task was cancelled while held. */
  get cancelRequested(): boolean {
    return this.cancelReq;
  }
  /** True once the lease is known lost (fenced, deleted or expired). */
  get lost(): boolean {
    this.check();
    return this.lostFlag;
  }
  /** undefined while held; afterwards why it ended (LeaseLost or LeaseReleased). */
  get error(): BatonError | undefined {
    return this.check();
  }

  private check(): BatonError | undefined {
    if (!this.err && this.releasing === 0 && Date.now() >= this.deadline) {
      this.end(new LeaseLost(`lease of task ${JSON.stringify(this.task.task_id)} expired: no renewal succeeded in time`), true);
    }
    return this.err;
  }
  private end(err: BatonError, lost: boolean): void {
    if (this.err) return;
    this.err = err;
    this.lostFlag = lost;
    this.stopRenew.abort();
    if (lost) {
      this.lostCtl.abort(err);
      if (!this.ctl.signal.aborted) this.ctl.abort(err);
    }
  }
  /** @internal */
  cancelCause(): CancelRequested {
    return new CancelRequested(`task ${JSON.stringify(this.task.task_id)} was cancelled while held`);
  }
  private observe(e: unknown, taskWrite = false): void {
    if (e instanceof Fenced || (taskWrite && e instanceof NotFound)) {
      this.end(new LeaseLost(`lease of task ${JSON.stringify(this.task.task_id)} lost: ${e.message}`, { details: { cause: e.code } }), true);
    }
  }
  private guard(): void {
    const e = this.check();
    if (e) throw e;
  }

  private async renew(): Promise<void> {
    const sent = Date.now();
    try {
      this.task = await this.client.renewTask(this.task.task_id, { fencingToken: this.token, leaseMs: this.o.leaseMs }, { tenant: this.tenant });
    } catch (e) {
      if (this.releasing === 0) this.observe(e, true);
      throw e;
    }
    this.deadline = Math.max(this.deadline, sent + this.o.leaseMs - this.o.safetyMarginMs);
    if (this.task.cancel_requested === true && !this.cancelReq) {
      this.cancelReq = true;
      if (!this.ctl.signal.aborted) this.ctl.abort(this.cancelCause());
    }
  }

  /**
   * Renews now; with progress, first records it as the task's result under
   * the token. Throws CancelRequested once the task was cancelled while held.
   */
  async heartbeat(progress?: unknown): Promise<void> {
    this.guard();
    try {
      if (progress !== undefined) this.task = await this.client.updateTask(this.task.task_id, { fencingToken: this.token, result: progress }, { tenant: this.tenant });
      await this.renew();
    } catch (e) {
      this.observe(e, true);
      throw this.check() ?? e;
    }
    if (this.cancelReq) throw this.cancelCause();
  }

  /** @internal */
  startRenewer(): void {
    this.renewer = this.renewLoop();
  }
  /** @internal */
  async stopRenewer(): Promise<void> {
    this.stopRenew.abort();
    await this.renewer;
  }

  private async renewLoop(): Promise<void> {
    // Counted from when the claim was sent, as the deadline is: a claim
    // that waited longer than renewEveryMs (a long poll) renews at once.
    let next = this.o.sentAt + this.o.renewEveryMs;
    let bo = new Backoff();
    while (!this.check()) {
      try {
        await sleep(Math.max(Math.min(next, this.deadline) - Date.now(), 0), this.stopRenew.signal);
      } catch {
        return;
      }
      if (this.check()) return;
      if (Date.now() < next) continue;
      const sent = Date.now();
      try {
        await this.renew();
      } catch {
        next = Date.now() + bo.delay(0, Math.max(this.deadline - Date.now(), 0));
        continue;
      }
      bo = new Backoff();
      next = sent + this.o.renewEveryMs;
    }
  }

  private async taskWrite(release: boolean, fn: () => Promise<Task>, ended: () => BatonError): Promise<Task> {
    this.guard();
    if (release) this.releasing++;
    try {
      this.task = await fn();
    } catch (e) {
      this.observe(e, true);
      throw e;
    } finally {
      if (release) this.releasing--;
    }
    if (release) this.end(ended(), false);
    return this.task;
  }

  /** updateTask under this lease's token (release: true gives the lease back). */
  async update(u: Parameters<BatonClient["updateTask"]>[1]): Promise<Task> {
    const release = u.release === true;
    return this.taskWrite(release, () => this.client.updateTask(this.task.task_id, { ...u, fencingToken: this.token }, { tenant: this.tenant }),
      () => new LeaseReleased(`task ${JSON.stringify(this.task.task_id)} released under token ${this.token}`));
  }
  /** Sets status and result and releases the lease, in one fenced update. */
  async complete(result?: unknown, status = "done"): Promise<Task> {
    return this.update({ status, result, release: true });
  }
  /**
   * Gives the task back without changing it; unstarted: true says it never
   * started, which gives back the claim's attempt and the status its
   * setStatus replaced.
   */
  async release(o: { unstarted?: boolean } = {}): Promise<Task> {
    return this.update({ release: true, unstarted: o.unstarted });
  }
  /** Ends the attempt as failed: retried after its backoff, or dead (nonRetryable, last attempt). */
  async fail(error?: unknown, nonRetryable = false): Promise<Task> {
    const msg = error instanceof Error ? error.message || error.name : error === undefined ? "" : typeof error === "string" ? error : JSON.stringify(error) ?? "";
    const nr = nonRetryable || error instanceof NonRetryable;
    return this.taskWrite(true, () => this.client.failTask(this.task.task_id, { fencingToken: this.token, error: truncate(msg, MAX_FAIL_ERROR) || undefined, nonRetryable: nr || undefined }, { tenant: this.tenant }),
      () => new LeaseReleased(`task ${JSON.stringify(this.task.task_id)} failed under token ${this.token}`));
  }

  /**
   * Cancels the task under this lease's token, which ends the lease: it is
   * cancelled at once and the token retired (a requested cancellation is
   * acknowledged so; without one, the holder cancels its own task).
   */
  async ackCancel(reason?: string): Promise<Task> {
    return this.taskWrite(true, () => this.client.cancelTask(this.task.task_id, { fencingToken: this.token, reason }, { tenant: this.tenant }),
      () => new LeaseReleased(`task ${JSON.stringify(this.task.task_id)} cancelled under token ${this.token}`));
  }
  /**
   * Parks the task on a waitpoint under this lease's token, which ends the
   * lease: it is claimable again once the waitpoint is completed or times
   * out, and that claim carries Task.waitpoint.
   */
  async park(waitpointId: string): Promise<Task> {
    return this.taskWrite(true, () => this.client.parkTask(this.task.task_id, { fencingToken: this.token, waitpointId }, { tenant: this.tenant }),
      () => new LeaseReleased(`task ${JSON.stringify(this.task.task_id)} parked under token ${this.token}`));
  }

  private async fenced<T>(fn: (o: CallOptions) => Promise<T>): Promise<T> {
    this.guard();
    try {
      return await fn({ tenant: this.tenant, signal: this.lostCtl.signal });
    } catch (e) {
      this.observe(e);
      throw e;
    }
  }

  async kvPut(namespace: string, key: string, value: unknown, f: { expectVersion?: number; ttlMs?: number } = {}): Promise<KVEntry> {
    return this.fenced((o) => this.client.kvPut(namespace, key, value, { ...f, fence: this.fence }, o));
  }
  async setRef(ref: string, artifactId: string, f: { expectArtifactId?: string } = {}): Promise<Ref> {
    return this.fenced((o) => this.client.setRef(ref, artifactId, { ...f, fence: this.fence }, o));
  }
  async uploadArtifact(name: string, source: UploadSource, m: { mediaType?: string; sources?: string[]; metadata?: unknown; stats?: UploadStats } = {}): Promise<Manifest> {
    return this.fenced((o) => this.client.uploadArtifact(name, source, { ...m, taskId: this.task.task_id, fence: this.fence }, o));
  }
  async putCheckpoint(thread: string, checkpointId: string, data: unknown, f: { ns?: string; parentId?: string; metadata?: unknown; fork?: boolean } = {}): Promise<Checkpoint> {
    return this.fenced((o) => this.client.putCheckpoint(thread, checkpointId, data, { ...f, fence: this.fence }, o));
  }
  async putWrites(thread: string, checkpointId: string, taskId: string, writes: { channel: string; value: unknown; idx?: number }[], f: { ns?: string; taskPath?: string } = {}): Promise<PendingWrite[]> {
    return this.fenced((o) => this.client.putWrites(thread, checkpointId, taskId, writes, { ...f, fence: this.fence }, o));
  }
  async deleteThread(thread: string): Promise<void> {
    return this.fenced((o) => this.client.deleteThread(thread, { fence: this.fence }, o));
  }
  /** A transaction whose kv.put, kv.delete and ref.set ops carry this lease's fence. */
  async txn(ops: TxnOp[]): Promise<unknown[]> {
    const fenced = ops.map((op) => (["kv.put", "kv.delete", "ref.set"].includes(op.op) && !("fence" in op) ? { ...op, fence: this.fence } : op));
    return this.fenced((o) => this.client.txn(fenced, o));
  }
  /** once() under this lease: the op carries the task's id and fence. */
  async once<T>(opId: string, fn: () => Promise<T>, o: { kind: string; params?: unknown }): Promise<T> {
    return this.fenced(() => once(this.client, opId, fn, { ...o, taskId: this.task.task_id, fence: this.fence, tenant: this.tenant }));
  }

  /** An operations-ledger record under this lease: begin, or finish, fenced. */
  async beginOp(opId: string, kind: string, paramsDigest: string): Promise<{ op: import("./models.js").Op; created: boolean }> {
    return this.fenced((o) => this.client.beginOp(opId, { kind, paramsDigest, taskId: this.task.task_id, fence: this.fence }, o));
  }
  async finishOp(opId: string, state: "succeeded" | "failed" | "unknown", result?: unknown): Promise<import("./models.js").Op> {
    return this.fenced((o) => this.client.finishOp(opId, { state, result, fence: this.fence }, o));
  }
}

function truncate(s: string, n: number): string {
  const b = Buffer.from(s);
  if (b.length <= n) return s;
  return new TextDecoder("utf-8", { fatal: false }).decode(b.subarray(0, n)).replace(/\uFFFD+$/, "");
}

export type Handler = (ctx: TaskContext) => Promise<unknown>;

export interface WorkerOptions {
  concurrency?: number;
  owner?: string;
  leaseMs?: number;
  /** A claim's long poll, at most 60 s (10 s). */
  waitMs?: number;
  statuses?: string[];
  setStatus?: string;
  doneStatus?: string;
  renewEveryMs?: number;
  safetyMarginMs?: number;
  tenant?: string;
  onError?: (task: Task, e: unknown) => void;
  /** run() stops gracefully on SIGTERM and SIGINT (true): no new claims, tasks in flight finish. */
  handleSignals?: boolean;
}

/**
 * Claims tasks from a queue, `concurrency` at a time, and runs the handler
 * on each. When it returns, the task is completed (doneStatus, the returned
 * value as result, lease released) unless the handler completed, failed or
 * released it itself; when it throws, the attempt is failed (the server's
 * attempts and backoff apply; NonRetryable makes it dead). run() stops
 * gracefully on stop(), SIGTERM or SIGINT: no new claims, and the tasks in
 * flight finish (a long-poll claim under way still completes, and a task
 * it brings is processed). When a renewal shows that the task was cancelled
 * (cancelTask), ctx.signal is aborted with CancelRequested; once the
 * handler settles the worker acknowledges the cancellation (the task ends
 * cancelled, whatever the handler returned, unless it gave the task back
 * itself) and reports CancelRequested to onError.
 */
export class Worker {
  readonly owner: string;
  readonly leaseMs: number;
  readonly waitMs: number;
  readonly concurrency: number;
  readonly tenant: string;
  private readonly renewEveryMs: number;
  private readonly safetyMarginMs: number;
  private readonly stopCtl = new AbortController();
  private fatal: Error | undefined;
  processed = 0;

  constructor(readonly client: BatonClient, readonly queue: string, readonly handler: Handler, private readonly o: WorkerOptions = {}) {
    this.owner = o.owner ?? `worker-${randomUUID()}`;
    this.leaseMs = o.leaseMs ?? 30_000;
    this.waitMs = Math.min(o.waitMs ?? 10_000, 60_000);
    this.concurrency = Math.max(Math.floor(o.concurrency ?? 1), 1);
    this.renewEveryMs = o.renewEveryMs ?? this.leaseMs / 3;
    this.safetyMarginMs = o.safetyMarginMs ?? this.leaseMs / 10;
    this.tenant = client.tenantOf(o);
    if (this.leaseMs < 1) throw new InvalidArgument("worker lease must be at least 1ms");
    if (this.renewEveryMs >= this.leaseMs - this.safetyMarginMs) throw new InvalidArgument("renewEveryMs must be shorter than leaseMs minus safetyMarginMs");
  }

  /** Stops claiming; run() resolves once the tasks in flight are finished. */
  stop(): void {
    this.stopCtl.abort();
  }
  get stopping(): boolean {
    return this.stopCtl.signal.aborted;
  }

  /** Claims and runs tasks until stop(); rejects with the error that stopped it (a claim's 403...). */
  async run(): Promise<void> {
    const stop = () => this.stop();
    const signals = this.o.handleSignals === false ? [] : (["SIGTERM", "SIGINT"] as const);
    for (const s of signals) process.on(s, stop);
    try {
      await Promise.all(Array.from({ length: this.concurrency }, () => this.slot()));
    } finally {
      for (const s of signals) process.off(s, stop);
    }
    if (this.fatal !== undefined) throw this.fatal;
  }

  private async slot(): Promise<void> {
    let bo = new Backoff(50, 1000);
    while (!this.stopping) {
      let claimed: boolean;
      try {
        claimed = await this.runOnce();
      } catch (e) {
        if (e instanceof Unavailable) {
          await sleep(bo.delay(), this.stopCtl.signal).catch(() => undefined);
          continue;
        }
        this.fatal = e instanceof Error ? e : new Error("the worker's claim failed", { cause: e });
        this.stop();
        return;
      }
      bo = new Backoff(50, 1000);
      if (!claimed && this.waitMs <= 0) await sleep(bo.delay(), this.stopCtl.signal).catch(() => undefined);
    }
  }

  /** Claims one task (waiting up to waitMs) and processes it; false when none was claimable. */
  async runOnce(): Promise<boolean> {
    const sentAt = Date.now();
    const t = await this.client.claim(this.queue, { owner: this.owner, leaseMs: this.leaseMs, statuses: this.o.statuses, setStatus: this.o.setStatus, waitMs: this.waitMs }, { tenant: this.tenant });
    if (!t) return false;
    const ctx = new TaskContext(this.client, this.tenant, t, { leaseMs: this.leaseMs, renewEveryMs: this.renewEveryMs, safetyMarginMs: this.safetyMarginMs, sentAt });
    await this.process(ctx);
    return true;
  }

  private report(task: Task, e: unknown): void {
    this.o.onError?.(task, e);
  }

  private async process(ctx: TaskContext): Promise<void> {
    ctx.startRenewer();
    let err: unknown;
    let failed = false;
    let result: unknown;
    try {
      result = await this.handler(ctx);
    } catch (e) {
      err = e;
      failed = true;
    } finally {
      await ctx.stopRenewer();
    }
    this.processed++;
    if (ctx.cancelRequested) return this.endCancelled(ctx, failed, err);
    if (failed) this.report(ctx.task, err);
    const ended = ctx.error;
    if (ended) {
      if (ctx.lost && !failed) this.report(ctx.task, ended);
      return;
    }
    try {
      if (!failed) await ctx.complete(result, this.o.doneStatus ?? "done");
      else await ctx.fail(err);
    } catch (e) {
      if (!(e instanceof Fenced) && !(e instanceof LeaseLost)) this.report(ctx.task, e);
    }
  }

  /** Ends the lease of a task cancelled while held, unless the handler gave it back itself (the server settled the cancellation then). */
  private async endCancelled(ctx: TaskContext, failed: boolean, err: unknown): Promise<void> {
    const handlerErr = failed && !(err instanceof CancelRequested) && !isAbort(err, ctx) ? err : undefined;
    if (ctx.error instanceof LeaseReleased) {
      if (handlerErr !== undefined) this.report(ctx.task, handlerErr);
      return;
    }
    if (!ctx.error) {
      try {
        await ctx.ackCancel();
      } catch (e) {
        if (!(e instanceof Fenced) && !(e instanceof LeaseLost)) this.report(ctx.task, e);
      }
    }
    const cause = ctx.cancelCause();
    if (handlerErr !== undefined) (cause as { cause?: unknown }).cause = handlerErr;
    this.report(ctx.task, cause);
  }
}

/** An error the handler threw because ctx.signal aborted (its reason, or an AbortError). */
function isAbort(e: unknown, ctx: TaskContext): boolean {
  return e === ctx.signal.reason || (e instanceof Error && e.name === "AbortError");
}
