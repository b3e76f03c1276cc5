// The transport: one logical call, its attempts across the endpoints
// (failover, X-Baton-Leader), retries only where safe, and the client
// session that makes every write's retries exactly-once. It mirrors the Go
// SDK (client/retry.go, do.go, session.go): a connection error before an
// answer and a 503 are retried on the next endpoint; a 504 outcome_unknown
// only for a write that carries a session place or an Idempotency-Key; a
// 429 after its Retry-After. HTTP goes through node:http and node:https
// (keep-alive agents), which take a custom CA without any dependency.

import * as http from "node:http";
import * as https from "node:https";
import { randomBytes } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { Pool } from "undici";
import { BatonError, IdempotencyExpired, InvalidArgument, OutcomeUnknown, Unavailable, UnavailableInDoubt, errorFromAnswer } from "./errors.js";

export const DEFAULT_TIMEOUT_MS = 10_000;
export const DEFAULT_MAX_RETRY_MS = 15_000;
const BACKOFF_START_MS = 50;
const BACKOFF_CAP_MS = 250;
const USER_AGENT = "baton-typescript-client/0.1";
/** The most bytes of an answer the client reads (chunks are 4 MiB; JSON answers far less). */
const MAX_ANSWER_BYTES = 64 << 20;

export interface TransportOptions {
  endpoints: string[];
  token?: string | undefined;
  ca?: string | Buffer | undefined;
  /** A client certificate and its key (PEM), for a cluster that requires one (--client-ca-file). */
  cert?: string | Buffer | undefined;
  key?: string | Buffer | undefined;
  timeoutMs: number;
  maxRetryMs: number;
  sessions: boolean;
  maxSockets?: number | undefined;
}

/** The metadata of an answer. */
export interface Meta {
  status: number;
  /** X-Baton-Index: the Raft index the answer reflects. */
  index: number;
  /** X-Baton-Position: index in the unit of fencing tokens and KV versions. */
  position: number;
  /** Idempotent-Replay: the answer to an earlier attempt of the same write. */
  replay: boolean;
}

export interface Answer extends Meta {
  body: Buffer;
  headers: http.IncomingHttpHeaders;
}

interface Place {
  id: string;
  seq: number;
}

export interface Call {
  method: string;
  path: string;
  body?: Buffer | undefined;
  contentType?: string | undefined;
  /** Idempotency-Key, for writes. */
  key?: string | undefined;
  place?: Place | undefined;
  attempts: number;
  timeoutMs: number;
  /** The answer is a JSON value: a 200 or 201 without a body was cut on the way. */
  wantValue: boolean;
  extraHeaders?: Record<string, string> | undefined;
  signal?: AbortSignal | undefined;
}

interface Result {
  answer?: Answer;
  error?: BatonError;
  retry: boolean;
  answered: boolean;
  retryAfterMs: number;
  leader: string;
  rateLimited: boolean;
  /**
   * The request may have reached a node and been applied: sent, then no
   * (whole) answer, or a 504 outcome_unknown. A 503, a 429 or a connection
   * never made applied nothing.
   */
  maybeApplied?: boolean;
}

/** err as an UnavailableInDoubt when doubt, an earlier attempt's failure, may have applied. */
function inDoubt(err: BatonError | undefined, doubt: BatonError): BatonError | undefined {
  if (!(err instanceof Unavailable) || err instanceof OutcomeUnknown) return err;
  return new UnavailableInDoubt(`${err.message}; an earlier attempt got no answer and may have been applied (${doubt.message})`,
    { code: err.code, status: err.status, details: err.details, index: err.index, cause: err });
}

/** Error codes of a connection never made (nothing was sent). */
const NOT_SENT = new Set(["ECONNREFUSED", "ENOTFOUND", "EHOSTUNREACH", "ENETUNREACH", "EAI_AGAIN", "UND_ERR_CONNECT_TIMEOUT"]);

function notSent(e: unknown): boolean {
  for (let x: unknown = e, depth = 0; x && depth < 8; x = (x as { cause?: unknown }).cause, depth++) {
    const code = (x as { code?: unknown }).code;
    if (typeof code === "string" && NOT_SENT.has(code)) return true;
  }
  return false;
}

export function isWrite(method: string): boolean {
  return method === "POST" || method === "PUT" || method === "DELETE" || method === "PATCH";
}

/** host:port becomes https://host:port when a CA is given, else http://, as the CLI does. */
export function normalizeEndpoint(raw: string, tls: boolean): string {
  let ep = raw.trim();
  if (!ep.includes("://")) ep = (tls ? "https://" : "http://") + ep;
  let u: URL;
  try {
    u = new URL(ep);
  } catch {
    throw new InvalidArgument(`invalid endpoint ${JSON.stringify(raw)}`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    throw new InvalidArgument(`invalid endpoint ${JSON.stringify(raw)}: scheme must be http or https`);
  }
  if (u.username || u.password || u.search || u.hash || (u.pathname !== "/" && u.pathname !== "")) {
    throw new InvalidArgument(`invalid endpoint ${JSON.stringify(raw)}: must be host:port or a URL without a path, query or user info`);
  }
  return `${u.protocol}//${u.host}`;
}

export function parseRetryAfterMs(v: string | undefined): number {
  if (!v) return 0;
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const t = Date.parse(v);
  return Number.isNaN(t) ? 0 : Math.max(t - Date.now(), 0);
}

/** Doubles from 50 ms up to its cap, with jitter; a shorter Retry-After caps it. */
export class Backoff {
  private next: number;
  constructor(start = BACKOFF_START_MS, private readonly cap = BACKOFF_CAP_MS) {
    this.next = start;
  }
  delay(retryAfterMs = 0, remainingMs = Infinity): number {
    let d = this.next - Math.random() * (this.next / 4);
    this.next = Math.min(2 * this.next, this.cap);
    if (retryAfterMs > 0 && retryAfterMs < d) d = retryAfterMs;
    return Math.max(Math.min(d, remainingMs), 0);
  }
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(abortError(signal));
      return;
    }
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, Math.max(ms, 0));
    const onAbort = () => {
      clearTimeout(t);
      reject(abortError(signal));
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function abortError(signal: AbortSignal | undefined): Error {
  const r: unknown = signal?.reason;
  return r instanceof Error ? r : new Error("aborted");
}

/** A UUIDv7 (RFC 9562): a key that carries its creation time, as the Go SDK's NewIdempotencyKey. */
export function newIdempotencyKey(): string {
  const b = randomBytes(16);
  const ms = BigInt(Date.now());
  for (let i = 0; i < 6; i++) b[i] = Number((ms >> BigInt(8 * (5 - i))) & 0xffn);
  b[6] = (b[6]! & 0x0f) | 0x70;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export function checkIdempotencyKey(key: string): string {
  if (key.length < 1 || key.length > 128 || !/^[\x21-\x7e]+$/.test(key)) {
    throw new InvalidArgument("idempotency key must be 1 to 128 printable ASCII characters");
  }
  return key;
}

/** The client's session and its writes in flight (client/session.go). */
class Sessions {
  id = ""; // "": none open
  off: boolean;
  next = 1;
  inflight = new Set<number>();
  opening: Promise<void> | undefined;

  constructor(off: boolean) {
    this.off = off;
  }
  place(): Place | undefined {
    if (!this.id) return undefined;
    const p = { id: this.id, seq: this.next++ };
    this.inflight.add(p.seq);
    return p;
  }
  end(p: Place): void {
    if (this.id === p.id) this.inflight.delete(p.seq);
  }
  ack(id: string): number {
    if (this.id !== id) return 0; // an older session: acknowledge nothing
    let low = this.next;
    for (const s of this.inflight) if (s < low) low = s;
    return low;
  }
  drop(id: string): void {
    if (this.id === id) {
      this.id = "";
      this.inflight = new Set();
    }
  }
}

/** A session write refused without being applied: its session is gone, or its number forgotten. */
function refusedUnapplied(err: BatonError | undefined): { refused: boolean; gone: boolean } {
  if (!(err instanceof IdempotencyExpired)) return { refused: false, gone: false };
  const reason = err.details["reason"];
  if (reason === "session") return { refused: true, gone: true };
  if (reason === "seq") return { refused: true, gone: false };
  return { refused: false, gone: false };
}

/** What to check after a TLS failure: the server asked for a client certificate, or ours did not verify it. */
function certHint(msg: string): string {
  if (/certificate required|alert number 116/.test(msg)) {
    return "(the cluster requires a client certificate: certFile and keyFile, or BATON_CERT and BATON_KEY)";
  }
  if (/bad certificate|unknown ca|alert number 4[28]/.test(msg)) {
    return "(the cluster refused the client certificate: is it signed by its --client-ca-file?)";
  }
  return "(check the CA file)";
}

/** The TLS failure in e or in its causes (undici wraps a socket's error), if any. */
function certError(e: unknown): Error | undefined {
  for (let i = 0; i < 8 && e instanceof Error; i++, e = e.cause) {
    if (isCertError(e)) return e;
  }
  return undefined;
}

function isCertError(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return false;
  if (code === "ERR_SSL_WRONG_VERSION_NUMBER") return false; // not TLS at the other end: another endpoint may do
  return (
    code.startsWith("ERR_TLS_") ||
    code === "UNABLE_TO_VERIFY_LEAF_SIGNATURE" ||
    code === "SELF_SIGNED_CERT_IN_CHAIN" ||
    code === "DEPTH_ZERO_SELF_SIGNED_CERT" ||
    code === "CERT_HAS_EXPIRED" ||
    code === "UNABLE_TO_GET_ISSUER_CERT_LOCALLY" ||
    code.startsWith("ERR_SSL_")
  );
}

const PLAIN_PATH = /^\/[\w\-.~!$&'()*+,;=:@%/?]*$/;
const DOT_SEGMENT = /\/\.\.?(?:\/|$)/;

/** A path a URL leaves as it is: characters a URL keeps, no "." or ".." segment (the SDK's own paths). */
function plainPath(p: string): boolean {
  if (!PLAIN_PATH.test(p)) return false;
  const q = p.indexOf("?");
  return !DOT_SEGMENT.test(q < 0 ? p : p.slice(0, q));
}

/** Any other path (request()'s) as a URL makes it: percent-encoded, dot segments resolved, no fragment. */
function resolvedPath(endpoint: string, p: string): string {
  const u = new URL(endpoint + p);
  return u.pathname + u.search;
}

function header(h: http.IncomingHttpHeaders, name: string): string | undefined {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
}

function metaOf(status: number, h: http.IncomingHttpHeaders): Meta {
  const index = Number(header(h, "x-baton-index") ?? 0) || 0;
  let position = Number(header(h, "x-baton-position") ?? 0) || 0;
  if (position === 0 && index !== 0) position = index * 65536 + 0xffff;
  return { status, index, position, replay: header(h, "idempotent-replay") === "true" };
}

/** A whole answer to one attempt. */
interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

export class Transport {
  readonly endpoints: string[];
  readonly hosts: string[];
  readonly timeoutMs: number;
  readonly maxRetryMs: number;
  private readonly token: string | undefined;
  private readonly sess: Sessions;
  private preferred = 0;
  private readonly httpAgent: http.Agent;
  private readonly httpsAgent: https.Agent;
  /** Each endpoint's connections for calls (undici); streams (watches, downloads) go through the agents. */
  private readonly pools: Pool[];

  constructor(o: TransportOptions) {
    const tls = o.ca !== undefined || o.cert !== undefined;
    this.endpoints = o.endpoints.map((e) => normalizeEndpoint(e, tls));
    if (this.endpoints.length === 0) throw new InvalidArgument("at least one endpoint is required");
    this.hosts = this.endpoints.map((e) => new URL(e).host);
    this.timeoutMs = o.timeoutMs;
    this.maxRetryMs = o.maxRetryMs;
    this.token = o.token;
    this.sess = new Sessions(!o.sessions);
    const maxSockets = o.maxSockets ?? 256;
    this.httpAgent = new http.Agent({ keepAlive: true, maxSockets, maxFreeSockets: 64 });
    this.httpsAgent = new https.Agent({ keepAlive: true, maxSockets, maxFreeSockets: 64, ca: o.ca, cert: o.cert, key: o.key });
    // Idle connections are kept a minute (undici's default is 4 s without a Keep-Alive hint, which batond
    // does not send; it keeps them 2 minutes). Each attempt's own timer bounds connecting too.
    this.pools = this.endpoints.map((e) => new Pool(e, {
      connections: maxSockets, keepAliveTimeout: 60_000, connect: { ca: o.ca, cert: o.cert, key: o.key } }));
  }

  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
    // close(), not destroy(): calls in flight finish. A call after it goes through node:https (attempt).
    for (const p of this.pools) void p.close().catch(() => undefined);
  }

  get preferredIndex(): number {
    return this.preferred;
  }

  /** The request headers of one attempt. */
  headers(call: Call): Record<string, string> {
    const h: Record<string, string> = { Accept: "application/json", "User-Agent": USER_AGENT };
    if (call.contentType) h["Content-Type"] = call.contentType;
    if (this.token) h["Authorization"] = "Bearer " + this.token;
    if (call.key) h["Idempotency-Key"] = call.key;
    else if (call.place) {
      h["X-Baton-Session"] = call.place.id;
      h["X-Baton-Seq"] = String(call.place.seq);
      h["X-Baton-Ack"] = String(this.sess.ack(call.place.id));
    }
    return { ...h, ...(call.extraHeaders ?? {}) };
  }

  /**
   * Opens a request to one endpoint and returns its response once the
   * headers are in; the caller reads (or destroys) the body.
   */
  open(endpoint: string, call: Call, timeoutMs: number): Promise<IncomingMessage> {
    const url = new URL(endpoint + call.path);
    const mod = url.protocol === "https:" ? https : http;
    const agent = url.protocol === "https:" ? this.httpsAgent : this.httpAgent;
    return new Promise((resolve, reject) => {
      const hdrs = this.headers(call);
      if (call.body !== undefined) hdrs["Content-Length"] = String(call.body.length);
      const req = mod.request(url, { method: call.method, headers: hdrs, agent, signal: call.signal });
      const timer = setTimeout(() => req.destroy(Object.assign(new Error(`no answer within ${timeoutMs}ms`), { code: "ETIMEDOUT" })), timeoutMs);
      req.on("response", (res) => {
        clearTimeout(timer);
        resolve(res);
      });
      req.on("error", (e) => {
        clearTimeout(timer);
        reject(e);
      });
      req.end(call.body);
    });
  }

  /**
   * One attempt against endpoint idx: the answer's status, headers and whole body. The call's timeout
   * bounds the wait for the answer's head and then each wait for more of its body.
   */
  private async exchange(idx: number, call: Call): Promise<Reply> {
    // One timer bounds the whole attempt, connecting to the answer's last byte, to the millisecond
    // (undici's own timeouts tick in about a second and bound only the gaps between the body's parts).
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(Object.assign(new Error(`no answer within ${call.timeoutMs}ms`),
      { code: "ETIMEDOUT" })), call.timeoutMs);
    try {
      const path = plainPath(call.path) ? call.path : resolvedPath(this.endpoints[idx]!, call.path);
      const r = await this.pools[idx]!.request({
        path, method: call.method, headers: this.headers(call), body: call.body,
        signal: call.signal ? AbortSignal.any([call.signal, timeout.signal]) : timeout.signal,
      });
      const parts: Buffer[] = [];
      let n = 0;
      for await (const chunk of r.body as AsyncIterable<Buffer>) {
        n += chunk.length;
        if (n > MAX_ANSWER_BYTES) {
          r.body.destroy();
          throw new Error(`answer larger than ${MAX_ANSWER_BYTES} bytes`);
        }
        parts.push(chunk);
      }
      return { status: r.statusCode, headers: r.headers, body: parts.length === 1 ? parts[0]! : Buffer.concat(parts) };
    } finally {
      clearTimeout(timer);
    }
  }

  /** One attempt against endpoint idx, bounded by the call's timeout. */
  private async attempt(idx: number, call: Call): Promise<Result> {
    call.attempts++;
    const endpoint = this.endpoints[idx]!;
    let res: Reply;
    try {
      try {
        res = await this.exchange(idx, call);
      } catch (e) {
        // undici reports a connection the server ended as "other side closed", also when the server
        // refused the TLS handshake (a client certificate it requires): once more through node:https,
        // which reports the TLS alert. Sending again is what failover does anyway (a session number or
        // an Idempotency-Key makes it apply once); it counts as an attempt, so that a refusal of it is not
        // taken for the refusal of a first attempt that applied nothing.
        // A pool closed by close() sends nothing: the call goes through node:https, as every call did.
        const code = (e as { code?: unknown }).code;
        const closed = code === "UND_ERR_CLOSED" || code === "UND_ERR_DESTROYED";
        if (!closed && (code !== "UND_ERR_SOCKET" || !endpoint.startsWith("https:"))) throw e;
        if (!closed) call.attempts++;
        const started = Date.now();
        const r = await this.open(endpoint, call, call.timeoutMs);
        res = { status: r.statusCode ?? 0, headers: r.headers, body: await readBody(r, call.timeoutMs - (Date.now() - started)) };
      }
    } catch (e) {
      return this.transportFailure(endpoint, call, e);
    }
    const { status, body } = res;
    if (call.wantValue && body.length === 0 && (status === 200 || status === 201)) {
      // Cut on the way: the retry carries the same key or session number.
      return { retry: true, answered: false, retryAfterMs: 0, leader: "", rateLimited: false, maybeApplied: true,
        error: new Unavailable(`${status} answer without a body`) };
    }
    return classifyFor(call, status, res.headers, body);
  }

  transportFailure(endpoint: string, call: Call, e: unknown): Result {
    const where = `${call.method} ${endpoint}${call.path}`;
    const msg = e instanceof Error ? e.message : String(e);
    if (call.signal?.aborted) {
      return { retry: false, answered: false, retryAfterMs: 0, leader: "", rateLimited: false,
        error: new BatonError(`${where}: aborted`, { code: "aborted", cause: e }) };
    }
    const tls = certError(e);
    if (tls) {
      return { retry: false, answered: false, retryAfterMs: 0, leader: "", rateLimited: false,
        error: new BatonError(`${where}: ${tls.message} ${certHint(tls.message)}`, { code: "tls", cause: e }) };
    }
    return { retry: true, answered: false, retryAfterMs: 0, leader: "", rateLimited: false, maybeApplied: !notSent(e),
      error: new Unavailable(`${where}: ${msg}`, { cause: e }) };
  }

  prefer(answered: number, leader: string): void {
    if (leader) {
      const i = this.hosts.indexOf(leader);
      if (i >= 0) {
        this.preferred = i;
        return;
      }
    }
    this.preferred = answered;
  }

  /**
   * Tries the endpoints in turn, from the one that last answered, backing
   * off after each round of failures, until one answers or the retry budget
   * is spent. A write that ends without an answer after an attempt that may
   * have applied fails with an UnavailableInDoubt.
   */
  async failover(call: Call): Promise<Result> {
    const doubts: BatonError[] = []; // the failures of attempts that may have applied
    const res = await this.failoverAttempts(call, doubts);
    const doubt = doubts.at(-1);
    if (doubt && (!res.answered || res.rateLimited)) res.error = inDoubt(res.error, doubt);
    return res;
  }

  private async failoverAttempts(call: Call, doubts: BatonError[]): Promise<Result> {
    const keyed = call.key !== undefined || call.place !== undefined;
    const deadline = Date.now() + this.maxRetryMs;
    const n = this.endpoints.length;
    const start = this.preferred;
    const bo = new Backoff();
    let roundRetryAfter = 0;
    for (let i = 0; ; i++) {
      const idx = (start + i) % n;
      const res = await this.attempt(idx, call);
      if (res.answered) this.prefer(idx, res.leader);
      if (res.retry && res.maybeApplied && keyed && res.error) doubts.push(res.error);
      if (!res.retry) return res;
      const remaining = deadline - Date.now();
      if (res.rateLimited) {
        if (res.retryAfterMs >= remaining) return res;
        await sleep(res.retryAfterMs, call.signal);
        continue;
      }
      roundRetryAfter = Math.max(roundRetryAfter, res.retryAfterMs);
      let delay = 0;
      if ((i + 1) % n === 0) {
        delay = bo.delay(roundRetryAfter, remaining);
        roundRetryAfter = 0;
      }
      if (delay >= remaining || remaining <= 0) {
        if (res.error) res.error.message += ` (gave up after ${i + 1} attempts)`;
        return res;
      }
      await sleep(delay, call.signal);
    }
  }

  /** A write's place in the session, opening one first; undefined when the server has none. */
  private async beginWrite(): Promise<Place | undefined> {
    for (;;) {
      if (this.sess.off) return undefined;
      const p = this.sess.place();
      if (p) return p;
      if (this.sess.opening) {
        await this.sess.opening;
        continue;
      }
      let done!: () => void;
      this.sess.opening = new Promise<void>((r) => (done = r));
      try {
        // The open carries no key and no session: a retried open may leave
        // an unused session behind, which expires.
        const res = await this.failover({ method: "POST", path: "/v1/sessions", attempts: 0, timeoutMs: this.timeoutMs, wantValue: true });
        if (res.error) {
          if (res.error.status === 404 || res.error.status === 405) {
            this.sess.off = true;
            continue;
          }
          // The error as it came (Unavailable stays Unavailable: a Worker backs off and tries again).
          res.error.message = `open a client session: ${res.error.message}`;
          throw res.error;
        }
        const obj = JSON.parse(res.answer!.body.toString("utf8")) as { session_id?: unknown };
        const sid = typeof obj.session_id === "string" || typeof obj.session_id === "number" ? String(obj.session_id) : "";
        if (!/^[1-9]\d*$/.test(sid)) throw new BatonError(`open a client session: bad session_id ${JSON.stringify(sid)}`);
        this.sess.id = sid;
        this.sess.next = 1;
        this.sess.inflight = new Set();
      } finally {
        this.sess.opening = undefined;
        done();
      }
    }
  }

  /**
   * A write numbered in the client session. A first attempt refused because
   * the session is gone (or its number forgotten) applied nothing: it goes
   * again, once, in a new session or with a new number.
   */
  private async sendInSession(call: Call): Promise<Result> {
    for (let round = 0; ; round++) {
      const p = await this.beginWrite();
      if (!p) {
        call.key = newIdempotencyKey();
        return this.failover(call);
      }
      call.place = p;
      call.attempts = 0;
      let res: Result;
      try {
        res = await this.failover(call);
      } finally {
        this.sess.end(p);
      }
      const { refused, gone } = refusedUnapplied(res.error);
      if (refused && round === 0 && call.attempts === 1) {
        if (gone) this.sess.drop(p.id);
        continue;
      }
      return res;
    }
  }

  /** Sends a call: writes in the session (or with their key), reads as they are. */
  async send(call: Call, useSession = true): Promise<Answer> {
    const res = isWrite(call.method) && !call.key && useSession ? await this.sendInSession(call) : await this.failover(call);
    if (res.error) throw res.error;
    return res.answer!;
  }

  /** Drops the current session (tests: the next write opens another). */
  dropSession(): string {
    const id = this.sess.id;
    this.sess.drop(id);
    return id;
  }

  get sessionId(): string {
    return this.sess.id;
  }

  /** Numbers the next writes in session id, as if the client had opened it (tests: a session the cluster does not know). */
  useSession(id: string): void {
    this.sess.id = id;
    this.sess.next = 1;
    this.sess.inflight = new Set();
  }
}

/**
 * The Result of a complete answer to call: a 504 outcome_unknown is retried
 * only when the call carries what makes a retry safe (its Idempotency-Key
 * or session place), since the write may have been applied.
 */
export function classifyFor(call: Pick<Call, "key" | "place">, status: number, h: http.IncomingHttpHeaders, body: Buffer): Result {
  const r = classify(status, h, body);
  if (r.error?.code === "outcome_unknown" && (call.key || call.place)) r.retry = r.maybeApplied = true;
  return r;
}

export function classify(status: number, h: http.IncomingHttpHeaders, body: Buffer): Result {
  const meta = metaOf(status, h);
  const answer: Answer = { ...meta, body, headers: h };
  const leader = header(h, "x-baton-leader") ?? "";
  if (status < 300) return { answer, retry: false, answered: true, retryAfterMs: 0, leader, rateLimited: false };
  const error = errorFromAnswer(status, body.toString("utf8"), meta.index);
  const r: Result = { answer, error, retry: false, answered: false, retryAfterMs: 0, leader, rateLimited: false };
  if (status === 503) {
    r.retry = true;
    r.retryAfterMs = parseRetryAfterMs(header(h, "retry-after"));
  } else if (error.code === "outcome_unknown") {
    // Retried only for a write with a key or a session place (attempt decides).
    r.retryAfterMs = parseRetryAfterMs(header(h, "retry-after"));
  } else if (status === 429) {
    r.retry = r.answered = r.rateLimited = true;
    r.retryAfterMs = Math.max(parseRetryAfterMs(header(h, "retry-after")), 1000);
  } else {
    r.answered = true;
  }
  return r;
}

/** Reads a whole answer body, within timeoutMs and MAX_ANSWER_BYTES. */
export function readBody(res: IncomingMessage, timeoutMs: number, max = MAX_ANSWER_BYTES): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let n = 0;
    const timer = setTimeout(() => res.destroy(Object.assign(new Error("answer body not read in time"), { code: "ETIMEDOUT" })), Math.max(timeoutMs, 1));
    res.on("data", (b: Buffer) => {
      n += b.length;
      if (n > max) {
        res.destroy(new Error(`answer larger than ${max} bytes`));
        return;
      }
      parts.push(b);
    });
    res.on("end", () => {
      clearTimeout(timer);
      if (!res.complete) {
        reject(new Error("answer cut short"));
        return;
      }
      resolve(parts.length === 1 ? parts[0]! : Buffer.concat(parts));
    });
    res.on("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    res.on("aborted", () => {
      clearTimeout(timer);
      reject(new Error("answer cut short"));
    });
  });
}
