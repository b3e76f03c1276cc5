// once: a side effect performed at most once per op id, through the ledger.
import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatonClient, IdempotencyMismatch, OpFailed, OpInDoubt, TaskContext, once, paramsDigest } from "@baton-dev/client";
import { tenantClient, uid } from "./helpers.js";

let c: BatonClient;
beforeAll(async () => {
  c = await tenantClient();
});
afterAll(() => c.close());

describe("once", () => {
  it("digests params as the Go SDK's ParamsDigest (the Python SDK's vector)", () => {
    const want = "sha256:" + createHash("sha256").update(Buffer.from('{"a":[1,"<x>"],"b":null,"\xc3\xa9":true}\n', "latin1")).digest("hex");
    expect(paramsDigest({ "\u00e9": true, b: null, a: [1, "<x>"] })).toBe(want);
    expect(paramsDigest({ s: "\u2028" })).toBe("sha256:" + createHash("sha256").update('{"s":"\\u2028"}\n').digest("hex"));
  });

  it("runs fn once, returns the recorded result after, refuses other params", async () => {
    const id = uid("mail");
    let sent = 0;
    const send = () => Promise.resolve({ message_id: `m-${++sent}` });
    expect(await once(c, id, send, { kind: "send_email", params: { to: "ann" } })).toEqual({ message_id: "m-1" });
    expect(await once(c, id, send, { kind: "send_email", params: { to: "ann" } })).toEqual({ message_id: "m-1" });
    expect(sent).toBe(1);
    await expect(once(c, id, send, { kind: "send_email", params: { to: "bob" } })).rejects.toBeInstanceOf(IdempotencyMismatch);
  });

  it("records a failure, and an op left started is in doubt", async () => {
    const id = uid("op");
    await expect(once(c, id, () => Promise.reject(new Error("smtp down")), { kind: "k" })).rejects.toBeInstanceOf(OpFailed);
    const again = await once(c, id, () => Promise.resolve(1), { kind: "k" }).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(OpFailed);
    expect((again as Error).message).toContain("smtp down");
    const started = uid("op");
    await c.beginOp(started, { kind: "k", paramsDigest: paramsDigest(null) });
    await expect(once(c, started, () => Promise.resolve(1), { kind: "k" })).rejects.toBeInstanceOf(OpInDoubt);
  });

  it("runs under a worker's lease with the task's id and fence", async () => {
    const t = await c.createTask({ queue: uid("q") });
    const claimed = await c.claimTask(t.task_id, { owner: "w", leaseMs: 30_000 });
    const ctx = new TaskContext(c, c.tenant!, claimed, { leaseMs: 30_000, renewEveryMs: 10_000, safetyMarginMs: 1000, sentAt: Date.now() });
    const id = uid("op");
    expect(await ctx.once(id, () => Promise.resolve("done"), { kind: "publish" })).toBe("done");
    expect((await c.getOp(id)).task_id).toBe(t.task_id);
  });
});
