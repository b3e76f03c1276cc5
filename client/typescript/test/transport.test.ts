// The call transport's edges (undici's Pool for calls, node:https behind it):
// close() lets calls in flight finish and later calls still go; the call's
// timeout bounds the whole answer, a trickle too; a path request() is given
// unencoded reaches the server as a URL would encode it.
import http from "node:http";
import net from "node:net";
import { describe, expect, it } from "vitest";
import { BatonClient, InvalidArgument } from "@baton-dev/client";
import { cluster, tenantClient, uid } from "./helpers.js";

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
