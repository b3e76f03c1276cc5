// BatonSaver: a LangGraph.js checkpointer on a Baton cluster.
//
// Checkpoints are kept in the client's default tenant, replicated to the
// cluster's members, so a graph survives the loss of a node. Channel values
// are stored once per (channel, version) of a namespace (Baton's blobs, as
// LangGraph's Postgres saver keeps checkpoint_blobs); pending writes per
// (task, idx), with LangGraph's negative indexes for its special channels.
// Serialized values travel base64 inside JSON.
//
// Puts are fork-proof: a run that extends the thread it loaded (getTuple
// without a checkpoint_id, or its own last put) extends it only while it is
// still the thread's head, so two processes resuming one thread at once
// cannot both extend it: one wins, the other gets ThreadConflict. A put
// from a checkpoint the run asked for by id (time travel) or never saw as
// the head forks, as LangGraph means it to.

import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver, TASKS, WRITES_IDX_MAP, compareWritesSortKeys, getCheckpointId, maxChannelVersion, writesSortKey,
} from "@langchain/langgraph-checkpoint";
import type {
  ChannelVersions, Checkpoint, CheckpointListOptions, CheckpointMetadata, CheckpointPendingWrite, CheckpointTuple,
  PendingWrite, SerializerProtocol,
} from "@langchain/langgraph-checkpoint";
import { text, type BatonClient } from "./client.js";
import { InvalidArgument, NotFound, VersionMismatch } from "./errors.js";
import type { Blob, Checkpoint as StoredCheckpoint } from "./models.js";

/** How many (thread, namespace, checkpoint) heads a saver remembers having seen. */
export const HEADS_REMEMBERED = 10_000;
/** The most bytes of new channel values a put sends as blobs (within the 1 MiB request, after base64). */
export const BLOBS_INLINE_MAX = 640 << 10;

/** Another process extended the thread first: this run's checkpoint was not written. */
export class ThreadConflict extends VersionMismatch {}

type Typed = [string, string]; // [serde type, base64 bytes]

interface StoredData {
  checkpoint: Typed;
  channel_values?: Record<string, Typed>;
}

/** The checkpoints this saver saw as the head of their namespace, least recently used first. */
class Heads {
  private readonly seen = new Map<string, true>();
  constructor(private readonly size = HEADS_REMEMBERED) {}
  private static key(thread: string, ns: string, id: string): string {
    return JSON.stringify([thread, ns, id]);
  }
  saw(thread: string, ns: string, id: string): void {
    const k = Heads.key(thread, ns, id);
    this.seen.delete(k);
    this.seen.set(k, true);
    while (this.seen.size > this.size) this.seen.delete(this.seen.keys().next().value!);
  }
  forget(thread: string, ns: string, id: string): void {
    this.seen.delete(Heads.key(thread, ns, id));
  }
  has(thread: string, ns: string, id: string): boolean {
    return this.seen.has(Heads.key(thread, ns, id));
  }
}

function b64(b: Uint8Array): string {
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("base64");
}

function configurable(config: RunnableConfig): Record<string, unknown> {
  const c = config.configurable;
  if (!c || c["thread_id"] === undefined || c["thread_id"] === null) {
    throw new InvalidArgument('a Baton checkpointer needs config.configurable.thread_id');
  }
  return c;
}

export class BatonSaver extends BaseCheckpointSaver<number> {
  private readonly heads = new Heads();

  constructor(readonly client: BatonClient, serde?: SerializerProtocol) {
    super(serde);
  }

  /**
   * The next channel version: the next integer plus a random fraction, so
   * that two forks of one checkpoint never give different values the same
   * version (values are stored once per channel version, the first kept).
   * Numbers, as LangGraph.js's graphs take savers of number versions.
   */
  override getNextVersion(current: number | undefined): number {
    const n = typeof current === "number" ? Math.floor(current) : Number.parseInt(String(current ?? 0), 10) || 0;
    return n + 1 + Math.random() * 0.999;
  }

  private async typed(value: unknown): Promise<Typed> {
    const [t, bytes] = await this.serde.dumpsTyped(value);
    return [t, b64(bytes)];
  }

  private async untyped(v: unknown): Promise<unknown> {
    const [t, data] = v as Typed;
    return this.serde.loadsTyped(t, Buffer.from(data, "base64"));
  }

  override async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const c = config.configurable ?? {};
    if (c["thread_id"] === undefined || c["thread_id"] === null) return undefined;
    const thread = text(c["thread_id"]);
    const ns = text(c["checkpoint_ns"] ?? "");
    const cid = getCheckpointId(config);
    let cp: StoredCheckpoint;
    try {
      if (cid) {
        cp = await this.client.getCheckpoint(thread, cid, { ns });
        this.heads.forget(thread, ns, cid); // asked for by id: a put from it forks
      } else {
        cp = await this.client.latestCheckpoint(thread, { ns });
        this.heads.saw(thread, ns, cp.checkpoint_id);
      }
    } catch (e) {
      if (!(e instanceof NotFound)) throw e;
      if (!cid) this.heads.saw(thread, ns, "");
      return undefined;
    }
    return this.tuple(cp, ns);
  }

  override async *list(config: RunnableConfig, options: CheckpointListOptions = {}): AsyncGenerator<CheckpointTuple> {
    const c = config?.configurable ?? {};
    const thread = c["thread_id"] === undefined || c["thread_id"] === null ? undefined : text(c["thread_id"]);
    const ns = c["checkpoint_ns"] === undefined || c["checkpoint_ns"] === null ? undefined : String(c["checkpoint_ns"]);
    const beforeId = options.before ? getCheckpointId(options.before) || undefined : undefined;
    const filter = options.filter && Object.keys(options.filter).length ? (options.filter as Record<string, unknown>) : undefined;
    const limit = options.limit;
    if (limit !== undefined && limit <= 0) return;
    const onlyId = c["checkpoint_id"] ? text(c["checkpoint_id"]) : undefined;
    // One request per page, across threads and namespaces when either is absent.
    const pages = this.client.iterTenantCheckpoints({ thread, ns, filter, beforeId, limit: onlyId ? undefined : limit, pendingWrites: true });
    let n = 0;
    for await (let cp of pages) {
      if (onlyId && cp.checkpoint_id !== onlyId) continue;
      if (cp.data === null && cp.data_chunks?.length) {
        cp = await this.client.getCheckpoint(cp.thread_id, cp.checkpoint_id, { ns: cp.checkpoint_ns });
      }
      yield await this.tuple(cp, cp.checkpoint_ns ?? "");
      if (limit !== undefined && ++n >= limit) return;
    }
  }

  override async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    const c = configurable(config);
    const thread = text(c["thread_id"]);
    const ns = text(c["checkpoint_ns"] ?? "");
    const parent = c["checkpoint_id"] ? text(c["checkpoint_id"]) : "";
    const guarded = this.heads.has(thread, ns, parent);
    const md = JSON.parse(JSON.stringify(metadata ?? {})) as unknown;
    const { channel_values: values, ...rest } = checkpoint;
    const data: StoredData = { checkpoint: await this.typed(rest) };
    let blobVersions: Record<string, string> = {};
    let blobs: Blob[] = [];
    const versions = checkpoint.channel_versions ?? {};
    const entries = Object.entries(values ?? {});
    let size = 0;
    let inline = false;
    for (const [ch, value] of entries) {
      const ver = versions[ch];
      if (ver === undefined) {
        inline = true;
        break;
      }
      blobVersions[ch] = String(ver);
      if (ch in newVersions) {
        const [type, bytes] = await this.serde.dumpsTyped(value);
        blobs.push({ channel: ch, version: String(ver), type, b64: b64(bytes) });
        size += bytes.length;
      }
    }
    if (inline || size > BLOBS_INLINE_MAX) {
      // Values without a version, or too large for one request beside the
      // data: they travel inside the checkpoint's data.
      data.channel_values = {};
      for (const [ch, value] of entries) data.channel_values[ch] = await this.typed(value);
      blobVersions = {};
      blobs = [];
    }
    const send = () => this.client.putCheckpoint(thread, checkpoint.id, data, { ns, parentId: parent || undefined, metadata: md, fork: !guarded, blobVersions, blobs });
    try {
      try {
        await send();
      } catch (e) {
        const missing = e instanceof InvalidArgument ? e.details["missing_blobs"] : undefined;
        if (!Array.isArray(missing)) throw e;
        // Values this put took as stored (not in newVersions) that no
        // checkpoint of the namespace holds: not stored, as LangGraph's
        // Postgres saver leaves a checkpoint_blobs row it never wrote.
        const gone = new Set(missing.map(String));
        for (const [ch, ver] of Object.entries(blobVersions)) if (gone.has(`${ch}@${ver}`)) delete blobVersions[ch];
        await send();
      }
    } catch (e) {
      if (e instanceof VersionMismatch) throw conflict(e, thread, ns, parent);
      throw e;
    }
    this.heads.saw(thread, ns, checkpoint.id);
    return { configurable: { thread_id: thread, checkpoint_ns: ns, checkpoint_id: checkpoint.id } };
  }

  override async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    const c = configurable(config);
    const cid = c["checkpoint_id"];
    if (!cid) throw new InvalidArgument("putWrites needs config.configurable.checkpoint_id");
    const ws = await Promise.all(writes.map(async ([channel, value], i) => ({ channel, value: await this.typed(value), idx: WRITES_IDX_MAP[channel] ?? i })));
    await this.client.putWrites(text(c["thread_id"]), text(cid), taskId, ws, { ns: text(c["checkpoint_ns"] ?? ""), taskPath: taskPath || undefined });
  }

  override async deleteThread(threadId: string): Promise<void> {
    try {
      await this.client.deleteThread(String(threadId));
    } catch (e) {
      if (!(e instanceof NotFound)) throw e; // nothing to delete
    }
  }

  /** Deletes the checkpoints put with these run ids (metadata.run_id), in every thread. */
  async deleteForRuns(runIds: string[]): Promise<void> {
    if (runIds.length) await this.client.deleteRuns(runIds.map(String));
  }
  /** Copies every checkpoint and pending write of a thread to another. */
  async copyThread(source: string, target: string): Promise<void> {
    await this.client.copyThread(source, target);
  }
  /** keep_latest keeps each namespace's head; delete deletes the threads. */
  async prune(threadIds: string[], strategy: "keep_latest" | "delete" = "keep_latest"): Promise<void> {
    if (threadIds.length) await this.client.pruneCheckpoints(threadIds.map(String), strategy);
  }

  private async tuple(cp: StoredCheckpoint, ns: string): Promise<CheckpointTuple> {
    const data = (cp.data ?? {}) as Partial<StoredData>;
    if (!data.checkpoint) throw new InvalidArgument(`checkpoint ${cp.checkpoint_id} of thread ${cp.thread_id} was not written by a LangGraph saver`);
    const checkpoint = (await this.untyped(data.checkpoint)) as Checkpoint;
    const values: Record<string, unknown> = {};
    for (const [ch, v] of Object.entries(data.channel_values ?? {})) values[ch] = await this.untyped(v);
    for (const b of cp.blobs ?? []) values[b.channel] = await this.serde.loadsTyped(b.type, Buffer.from(b.b64, "base64"));
    checkpoint.channel_values = values;
    const thread = cp.thread_id;
    const pending = [...(cp.pending_writes ?? [])].sort((a, b) =>
      compareWritesSortKeys(writesSortKey(a.task_path ?? "", a.task_id, a.idx), writesSortKey(b.task_path ?? "", b.task_id, b.idx)));
    const pendingWrites: CheckpointPendingWrite[] = await Promise.all(pending.map(async (w) => [w.task_id, w.channel, await this.untyped(w.value)] as CheckpointPendingWrite));
    if (checkpoint.v < 4 && cp.parent_id) await this.migratePendingSends(checkpoint, thread, ns, cp.parent_id);
    const t: CheckpointTuple = {
      config: { configurable: { thread_id: thread, checkpoint_ns: ns, checkpoint_id: cp.checkpoint_id } },
      checkpoint,
      metadata: (cp.metadata ?? {}) as CheckpointMetadata,
      pendingWrites,
    };
    if (cp.parent_id) t.parentConfig = { configurable: { thread_id: thread, checkpoint_ns: ns, checkpoint_id: cp.parent_id } };
    return t;
  }

  /** Checkpoints before format 4 kept pending sends as the parent's TASKS writes: move them into the checkpoint. */
  private async migratePendingSends(checkpoint: Checkpoint, thread: string, ns: string, parentId: string): Promise<void> {
    let parent: StoredCheckpoint;
    try {
      parent = await this.client.getCheckpoint(thread, parentId, { ns });
    } catch (e) {
      if (e instanceof NotFound) return;
      throw e;
    }
    const sends = [...(parent.pending_writes ?? [])]
      .filter((w) => w.channel === TASKS)
      .sort((a, b) => compareWritesSortKeys(writesSortKey(a.task_path ?? "", a.task_id, a.idx), writesSortKey(b.task_path ?? "", b.task_id, b.idx)));
    checkpoint.channel_values ??= {};
    checkpoint.channel_values[TASKS] = await Promise.all(sends.map((w) => this.untyped(w.value)));
    checkpoint.channel_versions ??= {};
    const vs = Object.values(checkpoint.channel_versions);
    checkpoint.channel_versions[TASKS] = vs.length > 0 ? maxChannelVersion(...vs) : this.getNextVersion(undefined);
  }
}

function conflict(e: VersionMismatch, thread: string, ns: string, parent: string): ThreadConflict {
  const where = `thread ${JSON.stringify(thread)}` + (ns ? ` (namespace ${JSON.stringify(ns)})` : "");
  return new ThreadConflict(
    `another process extended ${where} first: its head is ${e.currentHead || "none"}, not ${parent || "empty"} as this run loaded it; ` +
      "this checkpoint was not written (load the thread again to continue from its head)",
    { code: e.code, status: e.status, details: e.details, index: e.index, cause: e },
  );
}
