// Worker.run() in a Node process of its own stops gracefully on SIGTERM:
// the task in flight finishes, no new task is claimed, the process exits 0.
import { spawn } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, expect, it } from "vitest";
import { waitFor } from "./cluster.js";
import { cluster, tenantClient, uid } from "./helpers.js";

const DIR = fileURLToPath(new URL("./.generated-signal/", import.meta.url));
afterAll(() => rmSync(DIR, { recursive: true, force: true }));

const PROGRAM = `
import { BatonClient, Worker } from "@baton-dev/client";
const [endpoints, token, ca, tenant, queue] = process.argv.slice(2);
const client = new BatonClient({ endpoints: endpoints.split(","), token, caFile: ca, tenant });
const worker = new Worker(client, queue, async (ctx) => {
  process.stdout.write("started " + ctx.task.task_id + "\\n");
  for (;;) {
    try { await client.kvGet("signal", "go"); break; } catch { await new Promise((r) => setTimeout(r, 20)); }
  }
  return "finished";
}, { waitMs: 200 });
await worker.run();
client.close();
process.stdout.write("stopped after " + worker.processed + "\\n");
`;

it("finishes the task in flight on SIGTERM, claims no other, exits 0", async () => {
  const c = await tenantClient();
  const q = uid("q");
  await c.createTask({ queue: q, task_id: "first" });
  await c.createTask({ queue: q, task_id: "second", priority: -1 });
  mkdirSync(DIR, { recursive: true });
  // Inside the package, so that "@baton-dev/client" resolves to it.
  const file = DIR + "worker.mjs";
  writeFileSync(file, PROGRAM);
  const info = cluster();
  const child = spawn(process.execPath, [file, info.endpoints.join(","), info.token, info.ca, c.tenant!, q], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.on("data", (b: Buffer) => (out += b.toString()));
  const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
  await waitFor(() => out.includes("started first"), "the handler to start", 20_000);
  child.kill("SIGTERM");
  await c.kvPut("signal", "go", true);
  expect(await exited).toBe(0);
  expect(out).toContain("stopped after 1");
  const first = await c.getTask("first");
  expect([first.status, first.result]).toEqual(["done", "finished"]);
  expect((await c.getTask("second")).status).toBe("pending");
  c.close();
});
