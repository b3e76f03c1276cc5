// Issue 32's coordination primitives against the three-node cluster:
// dependencies with result passing, cancellation seen by a Worker,
// waitpoints, flow control, schedules, running counts.
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  BatonClient, CancelRequested, Fenced, InvalidArgument, NotFound, RateLimited, VersionMismatch, Worker, scheduleTaskId,
  type TaskContext, type Waitpoint, type WatchEvent,
} from "@baton-dev/client";
import { waitFor } from "./cluster.js";
import { admin, tenantClient, uid } from "./helpers.js";

let c: BatonClient;
beforeAll(async () => {
  c = await tenantClient();
});
afterAll(() => c.close());

it("passes a dependency chain's results and artifacts, and applies the policy", async () => {
  const q = uid("chain");
  const art = await c.uploadArtifact(uid("notes"), new TextEncoder().encode("research notes"));
  const a = await c.createTask({ queue: q, task_id: `${q}-a` });
  const b = await c.createTask({ queue: q, task_id: `${q}-b`, depends_on: [a.task_id] });
  const d = await c.createTask({ queue: q, task_id: `${q}-c`, depends_on: [b.task_id], dependency_policy: "cancel" });
  expect([b.depends_on_count, b.dependencies_left, b.dependency_policy]).toEqual([1, 1, "fail"]);
  await expect(c.createTask({ queue: q, depends_on: ["no-such-task"] })).rejects.toBeInstanceOf(InvalidArgument);
  expect((await c.queueStats(q)).blocked).toBe(2);

  let got = await c.claim(q, { owner: "w", leaseMs: 10_000 });
  expect(got?.task_id).toBe(a.task_id);
  expect((await c.queueStats(q)).running).toBe(1);
  await c.updateTask(a.task_id, { fencingToken: got!.fencing_token, status: "done", result: { pages: 3 }, artifactId: art.artifact_id, release: true });

  got = await c.claim(q, { owner: "w", leaseMs: 10_000 });
  expect(got?.task_id).toBe(b.task_id);
  expect(got!.dependencies).toEqual([{ task_id: a.task_id, resolved: true, status: "done", result: { pages: 3 }, artifact_id: art.artifact_id }]);
  expect(await c.claim(q, { owner: "w", leaseMs: 10_000 })).toBeUndefined();
  await c.updateTask(b.task_id, { fencingToken: got!.fencing_token, status: "done", result: { summary: 6 }, release: true });

  got = await c.claim(q, { owner: "w", leaseMs: 10_000 });
  expect(got?.task_id).toBe(d.task_id);
  expect(got!.dependencies!.map((x) => x.result)).toEqual([{ summary: 6 }]);
  const deps = [];
  for await (const x of c.iterTaskDependencies(d.task_id, { pageSize: 1 })) deps.push([x.task_id, x.resolved, x.status]);
  expect(deps).toEqual([[b.task_id, true, "done"]]);

  const x = await c.createTask({ queue: q + "-x" });
  const y = await c.createTask({ queue: q + "-y", depends_on: [x.task_id], dependency_policy: "cancel" });
  const xc = await c.claim(q + "-x", { owner: "w", leaseMs: 10_000 });
  await c.failTask(x.task_id, { fencingToken: xc!.fencing_token, error: "broken", nonRetryable: true });
  const yy = await c.getTask(y.task_id);
  expect([yy.status, yy.dependencies_left]).toEqual(["cancelled", 0]);
});

it("cancels a leased task: the Worker aborts the handler's signal, acknowledges, and the old token is fenced", async () => {
  const q = uid("cq");
  const t = await c.createTask({ queue: q });
  let token = 0;
  let reason: unknown;
  let started!: () => void;
  const running = new Promise<void>((r) => (started = r));
  const errors: unknown[] = [];
  const handler = async (ctx: TaskContext): Promise<string> => {
    token = ctx.token;
    started();
    // Long work that stops when the signal fires.
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 30_000);
      ctx.signal.addEventListener("abort", () => {
        clearTimeout(timer);
        resolve();
      });
    });
    reason = ctx.signal.reason;
    return "finished";
  };
  const w = new Worker(c, q, handler, { leaseMs: 1500, waitMs: 1000, onError: (_t, e) => errors.push(e) });
  const run = w.runOnce();
  await running;
  const r = await c.cancelTask(t.task_id, { reason: "no longer needed" });
  expect(r.cancel_requested).toBe(true);
  expect(await run).toBe(true);
  expect(reason).toBeInstanceOf(CancelRequested);
  expect(errors.map((e) => (e as Error).constructor)).toEqual([CancelRequested]);
  const done = await c.getTask(t.task_id);
  expect([done.status, done.owner, done.result]).toEqual(["cancelled", "", null]);
  expect(done.cancel_requested).toBeUndefined();
  await expect(c.kvPut("out", t.task_id, "late", { fence: { task_id: t.task_id, token } })).rejects.toBeInstanceOf(Fenced);
  await expect(c.updateTask(t.task_id, { fencingToken: token, status: "done" })).rejects.toBeInstanceOf(Fenced);
});

it("heartbeat throws CancelRequested once the task is cancelled", async () => {
  const q = uid("hq");
  const t = await c.createTask({ queue: q });
  const errors: unknown[] = [];
  const w = new Worker(c, q, async (ctx) => {
    await c.cancelTask(ctx.task.task_id);
    await ctx.heartbeat();
  }, { waitMs: 1000, onError: (_t, e) => errors.push(e) });
  expect(await w.runOnce()).toBe(true);
  expect(errors.map((e) => (e as Error).constructor)).toEqual([CancelRequested]);
  expect((await c.getTask(t.task_id)).status).toBe("cancelled");
});

it("parks a task on a waitpoint, long-polls it, completes it once, claims with the payload", async () => {
  const q = uid("wq");
  const wp = await c.createWaitpoint({ timeoutMs: 3_600_000, waitpointId: uid("approve") });
  expect([wp.state, wp.resolved_at]).toEqual(["pending", null]);
  const t = await c.createTask({ queue: q });
  const seen: unknown[] = [];
  const w = new Worker(c, q, async (ctx) => {
    if (!ctx.task.waitpoint) {
      await ctx.park(wp.waitpoint_id);
      return undefined;
    }
    seen.push(ctx.task.waitpoint);
    return { approved: (ctx.task.waitpoint.payload as { approved: boolean }).approved };
  }, { waitMs: 1000 });
  expect(await w.runOnce()).toBe(true);
  const parked = await c.getTask(t.task_id);
  expect([parked.parked, parked.waitpoint_id, parked.owner]).toEqual([true, wp.waitpoint_id, ""]);
  expect((await c.getWaitpoint(wp.waitpoint_id)).task_id).toBe(t.task_id);
  expect(await c.claim(q, { owner: "x", leaseMs: 10_000 })).toBeUndefined();
  await expect(c.claimTask(t.task_id, { owner: "x", leaseMs: 10_000 })).rejects.toBeInstanceOf(VersionMismatch);

  // A long poll answers once it is completed; a watch sees the completion.
  const poll: Promise<Waitpoint> = c.getWaitpoint(wp.waitpoint_id, { waitMs: 30_000 });
  const { meta } = await c.call("GET", `/v1/tenants/${c.tenant!}/waitpoints/${wp.waitpoint_id}`);
  const done = await c.completeWaitpoint(wp.waitpoint_id, { approved: true, by: "alice" });
  const polled = await poll;
  expect([polled.state, polled.payload]).toEqual(["completed", { approved: true, by: "alice" }]);
  const watch = c.watch({ resources: ["waitpoints"], fromIndex: meta.index });
  const next = await watch.next();
  watch.close();
  expect(next.done).toBe(false);
  const ev = next.value as WatchEvent;
  expect([ev.resource, ev.key, ev.type]).toEqual(["waitpoints", wp.waitpoint_id, "put"]);
  expect((ev.value as Waitpoint).state).toBe("completed");
  expect((await c.completeWaitpoint(wp.waitpoint_id, { approved: true, by: "alice" })).version).toBe(done.version);
  await expect(c.completeWaitpoint(wp.waitpoint_id, { approved: false })).rejects.toBeInstanceOf(VersionMismatch);

  expect(await w.runOnce()).toBe(true);
  expect(seen).toEqual([{ waitpoint_id: wp.waitpoint_id, state: "completed", payload: { approved: true, by: "alice" } }]);
  const end = await c.getTask(t.task_id);
  expect([end.status, end.result, end.parked]).toEqual(["done", { approved: true }, undefined]);

  const short = await c.createWaitpoint({ timeoutMs: 200 });
  expect(short.waitpoint_id.startsWith("wp-")).toBe(true);
  const timedOut = await waitFor(async () => {
    const x = await c.getWaitpoint(short.waitpoint_id, { waitMs: 5000 });
    return x.state === "pending" ? undefined : x;
  }, "the waitpoint to time out");
  expect([timedOut.state, timedOut.payload]).toEqual(["timed_out", null]);
});

it("refuses claims over a queue's max_leased", async () => {
  const q = uid("fq");
  const p = await c.setQueuePolicy(q, { max_leased: 1, concurrency_key_limit: 1 });
  expect([p.max_leased, p.concurrency_key_limit, p.claims_per_second ?? 0]).toEqual([1, 1, 0]);
  expect((await c.getQueuePolicy(q)).max_leased).toBe(1);
  await expect(c.setQueuePolicy(q, { claim_burst: 5 })).rejects.toBeInstanceOf(InvalidArgument);
  const a = await c.createTask({ queue: q, task_id: `${q}-a`, priority: 1, concurrency_key: "customer-1" });
  const b = await c.createTask({ queue: q, task_id: `${q}-b`, concurrency_key: "customer-2" });
  expect(a.concurrency_key).toBe("customer-1");
  const held = await c.claim(q, { owner: "w1", leaseMs: 30_000 });
  expect(held?.task_id).toBe(a.task_id);
  expect(await c.claim(q, { owner: "w2", leaseMs: 30_000 })).toBeUndefined();
  // A claim by id is 429: a client with a short retry budget sees RateLimited.
  const impatient = admin({ tenant: c.tenant, maxRetryMs: 500 });
  await expect(impatient.claimTask(b.task_id, { owner: "w2", leaseMs: 30_000 })).rejects.toBeInstanceOf(RateLimited);
  impatient.close();
  expect((await c.queueStats(q)).running).toBe(1);
  await c.updateTask(a.task_id, { fencingToken: held!.fencing_token, status: "done", release: true });
  expect((await c.claim(q, { owner: "w2", leaseMs: 30_000 }))?.task_id).toBe(b.task_id);
});

it("ticks an interval schedule with deterministic task ids; pause and resume", async () => {
  const q = uid("sq");
  const sid = uid("beat");
  await expect(c.createSchedule({ schedule_id: uid("bad"), queue: q, cron: "* * *" })).rejects.toBeInstanceOf(InvalidArgument);
  await expect(c.createSchedule({ schedule_id: uid("bad"), queue: q, cron: "0 9 * * *", timezone: "Nowhere/Atlantis" })).rejects.toBeInstanceOf(InvalidArgument);
  let s = await c.createSchedule({ schedule_id: sid, queue: q, interval_ms: 1000, payload: { job: "sweep" }, priority: 3 });
  expect([s.interval_ms, s.catch_up, s.paused, s.ticks]).toEqual([1000, "latest", false, 0]);
  await waitFor(async () => (await c.getSchedule(sid)).ticks >= 1, "a tick");
  s = await c.pauseSchedule(sid);
  expect(s.paused).toBe(true);
  const tasks = [];
  for await (const t of c.iterTasks({ queue: q })) tasks.push(t);
  expect(tasks.length).toBe(s.ticks);
  expect(tasks.map((t) => t.task_id)).toContain(scheduleTaskId(s, s.last_tick_at!));
  for (const t of tasks) {
    expect(t.task_id.startsWith(sid + ":")).toBe(true);
    expect([t.payload, t.priority]).toEqual([{ job: "sweep" }, 3]);
  }
  const ticks = s.ticks;
  s = await c.resumeSchedule(sid);
  expect(s.paused).toBe(false);
  expect(Date.parse(s.next_at)).toBeGreaterThan(Date.parse(s.last_tick_at!));
  await waitFor(async () => (await c.getSchedule(sid)).ticks > ticks, "a tick after resume");
  const cron = await c.createSchedule({ schedule_id: uid("daily"), queue: q, cron: "0 9 * * 1-5", timezone: "Europe/Paris", catch_up: "skip" });
  expect([cron.timezone, cron.catch_up]).toEqual(["Europe/Paris", "skip"]);
  const ids = [];
  for await (const x of c.iterSchedules({ pageSize: 1 })) ids.push(x.schedule_id);
  expect(ids).toEqual(expect.arrayContaining([sid, cron.schedule_id]));
  await c.deleteSchedule(sid);
  await expect(c.getSchedule(sid)).rejects.toBeInstanceOf(NotFound);
});
