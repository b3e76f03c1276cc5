// Watch (an async iterator that resumes) and Worker (background renewal,
// fencing carried into the handler's writes).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatonClient, Fenced, LeaseLost, TaskContext, Worker, type WatchEvent } from "@baton-dev/client";
import { Cluster, waitFor } from "./cluster.js";
import { tenantClient, uid } from "./helpers.js";

let c: BatonClient;
beforeAll(async () => {
  c = await tenantClient();
});
afterAll(() => c.close());

async function take(it: AsyncIterator<WatchEvent>, n: number): Promise<WatchEvent[]> {
  const out: WatchEvent[] = [];
  while (out.length < n) {
    const r = await it.next();
    if (r.done) break;
    out.push(r.value);
  }
  return out;
}

describe("watch", () => {
  it("streams changes in log order and resumes after the last event delivered", async () => {
    const ns = uid("ns");
    const first = await c.kvPut(ns, "k0", 0);
    const w = c.watch({ resources: ["kv"], prefix: ns + "/", fromIndex: Math.floor(first.version / 65536) - 1 });
    await c.kvPut(ns, "k1", 1);
    await c.kvDelete(ns, "k0");
    const evs = await take(w, 3);
    expect(evs.map((e) => [e.key, e.type])).toEqual([[`${ns}/k0`, "put"], [`${ns}/k1`, "put"], [`${ns}/k0`, "delete"]]);
    expect((evs[1]!.value as { value: number }).value).toBe(1);
    const last = w.lastId;
    w.close();
    expect((await w.next()).done).toBe(true);
    await c.kvPut(ns, "k2", 2);
    const again = c.watch({ resources: ["kv"], prefix: ns + "/", afterId: last });
    const [next] = await take(again, 1);
    expect(next!.key).toBe(`${ns}/k2`);
    again.close();
  });

  it("reconnects to another node when its node dies, without losing or repeating events", async () => {
    const cl = new Cluster();
    await cl.start();
    try {
      const a = new BatonClient({ endpoints: cl.endpoints, token: cl.token, caFile: cl.ca });
      const tenant = uid("t");
      await a.createTenant(tenant);
      const wc = new BatonClient({ endpoints: cl.endpoints, token: cl.token, caFile: cl.ca, tenant });
      const w = wc.watch({ resources: ["kv"] });
      const it = w[Symbol.asyncIterator]();
      await w.start();
      await wc.kvPut("ns", "k0", 0);
      const [e0] = await take(it, 1);
      expect(e0!.key).toBe("ns/k0");
      // Kill the node the watch streams from.
      const streaming = w.endpointIndex;
      await cl.kill(streaming);
      const writer = new BatonClient({ endpoints: cl.endpoints, token: cl.token, caFile: cl.ca, tenant });
      for (let i = 1; i <= 5; i++) await writer.kvPut("ns", `k${i}`, i);
      const evs = await take(it, 5);
      expect(evs.map((e) => e.key)).toEqual(["ns/k1", "ns/k2", "ns/k3", "ns/k4", "ns/k5"]);
      expect(w.reconnects).toBeGreaterThan(0);
      w.close();
      for (const x of [a, wc, writer]) x.close();
    } finally {
      await cl.stop();
    }
  });
});

describe("worker", () => {
  it("runs the handler on each task, completes it with its result, fails a throwing one", async () => {
    const q = uid("q");
    for (let i = 0; i < 6; i++) await c.createTask({ queue: q, task_id: `${q}-${i}`, payload: { i }, max_attempts: 1 });
    const errors: string[] = [];
    const w = new Worker(c, q, async (ctx) => {
      const i = (ctx.task.payload as { i: number }).i;
      if (i === 5) throw new Error("five is bad");
      await ctx.kvPut("results", ctx.task.task_id, i * i);
      return { square: i * i };
    }, { concurrency: 3, leaseMs: 5000, waitMs: 200, onError: (t, e) => errors.push(`${t.task_id}: ${(e as Error).message}`) });
    const run = w.run();
    await waitFor(async () => {
      const st = await c.queueStats(q);
      return (st.by_status["done"] ?? 0) === 5 && st.dead === 1;
    }, "five done and one dead");
    w.stop();
    await run;
    expect((await c.getTask(`${q}-3`)).result).toEqual({ square: 9 });
    expect((await c.kvGet("results", `${q}-4`)).value).toBe(16);
    const dead = await c.getTask(`${q}-5`);
    expect([dead.status, dead.last_error]).toEqual(["dead", "five is bad"]);
    expect(errors).toEqual([`${q}-5: five is bad`]);
  });

  it("renews the lease in the background while the handler runs longer than the lease", async () => {
    const q = uid("q");
    const t = await c.createTask({ queue: q });
    let tokens: number[] = [];
    const w = new Worker(c, q, async (ctx) => {
      // Held until the lease was moved twice by the background renewals.
      const seen = new Set<string>();
      await waitFor(async () => {
        seen.add((await c.getTask(ctx.task.task_id)).lease_until!);
        return seen.size >= 3;
      }, "two renewals", 20_000, 50);
      tokens = [ctx.token];
      await ctx.kvPut("held", ctx.task.task_id, true);
      return "ok";
    }, { leaseMs: 900, waitMs: 100 });
    expect(await w.runOnce()).toBe(true);
    const done = await c.getTask(t.task_id);
    expect([done.status, done.result, done.fencing_token]).toEqual(["done", "ok", tokens[0]]);
  });

  it("renews at once a task won at the end of a long poll", async () => {
    // The lease counts from when the claim was sent. Before, the first renewal came renewEveryMs after
    // the claim returned: with a 3 s lease, a claim that waited 2 s had its deadline (2.7 s after it
    // was sent) pass before that, and the task was given up as lost.
    const q = uid("q");
    let sent = 0;
    const w = new Worker(c, q, async (ctx) => {
      await waitFor(() => Date.now() - sent >= 2_900, "the claim's own deadline to pass", 20_000, 50);
      if (ctx.lost) throw new Error("the lease was given up");
      return "ok";
    }, { leaseMs: 3_000, waitMs: 10_000 });
    sent = Date.now();
    const run = w.runOnce();
    await waitFor(() => Date.now() - sent >= 2_000, "2 s of the claim's wait", 20_000, 50);
    const t = await c.createTask({ queue: q });
    expect(await run).toBe(true);
    const done = await c.getTask(t.task_id);
    expect([done.status, done.result]).toEqual(["done", "ok"]);
  }, 30_000);

  it("carries the fence into the handler's writes: a lease taken over refuses them", async () => {
    const q = uid("q");
    const t = await c.createTask({ queue: q });
    const sentAt = Date.now();
    const claimed = (await c.claim(q, { owner: "slow", leaseMs: 300 }))!;
    // No renewer: the lease runs out and another worker claims the task.
    const ctx = new TaskContext(c, c.tenant!, claimed, { leaseMs: 60_000, renewEveryMs: 20_000, safetyMarginMs: 1000, sentAt });
    await ctx.kvPut("out", t.task_id, "first");
    const successor = await waitFor(() => c.claimTask(t.task_id, { owner: "fast", leaseMs: 30_000 }).catch(() => undefined), "the successor's claim");
    const err = await ctx.kvPut("out", t.task_id, "stale").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Fenced);
    expect((err as Fenced).currentToken).toBe(successor.fencing_token);
    expect(ctx.lost).toBe(true);
    expect(ctx.signal.aborted).toBe(true);
    await expect(ctx.setRef("r", "sha256:" + "0".repeat(64))).rejects.toBeInstanceOf(LeaseLost);
    expect((await c.kvGet("out", t.task_id)).value).toBe("first");
  });
});
