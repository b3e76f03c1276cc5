// The call transport's edges (undici's Pool for calls, node:https behind it):
// close() lets calls in flight finish and later calls still go; the call's
// timeout bounds the whole answer, a trickle too; a path request() is given
// unencoded reaches the server as a URL would encode it.
import http from "node:http";
import net from "node:net";
import { describe, expect, it } from "vitest";
import { BatonClient, InvalidArgument, OutcomeUnknown, Unavailable, UnavailableInDoubt, Worker } from "@baton-dev/client";
import { waitFor } from "./cluster.js";
import { admin, cluster, tenantClient, uid } from "./helpers.js";

describe("the call transport", () => {
  it("lets calls in flight at close() finish, and calls after it still go", async () => {
    const c = await tenantClient();
    const key = uid("k");
    const put = c.kvPut("ns", key, "x".repeat(300_000));
    const list = c.listQueues();
    c.close();
    await expect(put).resolves.toBeDefined();
    await expect(list).resolves.toBeDefined();
    expect((await c.kvGet("ns", key)).value).toBe("x".repeat(300_000));
  });

  it("bounds the whole answer by the call's timeout, a body that trickles in too", async () => {
    // A server that answers a head at once and then a byte of body every 100 ms, for ever.
    const srv = net.createServer((s) => {
      s.on("error", () => undefined);
      s.once("data", () => {
        s.write("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n[");
        const iv = setInterval(() => (s.destroyed ? clearInterval(iv) : s.write(" ")), 100);
        s.on("close", () => clearInterval(iv));
      });
    });
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    const port = (srv.address() as net.AddressInfo).port;
    const c = new BatonClient({ endpoints: [`http://127.0.0.1:${port}`], token: "x", timeoutMs: 500, maxRetryMs: 0 });
    try {
      const err = await c.listTenants().catch((e: unknown) => e);
      expect((err as { code?: string }).code).toBe("unavailable");
      expect(String((err as Error).message)).toMatch(/no answer within 500ms/);
    } finally {
      c.close();
      srv.close();
    }
  }, 20_000);

  it("fails over past an endpoint that does not speak TLS", async () => {
    const srv = http.createServer((_req, res) => res.end("plain"));
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    const port = (srv.address() as net.AddressInfo).port;
    const cl = cluster();
    const c = new BatonClient({ endpoints: [`https://127.0.0.1:${port}`, ...cl.endpoints], token: cl.token, caFile: cl.ca });
    try {
      expect(Array.isArray(await c.listTenants())).toBe(true);
    } finally {
      c.close();
      srv.close();
    }
  });

  it("sends a claim whose answer was cut again, not taking it for no task", async () => {
    // A 200 without its body: the claim may have applied. Before, claim() answered undefined ("no
    // task") while the task stayed leased to the caller, its attempt counted.
    const c = await tenantClient();
    try {
      const q = uid("q");
      const t = await c.createTask({ queue: q, task_id: uid("t") });
      type Exchange = (i: number, call: { path: string }) => Promise<{ status: number; body: Buffer }>;
      const tr = c.transport as unknown as { exchange: Exchange };
      const real = tr.exchange.bind(tr);
      let cut = 0;
      tr.exchange = async (i, call) => {
        const r = await real(i, call);
        return call.path.endsWith("/claim") && cut++ === 0 ? { ...r, body: Buffer.alloc(0) } : r;
      };
      const got = await c.claim(q, { owner: "w", leaseMs: 30_000 });
      expect(cut).toBeGreaterThan(1);
      expect(got?.task_id).toBe(t.task_id);
      expect(got?.attempt).toBe(1);
    } finally {
      c.close();
    }
  });

  it("keeps a Worker trying while no node can open its session", async () => {
    // Before, a session opening that ran out of its budget was rethrown as a plain BatonError, not
    // Unavailable, and the Worker stopped for good on it.
    const c = new BatonClient({ endpoints: ["http://127.0.0.1:1"], token: "x", tenant: "t", maxRetryMs: 0 });
    type Exchange = (i: number, call: { path: string }) => Promise<unknown>;
    const tr = c.transport as unknown as { exchange: Exchange };
    const real = tr.exchange.bind(tr);
    let opens = 0;
    tr.exchange = async (i, call) => {
      if (call.path === "/v1/sessions") opens++;
      return real(i, call);
    };
    const w = new Worker(c, "q", () => Promise.resolve("done"), { waitMs: 0 });
    let settled = false;
    const run = w.run().finally(() => (settled = true));
    try {
      await waitFor(() => opens >= 3 || settled, "three session openings", 20_000);
      expect(settled).toBe(false);
    } finally {
      w.stop();
      await run.catch(() => undefined);
      c.close();
    }
  }, 30_000);

  it("does not report a write in doubt as nothing done", async () => {
    // The first attempt reaches the node (applied) and its connection is cut before the answer; the next
    // ones find no node until the budget runs out. Before, the call failed with a plain Unavailable
    // ("nothing was done"), which invites a new call that applies the write again.
    const c = await tenantClient({ maxRetryMs: 300 });
    const reader = admin({ tenant: c.tenant! });
    try {
      type Exchange = (i: number, call: { method: string; path: string }) => Promise<unknown>;
      const tr = c.transport as unknown as { exchange: Exchange };
      const real = tr.exchange.bind(tr);
      let puts = 0;
      tr.exchange = async (i, call) => {
        if (call.method !== "PUT") return real(i, call);
        if (++puts === 1) {
          await real(i, call);
          throw Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
        }
        throw Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
      };
      const key = uid("k");
      const err = await c.kvPut("doubt", key, 1).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Unavailable);
      expect(err).toBeInstanceOf(OutcomeUnknown);
      expect(err).toBeInstanceOf(UnavailableInDoubt);
      expect(String((err as Error).message)).toContain("may have been applied");
      expect(puts).toBeGreaterThan(1);
      expect((await reader.kvGet("doubt", key)).value).toBe(1);
      // A write none of whose attempts went anywhere stays a plain Unavailable.
      const plain = await c.kvPut("doubt", uid("k"), 1).catch((e: unknown) => e);
      expect(plain).toBeInstanceOf(Unavailable);
      expect(plain).not.toBeInstanceOf(OutcomeUnknown);
    } finally {
      c.close();
      reader.close();
    }
  });

  it("sends a path request() is given unencoded as a URL encodes it", async () => {
    const c = await tenantClient();
    try {
      // Dot segments resolved: the key is "y".
      await c.request("PUT", `/v1/tenants/${c.tenant!}/kv/ns-raw/x/../y#fragment`, { value: 1 });
      expect((await c.kvGet("ns-raw", "y")).value).toBe(1);
      // Characters a path cannot hold go percent-encoded (UTF-8): the server reads them back and
      // judges the key (a 400 naming it), rather than the client refusing to send or mangling it.
      for (const k of ["caf\u00e9", "a b", "\u65e5"]) {
        const err = await c.request("PUT", `/v1/tenants/${c.tenant!}/kv/ns-raw/${k}`, { value: 1 }).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(InvalidArgument);
        expect((err as Error).message).toContain(`"${k}"`);
      }
    } finally {
      c.close();
    }
  });
});
