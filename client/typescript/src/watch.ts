// Watch: a tenant's changes as an async iterator. The stream (Server-Sent
// Events) resumes on another endpoint after a broken connection, from the
// last event delivered (Last-Event-ID), and events seen before a reconnect
// are not delivered twice.

import type { IncomingMessage } from "node:http";
import type { BatonClient } from "./client.js";
import { query, seg } from "./client.js";
import { BatonError, Compacted, InvalidArgument, Unavailable, errorFromAnswer } from "./errors.js";
import type { WatchEvent } from "./models.js";
import { Backoff, sleep } from "./transport.js";

export interface WatchOptions {
  /** Any of tasks, refs, artifacts, kv, checkpoints, ops (the default: those six) and waitpoints (only when named). */
  resources?: string[];
  /** Only events whose key starts with it. */
  prefix?: string;
  /** Start after every event of this log index. */
  fromIndex?: number;
  /** Resume after this event id (INDEX or INDEX.POS). */
  afterId?: string;
  /** A stream silent this long (no event, no keepalive) is reopened (30 s). */
  idleTimeoutMs?: number;
}

/** INDEX or INDEX.POS as a sortable pair; INDEX (an index's last event) sorts last. */
function eventPos(id: string): [number, number] | undefined {
  const m = /^(\d+)(?:\.(\d+))?$/.exec(id);
  if (!m) return undefined;
  return [Number(m[1]), m[2] === undefined ? Number.MAX_SAFE_INTEGER : Number(m[2])];
}

function after(a: [number, number], b: [number, number]): boolean {
  return a[0] > b[0] || (a[0] === b[0] && a[1] > b[1]);
}

interface Message {
  id: string;
  event: string;
  data: string[];
}

export class Watch implements AsyncIterableIterator<WatchEvent> {
  private readonly path: string;
  private fromIndex: number | undefined;
  private cursor: string;
  private pos: [number, number] | undefined;
  private ep: number;
  private res: IncomingMessage | undefined;
  private lines: AsyncIterator<string> | undefined;
  private closed = false;
  private readonly idleMs: number;
  private readonly abort = new AbortController();
  /** The index (in the client's endpoints) of the node streaming, or to try next. */
  get endpointIndex(): number {
    return this.ep;
  }

  /** Streams opened after the first. */
  reconnects = 0;

  constructor(private readonly client: BatonClient, tenant: string, o: WatchOptions) {
    this.path = query("/v1/tenants/" + seg(tenant) + "/watch", { resources: o.resources?.length ? o.resources.join(",") : undefined, prefix: o.prefix || undefined });
    this.fromIndex = o.fromIndex;
    this.cursor = o.afterId ?? "";
    this.pos = o.afterId ? eventPos(o.afterId) : undefined;
    if (o.afterId && !this.pos) throw new InvalidArgument(`event id ${JSON.stringify(o.afterId)} is not INDEX or INDEX.POS`);
    this.idleMs = o.idleTimeoutMs ?? 30_000;
    this.ep = client.transport.preferredIndex;
  }

  /** The id of the last event delivered: pass it as afterId to resume later. */
  get lastId(): string {
    return this.cursor;
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<WatchEvent> {
    return this;
  }

  async next(): Promise<IteratorResult<WatchEvent>> {
    const ev = await this.nextEvent();
    return ev ? { value: ev, done: false } : { value: undefined, done: true };
  }

  return(): Promise<IteratorResult<WatchEvent>> {
    this.close();
    return Promise.resolve({ value: undefined, done: true });
  }

  /**
   * Opens the stream now (it opens on the first next() otherwise): without
   * fromIndex or afterId, the watch sees the changes applied after this.
   */
  async start(): Promise<void> {
    if (!this.lines && !this.closed) await this.connect();
  }

  close(): void {
    this.closed = true;
    this.abort.abort(new Error("watch closed"));
    this.drop();
  }

  private drop(): void {
    this.res?.destroy();
    this.res = undefined;
    this.lines = undefined;
  }

  private async connect(): Promise<void> {
    const h: Record<string, string> = { Accept: "text/event-stream" };
    let path = this.path;
    if (this.cursor) h["Last-Event-ID"] = this.cursor;
    else if (this.fromIndex) path = query(path, { from_index: this.fromIndex });
    const res = await this.client.openStream(path, h, this.abort.signal, this.ep);
    this.ep = res.endpointIndex;
    if (!this.cursor && !this.fromIndex) {
      // The stream starts at the node's applied index: a reconnect resumes
      // from there, so that no change in between is missed.
      const idx = Number(res.headers["x-baton-index"] ?? 0);
      if (idx > 0) this.fromIndex = idx;
    }
    res.setEncoding("utf8");
    res.setTimeout(this.idleMs, () => res.destroy(new Error(`watch stream silent for ${this.idleMs}ms`)));
    this.res = res;
    this.lines = linesOf(res);
  }

  private async nextEvent(): Promise<WatchEvent | undefined> {
    const n = this.client.transport.endpoints.length;
    const bo = new Backoff();
    let fails = 0;
    let started = 0;
    let cur: Message = { id: "", event: "", data: [] };
    let seen = false;
    while (!this.closed) {
      let failure: BatonError | undefined;
      let retryable = true;
      try {
        if (!this.lines) {
          if (fails) this.reconnects++;
          await this.connect();
          cur = { id: "", event: "", data: [] };
          seen = false;
        }
        const r = await this.lines!.next();
        if (r.done) throw new Unavailable("watch stream ended");
        const line = r.value;
        if (line === "") {
          if (!seen) continue;
          const m = cur;
          cur = { id: "", event: "", data: [] };
          seen = false;
          const data = m.data.join("\n");
          if (m.event === "error") {
            const err = errorFromAnswer(0, data);
            failure = err;
            retryable = err instanceof Compacted || err instanceof Unavailable;
          } else if (m.data.length) {
            const ev = this.event(m.id, data);
            if (ev) return ev;
            continue;
          } else {
            continue;
          }
        } else {
          if (line.startsWith(":")) continue;
          const c = line.indexOf(":");
          const name = c < 0 ? line : line.slice(0, c);
          let value = c < 0 ? "" : line.slice(c + 1);
          if (value.startsWith(" ")) value = value.slice(1);
          seen = true;
          if (name === "id") cur.id = value;
          else if (name === "event") cur.event = value;
          else if (name === "data") cur.data.push(value);
          continue;
        }
      } catch (e) {
        if (this.closed) return undefined;
        if (e instanceof BatonError) {
          failure = e;
          retryable = e instanceof Unavailable || e instanceof Compacted || e.code === "rate_limited";
        } else {
          failure = new Unavailable(`watch stream broke: ${(e as Error).message}`, { cause: e });
        }
      }
      if (this.closed) return undefined;
      this.drop();
      if (!retryable) throw failure;
      if (fails === 0) started = Date.now();
      fails++;
      this.ep = (this.ep + 1) % n;
      if (fails % n === 0) {
        if (failure instanceof Compacted) throw failure;
        const remaining = started + this.client.transport.maxRetryMs - Date.now();
        if (remaining <= 0) throw new Unavailable(`watch: no endpoint streams (${failure?.message})`);
        try {
          await sleep(bo.delay(0, remaining), this.abort.signal);
        } catch {
          return undefined;
        }
      }
    }
    return undefined;
  }

  private event(id: string, data: string): WatchEvent | undefined {
    const obj = JSON.parse(data) as Partial<WatchEvent>;
    const pos = id ? eventPos(id) : undefined;
    if (pos) {
      if (this.pos && !after(pos, this.pos)) return undefined; // delivered before a reconnect
      this.pos = pos;
      this.cursor = id;
    }
    return {
      id, index: Number(obj.index ?? pos?.[0] ?? 0), resource: String(obj.resource ?? ""), key: String(obj.key ?? ""),
      type: obj.type === "delete" ? "delete" : "put", ...(obj.value !== undefined ? { value: obj.value } : {}),
    };
  }
}

async function* linesOf(res: AsyncIterable<string>): AsyncGenerator<string> {
  let buf = "";
  for await (const s of res) {
    buf += s;
    let i: number;
    while ((i = buf.search(/\r\n|\n|\r/)) >= 0) {
      const nl = buf[i] === "\r" && buf[i + 1] === "\n" ? 2 : 1;
      yield buf.slice(0, i);
      buf = buf.slice(i + nl);
    }
    if (buf.length > 1 << 20) throw new Unavailable("watch event line over 1 MiB");
  }
}
