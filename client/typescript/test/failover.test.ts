// Failover, exactly-once retries through client sessions, and the
// replacement of a session the cluster does not have. Nodes are killed
// and restarted, so this file restores the cluster before it ends.
import { randomBytes } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { AlreadyExists, BatonClient, Unavailable } from "@baton-dev/client";
import { classifyFor } from "../src/transport.js";
import { Cluster, waitFor } from "./cluster.js";
import { cluster, uid } from "./helpers.js";

// This file runs its own cluster: it kills nodes.
const own = new Cluster();
let started = false;

async function start(): Promise<Cluster> {
  if (!started) {
    await own.start();
    started = true;
  }
  return own;
}

afterAll(async () => {
  await own.stop();
});

function client(cl: Cluster, o: { tenant?: string; endpoints?: string[]; maxRetryMs?: number } = {}): BatonClient {
  return new BatonClient({ endpoints: o.endpoints ?? cl.endpoints, token: cl.token, caFile: cl.ca, tenant: o.tenant, maxRetryMs: o.maxRetryMs });
}

describe("failover", () => {
  it("skips an endpoint that refuses connections and goes to the leader it is told of", async () => {
    const cl = await start();
    const dead = `127.0.0.1:${(await import("./cluster.js").then((m) => m.freePorts(1)))[0]}`;
    const c = client(cl, { endpoints: [dead, ...cl.endpoints] });
    expect(await c.createTenant(uid("t"))).toBe(true);
    const leader = await cl.leader();
    // A follower answered or forwarded: the next call starts at the leader.
    await c.listTenants();
    expect(c.transport.endpoints[c.transport.preferredIndex]).toBe(`https://${cl.endpoints[leader]}`);
    c.close();
  });

  it("keeps writing through a leader kill, each write applied once", async () => {
    const cl = await start();
    const admin = client(cl);
    const tenant = uid("t");
    await admin.createTenant(tenant);
    const c = client(cl, { tenant, maxRetryMs: 30_000 });
    const ids = Array.from({ length: 60 }, (_, i) => `task-${i}`);
    const leader = await cl.leader();
    const writes = (async () => {
      for (const id of ids) await c.createTask({ queue: "q", task_id: id });
    })();
    await waitFor(async () => (await c.listTasks({ queue: "q" })).items.length >= 10, "ten writes");
    await cl.kill(leader);
    // A create applied twice would be 409 already_exists: the session's
    // retries are answered from the first answer.
    await writes;
    const listed: string[] = [];
    for await (const t of c.iterTasks({ queue: "q" })) listed.push(t.task_id);
    expect(listed.sort()).toEqual([...ids].sort());
    await cl.restart(leader);
    await cl.leader();
    c.close();
    admin.close();
  });

  it("starts a download cut midway (its node killed) again on another node, and returns the right bytes", async () => {
    const cl = await start();
    const admin = client(cl);
    const tenant = uid("t");
    await admin.createTenant(tenant);
    const c = client(cl, { tenant, maxRetryMs: 30_000 });
    const data = randomBytes(48 << 20);
    const m = await c.uploadArtifact("big", data);
    let parts: Buffer[] = [];
    let restarts = 0;
    let killed = -1;
    await c.downloadArtifact("big", m.version, {
      write: async (b) => {
        parts.push(b);
        if (killed < 0) {
          // The first block is in: kill the node the client is reading from.
          killed = c.transport.preferredIndex;
          await cl.kill(killed);
        }
      },
      restart: () => {
        restarts++;
        parts = [];
      },
    });
    expect(restarts).toBeGreaterThan(0);
    expect(Buffer.concat(parts).equals(data)).toBe(true);
    await cl.restart(killed);
    await cl.leader();
    c.close();
    admin.close();
  });

  it("opens a new session when the cluster does not have the client's, and the write applies once", async () => {
    const cl = await start();
    const admin = client(cl);
    const tenant = uid("t");
    await admin.createTenant(tenant);
    const c = client(cl, { tenant });
    await c.kvPut("ns", "a", 1);
    const first = c.transport.sessionId;
    expect(first).toMatch(/^\d+$/);
    c.transport.useSession("987654321"); // a session the cluster never opened
    await c.createTask({ queue: "q", task_id: "once" });
    expect(c.transport.sessionId).not.toBe("987654321");
    expect(c.transport.sessionId).not.toBe(first);
    await expect(c.createTask({ queue: "q", task_id: "once" })).rejects.toBeInstanceOf(AlreadyExists);
    c.close();
    admin.close();
  });

  it("retries 503 always, 504 outcome_unknown only with a session place or key, 429 after Retry-After", () => {
    const body = (code: string) => Buffer.from(JSON.stringify({ error: { code, message: "m" } }));
    const un = classifyFor({}, 503, { "retry-after": "1" }, body("unavailable"));
    expect([un.retry, un.retryAfterMs, un.error?.constructor.name]).toEqual([true, 1000, "Unavailable"]);
    const read = classifyFor({}, 504, { "retry-after": "1" }, body("outcome_unknown"));
    expect([read.retry, read.error?.constructor.name]).toEqual([false, "OutcomeUnknown"]);
    expect(classifyFor({ place: { id: "5", seq: 1 } }, 504, {}, body("outcome_unknown")).retry).toBe(true);
    expect(classifyFor({ key: "k" }, 504, {}, body("outcome_unknown")).retry).toBe(true);
    const rl = classifyFor({}, 429, {}, body("rate_limited"));
    expect([rl.retry, rl.rateLimited, rl.retryAfterMs]).toEqual([true, true, 1000]);
    expect(classifyFor({}, 409, {}, body("fenced")).retry).toBe(false);
  });

  it("gives up with Unavailable when no endpoint answers within the budget", async () => {
    const ports = await import("./cluster.js").then((m) => m.freePorts(2));
    const c = new BatonClient({ endpoints: ports.map((p) => `127.0.0.1:${p}`), maxRetryMs: 300 });
    await expect(c.listTenants()).rejects.toBeInstanceOf(Unavailable);
    c.close();
    expect(cluster().endpoints).toHaveLength(3);
  });
});
