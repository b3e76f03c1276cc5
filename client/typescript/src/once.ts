// once: an external side effect performed at most once per op id, across
// retries, processes and crashes, through the operations ledger (as the Go
// SDK's Once and the Python SDK's once).

import { createHash } from "node:crypto";
import type { BatonClient } from "./client.js";
import { BatonError, OutcomeUnknown, Unavailable, VersionMismatch } from "./errors.js";
import type { Fence, Op } from "./models.js";
import { newIdempotencyKey } from "./transport.js";

/** The op ran before and failed, or fn failed now (cause: its error). */
export class OpFailed extends BatonError {
  static override readonly defaultCode = "op_failed";
}
/** The op is started or unknown: an earlier attempt may have performed it; reconcile, then finishOp. */
export class OpInDoubt extends BatonError {
  static override readonly defaultCode = "op_in_doubt";
}
/** fn ran, but its outcome could not be recorded. */
export class OpUnrecorded extends BatonError {
  static override readonly defaultCode = "op_unrecorded";
}

function canonical(v: unknown): string {
  if (v === null || v === undefined) return "null";
  if (Array.isArray(v)) return "[" + v.map(canonical).join(",") + "]";
  if (typeof v === "object") {
    // Keys in the byte order of their UTF-8, as Go's encoding/json sorts map keys.
    const keys = Object.keys(v).filter((k) => (v as Record<string, unknown>)[k] !== undefined)
      .sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    return "{" + keys.map((k) => JSON.stringify(k) + ":" + canonical((v as Record<string, unknown>)[k])).join(",") + "}";
  }
  const s = JSON.stringify(v);
  if (s === undefined) throw new TypeError(`params hold a value JSON cannot encode (${typeof v})`);
  return s;
}

/**
 * sha256 of the canonical JSON of params (keys sorted, no HTML escaping,
 * U+2028 and U+2029 escaped, a final newline), as the Go SDK's
 * ParamsDigest computes it for strings, integers, booleans, null, arrays
 * and objects.
 */
export function paramsDigest(params: unknown): string {
  const text = canonical(params).replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029");
  return "sha256:" + createHash("sha256").update(text + "\n").digest("hex");
}

function recorded(op: Op): unknown {
  if (op.state === "succeeded") return op.result;
  if (op.state === "failed") {
    const r = op.result as { error?: unknown } | null;
    throw new OpFailed(`op ${op.op_id} failed: ${typeof r?.error === "string" ? r.error : JSON.stringify(op.result)}`, { details: { op } });
  }
  throw new OpInDoubt(`op ${op.op_id} is ${op.state}: an earlier attempt may have performed it; reconcile, then finish it`, { details: { op } });
}

/**
 * Runs fn at most once per opId:
 * - a new op: runs fn, records succeeded with its result (JSON), or failed
 *   with {"error": message} and throws OpFailed;
 * - an op recorded before: fn does not run; succeeded returns the recorded
 *   result, failed throws OpFailed, started or unknown throws OpInDoubt;
 * - the same opId with other params is IdempotencyMismatch;
 * - an outcome that cannot be recorded throws OpUnrecorded.
 */
export async function once<T>(client: BatonClient, opId: string, fn: () => Promise<T>, o: {
  kind: string; params?: unknown; taskId?: string; fence?: Fence; tenant?: string;
}): Promise<T> {
  const tenant = client.tenantOf(o);
  const { op, created } = await client.beginOp(opId, { kind: o.kind, paramsDigest: paramsDigest(o.params ?? null), taskId: o.taskId, fence: o.fence },
    { tenant, idempotencyKey: newIdempotencyKey() });
  if (!created) return recorded(op) as T;
  let fnErr: unknown;
  let failed = false;
  let result: unknown;
  try {
    result = await fn();
  } catch (e) {
    failed = true;
    fnErr = e;
    result = { error: e instanceof Error ? e.message || e.name : JSON.stringify(e) ?? "error" };
  }
  const state = failed ? "failed" : "succeeded";
  const key = newIdempotencyKey();
  let rec: Op | undefined;
  let last: unknown;
  let inDoubt = false; // a finish got no answer and may have been recorded
  for (let i = 0; i < 2 && !rec; i++) {
    try {
      rec = await client.finishOp(opId, { state, result: result ?? null, fence: o.fence }, { tenant, idempotencyKey: key });
    } catch (e) {
      if (!(e instanceof Unavailable) && !(e instanceof OutcomeUnknown)) {
        throw new OpUnrecorded(`op ${opId} ran (outcome ${state}) but the ledger refused the outcome: ${(e as Error).message}`, { details: { state, result }, cause: e });
      }
      last = e;
      inDoubt ||= e instanceof OutcomeUnknown;
    }
  }
  if (!rec) {
    // Still started, unless a finish got no answer and may have been recorded: then unknown to us ("").
    let recordedAs = inDoubt ? "" : "started";
    try {
      rec = await client.finishOp(opId, { state: "unknown", result: result ?? null, fence: o.fence }, { tenant, idempotencyKey: newIdempotencyKey() });
      recordedAs = "unknown";
    } catch (e) {
      if (e instanceof VersionMismatch) {
        const cur = await client.getOp(opId, { tenant });
        if (cur.state === state) rec = cur;
      }
    }
    if (!rec || rec.state === "unknown") {
      const as = recordedAs ? `is recorded as ${recordedAs}` : "may or may not be recorded";
      throw new OpUnrecorded(`op ${opId} ran (outcome ${state}) but its outcome ${as}: ${(last as Error | undefined)?.message ?? ""}`, { details: { state, result } });
    }
  }
  if (rec.state === "failed") throw new OpFailed(`op ${opId} failed: ${fnErr instanceof Error ? fnErr.message : JSON.stringify(rec.result)}`, { details: { op: rec }, cause: fnErr });
  return rec.result as T;
}
