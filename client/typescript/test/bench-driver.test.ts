// The sdk benchmark's TypeScript driver (bench/sdkbench.ts, built to
// dist-bench by make test-typescript) runs for a second against the test
// cluster and prints a bench/result.Run, so that make bench's row cannot rot.
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { expect, it } from "vitest";
import { admin, cluster, uid } from "./helpers.js";

it("measures fenced updates and prints one run as JSON", async () => {
  const c = cluster();
  const tenant = uid("bench");
  const a = admin();
  await a.createTenant(tenant);
  a.close();
  const script = fileURLToPath(new URL("../dist-bench/sdkbench.js", import.meta.url));
  const { stdout } = await promisify(execFile)(process.execPath, [script, "--endpoints", c.endpoints.join(","), "--token", c.token,
    "--ca-file", c.ca, "--tenant", tenant, "--clients", "4", "--warmup", "200ms", "--duration", "800ms"]);
  const run = JSON.parse(stdout.trim().split("\n").at(-1)!) as { workload: string; client: string; variant: string; ops: number; errors: number; latency: { count: number; buckets: number[][] } };
  expect([run.workload, run.client, run.variant, run.errors]).toEqual(["sdk", "typescript", "C=4", 0]);
  expect(run.ops).toBeGreaterThan(0);
  expect(run.latency.count).toBe(run.ops);
  expect(run.latency.buckets.reduce((s, b) => s + b[1]!, 0)).toBe(run.ops);
  const t = new (await import("@baton-dev/client")).BatonClient({ endpoints: c.endpoints, token: c.token, caFile: c.ca, tenant });
  const task = await t.getTask("tscas4-0");
  expect((task.result as { n: number }).n).toBeGreaterThan(0);
  t.close();
});
