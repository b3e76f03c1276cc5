// What the browser tests and the screenshots look at: two tenants (acme and
// globex), queues with tasks in several statuses, dead letters, a leased
// task, artifacts (text, JSON, a PNG) with refs, a thread with a fork and
// pending writes, KV entries and operations.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { deflateSync, crc32 } from "node:zlib";

/** A w×h PNG of a diagonal gradient, made here (no image files in the repo). */
export function png(w = 48, h = 32) {
  const chunk = (type, data) => {
    const len = Buffer.alloc(4); len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type), data]);
    const crc = Buffer.alloc(4); crc.writeUInt32BE(crc32(td) >>> 0);
    return Buffer.concat([len, td, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0); ihdr.writeUInt32BE(h, 4); ihdr[8] = 8; ihdr[9] = 2; // 8-bit RGB
  const rows = [];
  for (let y = 0; y < h; y++) {
    const row = Buffer.alloc(1 + 3 * w);
    for (let x = 0; x < w; x++) { row[1 + 3 * x] = (x * 255) / w; row[2 + 3 * x] = (y * 255) / h; row[3 + 3 * x] = 160; }
    rows.push(row);
  }
  return Buffer.concat([Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]), chunk("IHDR", ihdr), chunk("IDAT", deflateSync(Buffer.concat(rows))), chunk("IEND", Buffer.alloc(0))]);
}

const T = (t, ...p) => `/v1/tenants/${t}` + (p.length ? "/" + p.map(encodeURIComponent).join("/") : "");

/** Dead letter: a task of one attempt, claimed and failed as non-retryable. */
export async function deadLetter(c, tenant, queue, id, error) {
  await c.api("POST", T(tenant, "tasks"), { task_id: id, queue, max_attempts: 1, payload: { doc: id } });
  const claimed = await c.api("POST", T(tenant, "tasks", id, "claim"), { owner: "worker-7", lease_ms: 30_000 });
  await c.api("POST", T(tenant, "tasks", id, "fail"), { fencing_token: claimed.fencing_token, error, non_retryable: true });
}

/** n tasks bulk-000000, bulk-000001, ... in queue bulk, 128 per transaction. */
export async function bulk(c, tenant, n) {
  for (let i = 0; i < n; i += 128) {
    const ops = [];
    for (let j = i; j < Math.min(n, i + 128); j++) ops.push({ op: "task.create", task_id: `bulk-${String(j).padStart(6, "0")}`, queue: "bulk", payload: { n: j } });
    await c.api("POST", T(tenant, "txn"), { ops });
  }
}

export async function seed(c) {
  for (const t of ["acme", "globex"]) await c.api("PUT", T(t));
  for (let i = 1; i <= 12; i++) {
    await c.api("POST", T("acme", "tasks"), { task_id: `report-${String(i).padStart(2, "0")}`, queue: "research", priority: i % 3, payload: { topic: `topic ${i}` } });
  }
  for (let i = 1; i <= 4; i++) await c.api("POST", T("acme", "tasks"), { task_id: `review-${i}`, queue: "review", payload: { report: `report-0${i}` } });
  // A leased (running) task and a finished one.
  const run = await c.api("POST", T("acme", "tasks", "report-01", "claim"), { owner: "agent-a", lease_ms: 600_000, set_status: "running" });
  await c.api("POST", T("acme", "tasks", "report-02", "claim"), { owner: "agent-b", lease_ms: 600_000, set_status: "running" });
  await c.api("POST", T("acme", "tasks", "report-02", "update"), { fencing_token: (await c.api("GET", T("acme", "tasks", "report-02"))).fencing_token, status: "done", result: { pages: 3 }, release: true });
  await deadLetter(c, "acme", "research", "report-dead-1", "upstream 502: search API unavailable");
  await deadLetter(c, "acme", "research", "report-dead-2", "schema validation failed: missing field title");
  await c.api("POST", T("globex", "tasks"), { task_id: "secret-plan", queue: "globex-only", payload: { plan: "classified" } });

  // Artifacts through the CLI (chunked, verified), with a ref.
  const dir = c.base;
  writeFileSync(join(dir, "draft.md"), "# Report 42\n\nFencing tokens stop a stale worker from overwriting its successor.\n");
  writeFileSync(join(dir, "summary.json"), JSON.stringify({ report: 42, pages: 3, sources: ["https://example.org/a"] }));
  writeFileSync(join(dir, "chart.png"), png());
  await c.cli("artifact", "put", join(dir, "draft.md"), "--tenant", "acme", "--name", "report-42-draft", "--media-type", "text/markdown");
  await c.cli("artifact", "put", join(dir, "summary.json"), "--tenant", "acme", "--name", "report-42-summary", "--media-type", "application/json");
  await c.cli("artifact", "put", join(dir, "chart.png"), "--tenant", "acme", "--name", "report-42-chart", "--media-type", "image/png");
  const v = (await c.api("GET", T("acme", "artifacts", "report-42-draft", "versions"))).versions[0];
  await c.api("PUT", T("acme", "refs", "report-42", "approved"), { artifact_id: v.artifact_id, expect_artifact_id: "" });

  // A thread with a fork: c1 <- c2 <- c3 and c1 <- c2b (a fork from c1).
  const cp = (id, body) => c.api("PUT", T("acme", "threads", "run-7", "checkpoints", id), body);
  await cp("c1", { data: { step: 1, messages: ["hi"] }, metadata: { source: "input" } });
  await cp("c2", { parent_id: "c1", data: { step: 2 }, metadata: { source: "loop" } });
  await cp("c3", { parent_id: "c2", data: { step: 3 }, metadata: { source: "loop" } });
  await cp("c2b", { parent_id: "c1", fork: true, data: { step: 2, edited: true }, metadata: { source: "fork" } });
  await c.api("PUT", T("acme", "threads", "run-7", "checkpoints", "c2b", "writes", "node-a"), { writes: [{ channel: "messages", value: "draft ready" }] });

  for (const [k, val] of [["topic", "fencing tokens"], ["owner", { name: "agent-a", team: "research" }], ["budget", 1200]]) {
    await c.api("PUT", T("acme", "kv", "notes", k), { value: val });
  }
  await c.api("POST", T("acme", "ops", "mail-report-42", "begin"), { kind: "send_email", params_digest: "sha256:1", task_id: "report-01", fence: { task_id: "report-01", token: run.fencing_token } });
  await c.api("POST", T("acme", "ops", "mail-report-42", "finish"), { state: "succeeded", result: { message_id: "m-1" } });
  await c.api("POST", T("acme", "ops", "publish-page-42", "begin"), { kind: "publish", params_digest: "sha256:2" });

  const principal = await c.api("POST", T("acme", "principals"), { name: "console-viewer", grants: [{ resource: "*", prefix: "", actions: ["read", "write", "delete"] }] });
  return { principalToken: principal.token };
}
