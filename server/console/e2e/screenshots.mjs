// Screenshots of the console's main views for docs/console.md, taken from
// a real three-node cluster seeded as the browser tests seed it
// (`make console-screenshots`; not part of make test).
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { Cluster, ROOT } from "./cluster.mjs";
import { seed } from "./seed.mjs";

const OUT = process.env.OUT || join(ROOT, "docs", "console");
mkdirSync(OUT, { recursive: true });
const cluster = new Cluster(3);
await cluster.start();
let browser;
try {
  await seed(cluster);
  browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", chromiumSandbox: false });
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 }, ignoreHTTPSErrors: true })).newPage();
  const base = cluster.url(0) + "/ui/";
  await page.goto(base);
  await page.getByLabel("Token", { exact: true }).fill(cluster.token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Cluster" }).waitFor();
  const shots = [
    ["cluster", "#/cluster"],
    ["queues", "#/t/acme/queues"],
    ["queue", "#/t/acme/queues/research"],
    ["task", "#/t/acme/tasks/report-01"],
    ["dead-letters", "#/t/acme/dead"],
    ["artifact", "#/t/acme/artifacts/report-42-summary"],
    ["thread", "#/t/acme/threads/run-7"],
    ["kv", "#/t/acme/kv?ns=notes"],
    ["ops", "#/t/acme/ops"],
  ];
  for (const [name, hash] of shots) {
    await page.goto(base + hash);
    await page.locator("main h1").waitFor();
    await page.locator("main .hint", { hasText: "Loading" }).waitFor({ state: "detached" });
    if (name === "thread") await page.getByRole("button", { name: /^Checkpoint c2b/ }).click();
    if (name === "ops") await page.getByText("mail-report-42").waitFor();
    if (name === "artifact") await page.locator("#preview pre").waitFor();
    await page.waitForLoadState("networkidle").catch(() => {});
    await page.screenshot({ path: join(OUT, `${name}.png`) });
    console.log("wrote", join(OUT, `${name}.png`));
  }
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(base + "#/t/acme/queues/research");
  await page.locator("main h1").waitFor();
  await page.getByRole("link", { name: "report-01" }).waitFor();
  await page.screenshot({ path: join(OUT, "phone-queue.png") });
  console.log("wrote", join(OUT, "phone-queue.png"));
} finally {
  await browser?.close();
  await cluster.stop();
}
