// Runs the ts blocks of docs/typescript.md, in order, as one ES module,
// against the cluster with BATON_ENDPOINTS, BATON_TOKEN, BATON_CACERT and
// BATON_TENANT set (a fresh tenant), and checks what they print.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterEach, expect, it, vi } from "vitest";
import { admin, cluster, uid } from "./helpers.js";

const DOC = fileURLToPath(new URL("../../../docs/typescript.md", import.meta.url));
const OUT = fileURLToPath(new URL("./.generated/", import.meta.url));

afterEach(() => {
  vi.unstubAllEnvs();
  vi.restoreAllMocks();
  rmSync(OUT, { recursive: true, force: true });
});

it("runs every example of docs/typescript.md", async () => {
  const blocks = [...readFileSync(DOC, "utf8").matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!);
  expect(blocks.length).toBeGreaterThanOrEqual(10);
  // Imports first (an ES module's), then the blocks' code in order.
  const imports: string[] = [];
  const body: string[] = [];
  for (const b of blocks) {
    for (const line of b.split("\n")) (line.startsWith("import ") ? imports : body).push(line);
  }
  mkdirSync(OUT, { recursive: true });
  const file = OUT + "docs-examples.ts";
  writeFileSync(file, [...imports, "", ...body].join("\n"));

  const c = cluster();
  const tenant = uid("docs");
  const a = admin();
  await a.createTenant(tenant);
  a.close();
  vi.stubEnv("BATON_ENDPOINTS", c.endpoints.join(","));
  vi.stubEnv("BATON_TOKEN", c.token);
  vi.stubEnv("BATON_CACERT", c.ca);
  vi.stubEnv("BATON_TENANT", tenant);
  const printed: string[] = [];
  vi.spyOn(console, "log").mockImplementation((...args: unknown[]) => {
    printed.push(args.map((x) => (typeof x === "string" ? x : JSON.stringify(x))).join(" "));
  });
  await import(file);
  expect(printed[0]).toBe('done {"pages":3}');
  expect(printed).toContain("1 processed");
  expect(printed.some((l) => /^fenced; current token \d+$/.test(l))).toBe(true);
  expect(printed.some((l) => /^true sha256:[0-9a-f]{64}$/.test(l))).toBe(true);
  expect(printed.some((l) => /^version moved on to \d+$/.test(l))).toBe(true);
  expect(printed).toContain("sent once: m-2 m-2");
  expect(printed).toContain("c2 1");
  expect(printed).toContain("put notes/watched");
  expect(printed).toContain("true not_found 404");
  expect(printed).toContain("approved: true");
  // Coordinating tasks: dependencies, cancellation, waitpoints, flow control, schedules.
  expect(printed).toContain('write got {"input":[{"input":[]}]}');
  expect(printed).toContain("crawl-1 cancelled");
  expect(printed).toContain("waitpoint completed");
  expect(printed).toContain('publish-42 {"published":true}');
  expect(printed).toContain("keys acme globex");
  expect(printed).toContain("third claim none");
  expect(printed).toContain("nightly latest false");
  expect(printed).toContain("tick true");
});
