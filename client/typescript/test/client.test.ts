// BatonClient against the three-node cluster: every resource, typed errors.
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  AlreadyExists, BatonClient, Fenced, IdempotencyMismatch, InvalidArgument, NotFound, PermissionDenied, Unauthenticated,
  VersionMismatch, cdc, sha256,
} from "@baton-dev/client";
import { admin, cluster, tenantClient, uid } from "./helpers.js";

let c: BatonClient;
beforeAll(async () => {
  c = await tenantClient();
});
afterAll(() => c.close());

describe("tasks and queues", () => {
  it("creates, claims, renews, updates under the fencing token and refuses a stale one", async () => {
    const q = uid("q");
    const t = await c.createTask({ queue: q, task_id: uid("task"), payload: { topic: "fencing" } });
    expect(t.status).toBe("pending");
    await expect(c.createTask({ queue: q, task_id: t.task_id })).rejects.toBeInstanceOf(AlreadyExists);
    const claimed = await c.claim(q, { owner: "a", leaseMs: 30_000, setStatus: "running" });
    expect(claimed?.task_id).toBe(t.task_id);
    expect(claimed!.fencing_token).toBeGreaterThan(0);
    const renewed = await c.renewTask(t.task_id, { fencingToken: claimed!.fencing_token, leaseMs: 30_000 });
    expect(renewed.version).toBeGreaterThan(claimed!.version);
    const again = await c.claimTask(t.task_id, { owner: "a", leaseMs: 30_000 });
    expect(again.fencing_token).toBeGreaterThan(claimed!.fencing_token);
    const err = await c.updateTask(t.task_id, { fencingToken: claimed!.fencing_token, status: "done" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Fenced);
    expect((err as Fenced).currentToken).toBe(again.fencing_token);
    expect((err as Fenced).status).toBe(409);
    const done = await c.updateTask(t.task_id, { fencingToken: again.fencing_token, status: "done", result: { pages: 3 }, release: true });
    expect(done.status).toBe("done");
    expect(done.result).toEqual({ pages: 3 });
    expect(done.owner).toBe("");
  });

  it("releases unstarted: the claim's attempt and the status its setStatus replaced come back", async () => {
    const q = uid("q");
    const t = await c.createTask({ queue: q, task_id: uid("task") });
    const claimed = await c.claimTask(t.task_id, { owner: "a", leaseMs: 30_000, setStatus: "running" });
    expect([claimed.attempt, claimed.status, claimed.owner]).toEqual([1, "running", "a"]);
    const released = await c.updateTask(t.task_id, { fencingToken: claimed.fencing_token, release: true, unstarted: true });
    expect([released.attempt, released.status, released.owner]).toEqual([0, "pending", ""]);
    const again = await c.claim(q, { owner: "b", leaseMs: 30_000 });
    expect([again?.task_id, again?.attempt]).toEqual([t.task_id, 1]);
  });
  it("long-polls a queue claim until a task comes, and answers none when none does", async () => {
    const q = uid("q");
    expect(await c.claim(q, { owner: "a", leaseMs: 1000, waitMs: 50 })).toBeUndefined();
    const waiting = c.claim(q, { owner: "a", leaseMs: 30_000, waitMs: 20_000 });
    const t = await c.createTask({ queue: q });
    const got = await waiting;
    expect(got?.task_id).toBe(t.task_id);
  });

  it("fails an attempt with backoff, retries, lists, deletes, reports queue statistics", async () => {
    const q = uid("q");
    const t = await c.createTask({ queue: q, max_attempts: 3, backoff_initial_ms: 1, backoff_max_ms: 1 });
    const cl = await c.claimTask(t.task_id, { owner: "a", leaseMs: 30_000 });
    const failed = await c.failTask(t.task_id, { fencingToken: cl.fencing_token, error: "boom" });
    expect(failed.status).toBe("pending");
    expect(failed.last_error).toBe("boom");
    expect(failed.attempt).toBe(1);
    const cl2 = await c.claimTask(t.task_id, { owner: "a", leaseMs: 30_000 });
    const dead = await c.failTask(t.task_id, { fencingToken: cl2.fencing_token, nonRetryable: true });
    expect(dead.status).toBe("dead");
    const back = await c.retryTask(t.task_id);
    expect([back.status, back.attempt]).toEqual(["pending", 0]);
    const ids: string[] = [back.task_id];
    for (let i = 0; i < 4; i++) ids.push((await c.createTask({ queue: q })).task_id);
    const listed: string[] = [];
    for await (const x of c.iterTasks({ queue: q, pageSize: 2 })) listed.push(x.task_id);
    expect(listed.sort()).toEqual(ids.sort());
    const stats = await c.queueStats(q);
    expect(stats.tasks).toBe(5);
    expect(stats.waiting).toBe(5);
    await c.deleteTask(ids[0]!);
    await expect(c.getTask(ids[0]!)).rejects.toBeInstanceOf(NotFound);
  });
});

describe("knowledge store, refs, ops, transactions", () => {
  it("puts KV entries by compare-and-set", async () => {
    const ns = uid("ns");
    const e = await c.kvPut(ns, "a/b", { v: 1 }, { expectVersion: 0 });
    const err = await c.kvPut(ns, "a/b", { v: 2 }, { expectVersion: 0 }).catch((x: unknown) => x);
    expect(err).toBeInstanceOf(VersionMismatch);
    expect((err as VersionMismatch).currentVersion).toBe(e.version);
    await c.kvPut(ns, "a/c", 3, { expectVersion: e.version - 1 }).catch(() => undefined);
    expect((await c.kvGet(ns, "a/b")).value).toEqual({ v: 1 });
    await c.kvPut(ns, "x", "y", { ttlMs: 60_000 });
    const keys: string[] = [];
    for await (const x of c.iterKV(ns, { pageSize: 1 })) keys.push(x.key);
    expect(keys).toEqual(["a/b", "x"]);
    await c.kvDelete(ns, "a/b", { expectVersion: e.version });
    await expect(c.kvGet(ns, "a/b")).rejects.toBeInstanceOf(NotFound);
  });

  it("records operations once, and refuses another digest", async () => {
    const id = uid("op");
    const b = await c.beginOp(id, { kind: "send_email", paramsDigest: "sha256:x" });
    expect([b.created, b.op.state]).toEqual([true, "started"]);
    expect((await c.beginOp(id, { kind: "send_email", paramsDigest: "sha256:x" })).created).toBe(false);
    await expect(c.beginOp(id, { kind: "send_email", paramsDigest: "sha256:y" })).rejects.toBeInstanceOf(IdempotencyMismatch);
    const f = await c.finishOp(id, { state: "succeeded", result: { id: 7 } });
    expect(f.state).toBe("succeeded");
    expect((await c.getOp(id)).result).toEqual({ id: 7 });
  });

  it("applies a transaction whole, or none of it with the failing op's index", async () => {
    const ns = uid("ns");
    const r = await c.txn([
      { op: "task.create", task_id: uid("t"), queue: "q" },
      { op: "kv.put", namespace: ns, key: "k", value: 1, expect_version: 0 },
    ]);
    expect(r).toHaveLength(2);
    const err = await c.txn([
      { op: "kv.put", namespace: ns, key: "k2", value: 1 },
      { op: "kv.put", namespace: ns, key: "k", value: 2, expect_version: 0 },
    ]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VersionMismatch);
    expect((err as VersionMismatch).details["op_index"]).toBe(1);
    await expect(c.kvGet(ns, "k2")).rejects.toBeInstanceOf(NotFound);
  });
});

describe("artifacts", () => {
  it("uploads content-defined chunks once, downloads verified, moves refs by compare-and-set", async () => {
    const data = randomBytes(6 << 20);
    const stats = { size: 0, chunks: 0, chunksUploaded: 0, bytesSent: 0 };
    const m = await c.uploadArtifact("report", data, { mediaType: "application/octet-stream", stats });
    expect(m.version).toBe(1);
    expect(m.digest).toBe(sha256(data));
    expect(m.chunks.map((x) => x.digest)).toEqual(cdc.split(data).map(sha256));
    expect(stats.chunks).toBeGreaterThan(1);
    expect(stats.chunksUploaded).toBe(stats.chunks);
    // The same content again: every chunk is held, none is sent; same version.
    const again = { size: 0, chunks: 0, chunksUploaded: 0, bytesSent: 0 };
    const m2 = await c.uploadArtifact("report", data, { mediaType: "application/octet-stream", stats: again });
    expect([again.chunksUploaded, again.bytesSent, m2.version]).toEqual([0, 0, 1]);
    expect((await c.readArtifact("report", 1)).equals(data)).toBe(true);
    const dir = mkdtempSync(join(tmpdir(), "baton-ts-dl-"));
    const file = join(dir, "copy");
    expect(await c.downloadArtifactTo("report", 1, file)).toBe(data.length);
    expect(readFileSync(file).equals(data)).toBe(true);
    // From a file path, too.
    const src = join(dir, "src");
    writeFileSync(src, "small artifact");
    const small = await c.uploadArtifact("notes", src);
    expect(small.size).toBe(14);
    const ref = await c.setRef("report/approved", m.artifact_id, { expectArtifactId: "" });
    expect(ref.revision).toBe(1);
    await expect(c.setRef("report/approved", small.artifact_id, { expectArtifactId: "" })).rejects.toBeInstanceOf(VersionMismatch);
    expect((await c.listRefs({ prefix: "report/" })).map((r) => r.ref)).toEqual(["report/approved"]);
    expect((await c.listArtifacts()).items.map((a) => a.name)).toEqual(["notes", "report"]);
    await c.deleteRef("report/approved", { expectArtifactId: m.artifact_id });
    await c.deleteArtifact("report");
    await expect(c.getManifest("report", 1)).rejects.toBeInstanceOf(NotFound);
  });
});

describe("checkpoints", () => {
  it("chains, lists, records writes, copies, prunes, deletes runs and threads", async () => {
    const th = "user@example.com/" + uid("th");
    await c.putCheckpoint(th, "c1", { step: 1 }, { metadata: { run_id: "r1" } });
    const err = await c.putCheckpoint(th, "c2", { step: 2 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VersionMismatch);
    expect((err as VersionMismatch).currentHead).toBe("c1");
    await c.putCheckpoint(th, "c2", { step: 2 }, { parentId: "c1", metadata: { run_id: "r2" } });
    await c.putWrites(th, "c2", "node-a", [{ channel: "messages", value: "hi" }, { channel: "__interrupt__", value: { ask: "?" }, idx: -3 }], { taskPath: "p" });
    const latest = await c.latestCheckpoint(th);
    expect(latest.checkpoint_id).toBe("c2");
    expect(latest.pending_writes?.map((w) => [w.idx, w.channel])).toEqual([[-3, "__interrupt__"], [0, "messages"]]);
    const ids: string[] = [];
    for await (const cp of c.iterCheckpoints(th, { limit: 5 })) ids.push(cp.checkpoint_id);
    expect(ids).toEqual(["c2", "c1"]);
    const across: string[] = [];
    for await (const cp of c.iterTenantCheckpoints({ beforeId: "c2", filter: { run_id: "r1" } })) across.push(`${cp.thread_id}/${cp.checkpoint_id}`);
    expect(across).toEqual([`${th}/c1`]);
    const copy = await c.copyThread(th, th + "-copy");
    expect(copy.checkpoints).toBe(2);
    expect(await c.deleteRuns(["r1"])).toBe(2);
    expect(await c.pruneCheckpoints([th + "-copy"], "delete")).toBe(1);
    await c.deleteThread(th);
    await expect(c.latestCheckpoint(th)).rejects.toBeInstanceOf(NotFound);
  });
});

describe("configuration and errors", () => {
  it("reads BATON_ENDPOINTS, BATON_TOKEN, BATON_CACERT and BATON_TENANT", async () => {
    const info = cluster();
    const e = BatonClient.fromEnv({}, { BATON_ENDPOINTS: info.endpoints.join(","), BATON_TOKEN: info.token, BATON_CACERT: info.ca, BATON_TENANT: c.tenant });
    expect(e.tenant).toBe(c.tenant);
    expect(e.endpoints.every((x) => x.startsWith("https://"))).toBe(true);
    const st = await e.clusterStatus();
    expect(st.members).toHaveLength(3);
    expect(st.leader.id).toMatch(/^n[123]$/);
    e.close();
  });

  it("maps error codes to classes and unknown codes by status", async () => {
    const info = cluster();
    const bad = new BatonClient({ endpoints: info.endpoints, token: "nope", caFile: info.ca, tenant: c.tenant });
    await expect(bad.getTask("x")).rejects.toBeInstanceOf(Unauthenticated);
    bad.close();
    const p = await c.createPrincipal("reader", [{ resource: "kv", prefix: "pub/", actions: ["read"] }]);
    const reader = new BatonClient({ endpoints: info.endpoints, token: p.token!, caFile: info.ca, tenant: c.tenant });
    await expect(reader.kvPut("pub", "k", 1)).rejects.toBeInstanceOf(PermissionDenied);
    await expect(reader.getTask("x")).rejects.toBeInstanceOf(PermissionDenied);
    reader.close();
    await expect(c.kvPut("bad ns", "k", 1)).rejects.toBeInstanceOf(InvalidArgument);
    const { errorFromAnswer, Conflict, BatonError } = await import("@baton-dev/client");
    const unknown = errorFromAnswer(409, JSON.stringify({ error: { code: "brand_new", message: "m", extra: 1 } }));
    expect(unknown).toBeInstanceOf(Conflict);
    expect([unknown.code, unknown.details["extra"]]).toEqual(["brand_new", 1]);
    expect(errorFromAnswer(418, "teapot")).toBeInstanceOf(BatonError);
  });

  it("streams a backup of the cluster", async () => {
    const a = admin();
    const parts: Buffer[] = [];
    const n = await a.backup((b) => void parts.push(b));
    const all = Buffer.concat(parts);
    expect(n).toBe(all.length);
    expect(all.subarray(0, 8).toString()).toBe("BATONBAK");
    a.close();
  });

  it("needs a tenant for tenant routes", async () => {
    const a = admin();
    await expect(a.getTask("x")).rejects.toBeInstanceOf(InvalidArgument);
    expect(await a.listTenants()).toContain(c.tenant);
    a.close();
  });
});

describe("large checkpoints", () => {
  it("sends data over 512 KiB through the chunk store and reads it back whole", async () => {
    const th = uid("big");
    const data = { blob: randomBytes(3 << 20).toString("base64"), n: 1 };
    const put = await c.putCheckpoint(th, "c1", data);
    expect(put.data).toEqual(data);
    expect(put.data_chunks?.length).toBeGreaterThan(0);
    expect((await c.getCheckpoint(th, "c1")).data).toEqual(data);
    const [listed] = await c.listCheckpoints(th).then((p) => p.items);
    expect([listed!.data, listed!.data_chunks?.length]).toEqual([null, put.data_chunks?.length]);
  });
});
