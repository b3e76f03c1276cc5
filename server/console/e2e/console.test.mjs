// The web console in a real browser (Chromium from Debian, driven by
// playwright-core) against a real three-node TLS cluster of bin/batond:
// every scenario of issue 33.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { Cluster, waitFor } from "./cluster.mjs";
import { seed, deadLetter, bulk } from "./seed.mjs";

const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };
// Tasks in queue bulk, listed a page at a time (CONSOLE_TASKS=100000 for
// the scale; 2,000 in make test).
const BULK = Number(process.env.CONSOLE_TASKS || 2000);

let cluster, browser, ctx, page, principalToken;
const consoleErrors = [];

before(async () => {
  cluster = new Cluster(3);
  await cluster.start();
  await cluster.api("PUT", "/v1/tenants/acme");
  await bulk(cluster, "acme", BULK); // first: the operations' events stay in the watch history
  ({ principalToken } = await seed(cluster));
  browser = await chromium.launch({ executablePath: CHROMIUM, chromiumSandbox: false });
  ctx = await browser.newContext({ viewport: DESKTOP, ignoreHTTPSErrors: true });
  page = await ctx.newPage();
  page.setDefaultTimeout(10_000);
  page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
  page.on("pageerror", (e) => consoleErrors.push(String(e)));
}, { timeout: 90_000 });

after(async () => {
  await browser?.close();
  await cluster?.stop();
});

async function signIn(token, tenant = "") {
  await page.goto(cluster.url(1) + "/ui/");
  await page.getByLabel("Token", { exact: true }).fill(token);
  if (tenant) await page.getByLabel("Tenant", { exact: true }).fill(tenant);
  await page.getByRole("button", { name: "Sign in" }).click();
}

async function signOut() {
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.getByRole("heading", { name: "Sign in" }).waitFor();
}

test("the console is served at /ui/ with its security headers", async () => {
  const res = await cluster.request(0, "GET", "/ui/");
  assert.equal(res.status, 200);
  assert.match(res.headers["content-security-policy"], /frame-ancestors 'none'/);
  assert.equal(res.headers["x-content-type-options"], "nosniff");
  const api = await cluster.request(0, "GET", "/v1/tenants", undefined, "wrong-token");
  assert.equal(api.status, 401, "the API beside it still wants a token");
});

test("sign in with the admin token: the cluster view", async () => {
  await signIn("not-a-token");
  await page.getByText("does not accept this token").waitFor();
  await signIn(cluster.token);
  await page.getByRole("heading", { name: "Cluster" }).waitFor();
  const members = page.getByRole("table", { name: "Members" });
  await waitFor(async () => (await members.getByRole("row").count()) === 4, "three member rows");
  const leader = (await page.locator("#leader-card .v").textContent()).trim();
  assert.match(leader, /^n[123]$/);
  await members.getByRole("row", { name: new RegExp(`^${leader} leader`) }).waitFor();
  // Every member's own readiness, applied index, lag and version.
  for (const id of ["n1", "n2", "n3"]) await members.getByRole("row", { name: new RegExp(`^${id} .* ready \\d+ \\d+ dev$`) }).waitFor();
  for (const k of ["Term", "Commit index", "Applied index", "Health"]) await page.locator(".card .k", { hasText: k }).first().waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem("baton.token") !== null && document.cookie === ""), true, "token in sessionStorage, no cookie");
});

test("open a queue; a task created from the CLI appears within 2 s", async () => {
  await page.getByRole("link", { name: "Queues" }).click();
  const queues = page.getByRole("table", { name: "Queues of acme" });
  await queues.getByRole("link", { name: "research" }).click();
  await page.getByRole("heading", { name: "Queue research" }).waitFor();
  await page.locator("#stat-running .v", { hasText: "1" }).waitFor();
  await page.locator("#stat-dead .v", { hasText: "2" }).waitFor();
  await page.locator(".live.on").waitFor(); // the watch stream is open
  await cluster.cli("task", "create", "--tenant", "acme", "--queue", "research", "--id", "report-00-cli", "--payload", '{"from":"cli"}');
  // The list reloads on the watch event only (no polling of the list): the
  // row comes through the stream.
  await page.getByRole("link", { name: "report-00-cli" }).waitFor({ timeout: 2000 });
  await page.getByRole("link", { name: "report-00-cli" }).click();
  await page.getByRole("heading", { name: "Task report-00-cli" }).waitFor();
  await page.getByText('"from": "cli"').waitFor();

  // A leased task's detail: owner, fencing token, lease countdown.
  await page.goto(cluster.url(1) + "/ui/#/t/acme/tasks/report-01");
  await page.getByRole("heading", { name: "Task report-01" }).waitFor();
  const token = (await cluster.api("GET", "/v1/tenants/acme/tasks/report-01")).fencing_token;
  assert.equal((await page.locator("#fencing-token").textContent()).trim(), String(token));
  await page.getByText("agent-a").first().waitFor();
  const first = await page.locator("#lease-countdown").textContent();
  assert.match(first, /^ends in \d+ (s|min)/);
});

test("tasks are paged on the server", async () => {
  await page.goto(cluster.url(1) + "/ui/#/t/acme/tasks?queue=research");
  await page.getByRole("heading", { name: "Tasks" }).waitFor();
  const rows = page.getByRole("table", { name: "Tasks" }).locator("tbody tr");
  await waitFor(async () => (await rows.count()) > 10, "a page of tasks");
  const requests = [];
  page.on("request", (r) => { if (r.url().includes("/tasks?")) requests.push(r.url()); });
  await page.getByLabel("Status").fill("dead");
  await page.getByRole("button", { name: "Filter" }).click();
  await waitFor(async () => (await rows.count()) === 2, "the two dead tasks");
  assert.ok(requests.some((u) => u.includes("status=dead") && u.includes("limit=50")), `filter sent to the server: ${requests}`);
});

test(`${BULK} tasks: one page of 50 at a time from the server`, async () => {
  const requests = [];
  const onReq = (r) => { if (r.url().includes("/tasks?")) requests.push(new URL(r.url())); };
  page.on("request", onReq);
  await page.goto(cluster.url(1) + "/ui/#/t/acme/tasks?queue=bulk");
  const table = page.getByRole("table", { name: "Tasks" });
  const first = () => table.locator("tbody tr").first().locator("th").textContent();
  await table.getByRole("link", { name: "bulk-000000" }).waitFor();
  assert.equal(await table.locator("tbody tr").count(), 50);
  await page.getByRole("button", { name: "Next page" }).click();
  await table.getByRole("link", { name: "bulk-000050" }).waitFor();
  assert.equal(await first(), "bulk-000050");
  await page.getByRole("button", { name: "Next page" }).click();
  await table.getByRole("link", { name: "bulk-000100" }).waitFor();
  await page.getByRole("button", { name: "Previous page" }).click();
  await table.getByRole("link", { name: "bulk-000050" }).waitFor();
  assert.equal(await first(), "bulk-000050");
  page.off("request", onReq);
  assert.ok(requests.length >= 4 && requests.every((u) => u.searchParams.get("limit") === "50" && u.searchParams.get("queue") === "bulk"),
    `every request asks for one page: ${requests.map(String)}`);
  assert.ok(requests.some((u) => u.searchParams.get("page_token")), "later pages by page_token");
  // The queue's figures count them all.
  await page.goto(cluster.url(1) + "/ui/#/t/acme/queues/bulk");
  await page.locator("#stat-tasks .v", { hasText: String(BULK) }).waitFor();
});

test("retry a dead letter, behind a confirmation", async () => {
  await page.getByRole("link", { name: "Dead letters" }).click();
  await page.getByRole("heading", { name: "Dead letters" }).waitFor();
  await page.getByRole("button", { name: "Retry report-dead-1" }).click();
  const dialog = page.getByRole("dialog", { name: "Retry task report-dead-1?" });
  await dialog.waitFor();
  await dialog.getByRole("button", { name: "Keep as is" }).click(); // changing one's mind does nothing
  await dialog.waitFor({ state: "detached" });
  assert.equal((await cluster.api("GET", "/v1/tenants/acme/tasks/report-dead-1")).status, "dead");
  await page.getByRole("button", { name: "Retry report-dead-1" }).click();
  await dialog.getByRole("button", { name: "Retry" }).click();
  await page.getByRole("button", { name: "Retry report-dead-1" }).waitFor({ state: "detached" });
  const t = await cluster.api("GET", "/v1/tenants/acme/tasks/report-dead-1");
  assert.equal(t.status, "pending");
  assert.equal(t.attempt, 0);
  // Cancel the other one.
  await page.getByRole("button", { name: "Cancel report-dead-2" }).click();
  await page.getByRole("dialog", { name: "Cancel task report-dead-2?" }).getByRole("button", { name: "Cancel task" }).click();
  await page.getByRole("button", { name: "Cancel report-dead-2" }).waitFor({ state: "detached" });
  assert.equal((await cluster.api("GET", "/v1/tenants/acme/tasks/report-dead-2")).status, "cancelled");
  // A new dead letter shows up live.
  await deadLetter(cluster, "acme", "review", "review-dead", "timeout");
  await page.getByRole("link", { name: "review-dead" }).waitFor({ timeout: 2000 });
});

test("open a thread with a fork: the tree", async () => {
  await page.getByRole("link", { name: "Threads" }).click();
  await page.getByRole("link", { name: "run-7" }).click();
  await page.getByRole("heading", { name: "Thread run-7" }).waitFor();
  const tree = page.getByRole("list", { name: "Checkpoint tree" });
  await tree.waitFor();
  for (const id of ["c1", "c2", "c3", "c2b"]) await tree.getByRole("button", { name: new RegExp(`^Checkpoint ${id}\\b`) }).waitFor();
  await tree.getByRole("button", { name: "Checkpoint c1, fork with 2 branches" }).waitFor();
  const branches = tree.getByRole("group", { name: "Branches from c1" });
  assert.equal(await branches.locator(":scope > li").count(), 2);
  await tree.getByRole("button", { name: /^Checkpoint c2b, head/ }).click(); // the fork is the head
  const detail = page.locator("#checkpoint-detail");
  await detail.getByRole("heading", { name: "Checkpoint c2b" }).waitFor();
  await detail.getByRole("cell", { name: "draft ready" }).or(detail.getByText('"draft ready"')).first().waitFor();
  await detail.getByText('"edited": true').waitFor();
});

test("artifacts: versions, refs, previews of text, JSON and images, download", async () => {
  await page.getByRole("link", { name: "Artifacts" }).click();
  await page.getByRole("link", { name: "report-42-draft" }).click();
  await page.getByText("report-42/approved").waitFor();
  await page.locator("#preview pre", { hasText: "Fencing tokens stop" }).waitFor();
  const dl = page.waitForEvent("download");
  await page.getByRole("button", { name: "Download version 1" }).click();
  assert.match((await dl).suggestedFilename(), /^report-42-draft-v1(\.md)?$/);
  // A new version published from the CLI shows up live, previewed.
  writeFileSync(join(cluster.base, "draft2.md"), "# Report 42, second draft\n");
  await cluster.cli("artifact", "put", join(cluster.base, "draft2.md"), "--tenant", "acme", "--name", "report-42-draft", "--media-type", "text/markdown");
  await page.getByRole("button", { name: "Preview version 2" }).waitFor({ timeout: 2000 });
  await page.locator("#preview pre", { hasText: "second draft" }).waitFor();
  await page.goto(cluster.url(1) + "/ui/#/t/acme/artifacts/report-42-summary");
  await page.locator("#preview pre", { hasText: '"pages": 3' }).waitFor();
  await page.goto(cluster.url(1) + "/ui/#/t/acme/artifacts/report-42-chart");
  const img = page.getByRole("img", { name: /report-42-chart version 1/ });
  await img.waitFor();
  await waitFor(() => img.evaluate((el) => el.complete && el.naturalWidth === 48), "the PNG decoded");
});

test("KV browser and operations ledger", async () => {
  await page.getByRole("link", { name: "KV" }).click();
  await page.getByLabel("Namespace", { exact: true }).fill("notes");
  await page.getByRole("button", { name: "Browse" }).click();
  await page.getByRole("button", { name: "owner" }).click();
  await page.getByText('"team": "research"').waitFor();
  await page.getByRole("link", { name: "Operations" }).click();
  const recent = page.getByRole("table", { name: "Recent operations" });
  await recent.getByText("mail-report-42").waitFor(); // from the retained history
  await recent.getByText("publish-page-42").waitFor();
  await cluster.api("POST", "/v1/tenants/acme/ops/publish-page-42/finish", { state: "failed", result: { error: "503" } });
  await recent.getByRole("row", { name: /publish-page-42 publish failed/ }).waitFor({ timeout: 2000 }); // live
});

test("a tenant-scoped token sees its tenant only", async () => {
  await signOut();
  await signIn(principalToken, "globex");
  await page.getByText("cannot be used in tenant").waitFor();
  await signIn(principalToken, "acme");
  await page.getByRole("heading", { name: "Queues" }).waitFor();
  assert.equal((await page.locator("#tenant-name").textContent()).trim(), "acme");
  assert.equal(await page.locator("#tenant-select").count(), 0, "no tenant selector");
  assert.equal(await page.getByRole("link", { name: "Cluster" }).count(), 0, "no cluster link");
  await page.getByRole("table", { name: "Queues of acme" }).getByRole("link", { name: "research" }).waitFor();
  // Another tenant's pages are refused by the API, and nothing of it shows.
  await page.goto(cluster.url(1) + "/ui/#/t/globex/queues");
  await page.getByRole("alert").filter({ hasText: "Not allowed" }).waitFor();
  assert.equal(await page.getByText("globex-only").count(), 0);
  await page.goto(cluster.url(1) + "/ui/#/t/globex/tasks/secret-plan");
  await page.getByRole("alert").filter({ hasText: "Not allowed" }).waitFor();
  assert.equal(await page.getByText("classified").count(), 0);
  await page.goto(cluster.url(1) + "/ui/#/cluster");
  await page.getByRole("alert").filter({ hasText: "admin token" }).waitFor();
  await page.goto(cluster.url(1) + "/ui/#/tenants");
  const tenants = page.getByRole("table", { name: "Tenants" });
  await tenants.getByRole("rowheader", { name: "acme" }).waitFor();
  assert.equal(await tenants.getByText("globex").count(), 0);
  await signOut();
});

test("keyboard navigation and labels", async () => {
  await page.goto(cluster.url(0) + "/ui/");
  await page.getByLabel("Token", { exact: true }).waitFor();
  // Sign in with the keyboard only.
  await page.keyboard.type(cluster.token); // the token field has the focus
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Cluster" }).waitFor();
  // From the top of a page: the skip link comes first, then the header's
  // controls, then the sections.
  await page.reload();
  await page.getByRole("heading", { name: "Cluster" }).waitFor();
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement.textContent), "Skip to content");
  const seen = [];
  for (let i = 0; i < 12 && !seen.includes("Queues"); i++) {
    await page.keyboard.press("Tab");
    seen.push(await page.evaluate(() => document.activeElement.textContent.trim()));
  }
  assert.ok(seen.includes("Queues"), `Tab reached: ${seen}`);
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Queues" }).waitFor();
  await waitFor(() => page.evaluate(() => document.activeElement.tagName === "H1"), "focus moved to the new page's heading");
  // Every control of every view has an accessible name.
  for (const hash of ["#/cluster", "#/tenants", "#/t/acme/queues", "#/t/acme/queues/research", "#/t/acme/tasks", "#/t/acme/dead",
    "#/t/acme/artifacts/report-42-draft", "#/t/acme/threads/run-7", "#/t/acme/kv?ns=notes", "#/t/acme/ops"]) {
    await page.goto(cluster.url(0) + "/ui/" + hash);
    await page.locator("main h1").waitFor();
    await page.locator("main .hint", { hasText: "Loading" }).waitFor({ state: "detached" });
    const unnamed = await page.evaluate(() => [...document.querySelectorAll("input, select, textarea, button, a[href]")]
      .filter((el) => el.offsetParent !== null || el.tagName === "A")
      .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute("aria-label") && !el.textContent.trim())
      .map((el) => el.outerHTML.slice(0, 80)));
    assert.deepEqual(unnamed, [], `controls without a name on ${hash}`);
    const snap = await page.locator("main").ariaSnapshot();
    assert.match(snap, /heading .*\[level=1\]/, `a level-1 heading on ${hash}`);
  }
  // The confirmation dialog is a modal that Escape closes.
  await deadLetter(cluster, "acme", "research", "report-dead-kb", "boom");
  await page.goto(cluster.url(0) + "/ui/#/t/acme/dead");
  await page.getByRole("button", { name: "Retry report-dead-kb" }).focus();
  await page.keyboard.press("Enter");
  await page.getByRole("dialog").waitFor();
  assert.equal(await page.evaluate(() => document.activeElement.textContent), "Keep as is", "focus starts on the safe choice");
  await page.keyboard.press("Escape");
  await page.getByRole("dialog").waitFor({ state: "detached" });
  assert.equal((await cluster.api("GET", "/v1/tenants/acme/tasks/report-dead-kb")).status, "dead");
});

test("readable at 1280x800 and at phone width", async () => {
  for (const size of [DESKTOP, PHONE]) {
    await page.setViewportSize(size);
    for (const hash of ["#/cluster", "#/t/acme/queues", "#/t/acme/queues/research", "#/t/acme/tasks/report-01", "#/t/acme/dead",
      "#/t/acme/artifacts/report-42-chart", "#/t/acme/threads/run-7", "#/t/acme/kv?ns=notes", "#/t/acme/ops"]) {
      await page.goto(cluster.url(0) + "/ui/" + hash);
      await page.locator("main h1").waitFor();
      await page.locator("main .hint", { hasText: "Loading" }).waitFor({ state: "detached" });
      const { scroll, width, navVisible } = await page.evaluate(() => ({
        scroll: document.documentElement.scrollWidth, width: window.innerWidth,
        navVisible: document.querySelector("nav a").getBoundingClientRect().width > 0,
      }));
      assert.ok(scroll <= width, `${hash} at ${size.width}px: the page is ${scroll}px wide`);
      assert.ok(navVisible, `${hash} at ${size.width}px: navigation visible`);
    }
  }
  await page.setViewportSize(DESKTOP);
});

test("a member that is down shows as unreachable", async () => {
  await signIn(cluster.token);
  const members = page.getByRole("table", { name: "Members" });
  await members.getByRole("row").nth(3).waitFor();
  const st = (await cluster.request(1, "GET", "/v1/cluster?consistency=stale")).body;
  const victim = [0, 2].find((i) => cluster.ids[i] !== st.leader.id); // neither the leader nor the page's node
  await cluster.kill(victim);
  await members.getByRole("row", { name: new RegExp(`^${cluster.ids[victim]} .*unreachable`) }).waitFor({ timeout: 15_000 });
});

test("no script error in the browser", () => {
  // 4xx answers the pages handle (sign-in probes, refused tenants, a watch
  // resumed from before the retained history: 410, then from its floor).
  const real = consoleErrors.filter((e) => !/status of (400|401|403|404|410)/.test(e));
  assert.deepEqual(real, []);
});
