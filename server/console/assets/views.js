// The console's pages. Each view renders into ctx.main from the public API
// and may open a watch stream (ctx.live) to refresh itself; it returns a
// cleanup function for its timers.
import { api, get, raw, tpath, qs, APIError } from "./api.js";
import { h, fill, table, dl, fmtTime, fmtAge, fmtBytes, jsonBlock, confirmDialog } from "./dom.js";
import { checkpointTree } from "./tree.js";

const PAGE = 50;

/** Calls f at most once per wait ms, trailing (live refreshes). */
function debounce(f, wait = 250) {
  let t = 0;
  const d = () => { clearTimeout(t); t = setTimeout(f, wait); };
  d.cancel = () => clearTimeout(t);
  return d;
}

function badge(text, cls = text) {
  return h("span", { class: "badge " + String(cls).replace(/[^a-z0-9_-]/gi, "") }, text);
}

function errorBox(e) {
  const msg = e instanceof APIError
    ? (e.status === 403 ? `Not allowed: ${e.message}` : `${e.code || "error"} (${e.status}): ${e.message}`)
    : String(e && e.message ? e.message : e);
  return h("p", { class: "error", role: "alert" }, msg);
}

function card(k, v, id) {
  return h("div", { class: "card", id }, h("div", { class: "k" }, k), h("div", { class: "v" }, v));
}

function tlink(ctx, ...parts) {
  return `#/t/${encodeURIComponent(ctx.tenant)}/` + parts.map(encodeURIComponent).join("/");
}

/** A pager over page_token pages: keeps the tokens of the pages before. */
function pager(onPage) {
  const tokens = [""];
  let next = "";
  const info = h("span", { class: "hint" });
  const prev = h("button", { type: "button", class: "secondary", onclick: () => { tokens.pop(); onPage(tokens[tokens.length - 1]); } }, "Previous page");
  const nxt = h("button", { type: "button", class: "secondary", onclick: () => { tokens.push(next); onPage(next); } }, "Next page");
  const el = h("div", { class: "pager", role: "group", "aria-label": "Pages" }, prev, nxt, info);
  return {
    el,
    get token() { return tokens[tokens.length - 1]; },
    update(nextToken, shown) {
      next = nextToken || "";
      prev.disabled = tokens.length <= 1;
      nxt.disabled = !next;
      info.textContent = `page ${tokens.length}` + (shown !== undefined ? `, ${shown} shown` : "") + (next ? "" : ", last page");
    },
    reset() { tokens.length = 1; tokens[0] = ""; },
  };
}

// ---------------------------------------------------------------- cluster

async function clusterView(ctx) {
  if (!ctx.admin) {
    fill(ctx.main, h("h1", {}, "Cluster"), h("p", { class: "error", role: "alert" }, "Not allowed: the cluster's status needs the admin token."));
    return;
  }
  const body = h("div");
  fill(ctx.main, h("h1", {}, "Cluster"), body);
  async function load() {
    let st, health;
    try {
      [st, health] = await Promise.all([get("/v1/cluster?probe=true"), fetch("/healthz", { cache: "no-store" }).then((r) => r.json())]);
    } catch (e) {
      fill(body, errorBox(e));
      return;
    }
    const leaderId = st.leader && st.leader.id;
    // The leader's commit index, as the best-informed member reports it.
    const commit = Math.max(st.commit_index, ...st.members.map((m) => (m.probe && m.probe.reachable ? m.probe.commit_index : 0)));
    const rows = st.members.map((m) => {
      const p = m.probe;
      const health = !p ? "" : !p.reachable ? badge("unreachable", "bad") : p.ready ? badge("ready", "ok") : badge("not ready", "warn");
      return h("tr", {},
        h("th", { scope: "row" }, m.id),
        h("td", {}, m.id === leaderId ? badge("leader") : badge(m.state || "")),
        h("td", {}, m.voter ? "voter" : "non-voter"),
        h("td", {}, h("code", {}, m.http_addr)), h("td", {}, h("code", {}, m.raft_addr)),
        h("td", {}, health, p && p.error ? h("div", { class: "hint" }, p.error) : null),
        h("td", { class: "num" }, p && p.reachable ? p.applied_index : ""),
        h("td", { class: "num" }, p && p.reachable ? Math.max(0, commit - p.applied_index) : ""),
        h("td", {}, p ? p.version : ""));
    });
    fill(body,
      h("div", { class: "cards" },
        card("Leader", leaderId || "none", "leader-card"), card("Term", st.term), card("Commit index", st.commit_index),
        card("Applied index", st.applied_index), card("Health of " + st.node_id, health.status === "ok" ? "ok" : String(health.status)),
        card("State size", fmtBytes(st.state_size.bytes) + (st.state_size.max_bytes ? " of " + fmtBytes(st.state_size.max_bytes) : ""))),
      table("Members", ["Member", "Role", "Vote", "HTTP", "Raft", "Health", "Applied index", "Lag (entries)", "Version"], rows),
      h("p", { class: "hint" }, `Answered by ${st.node_id} (${st.state}), which asked each member for its own readiness, indexes and version; lag is the leader's commit index minus a member's applied index.`),
      h("h2", {}, "This node"),
      dl([["Node", st.node_id], ["Role", st.state], ["Version", st.build.version], ["Commit", h("code", {}, st.build.commit || "")],
        ["Go", st.build.go_version], ["State digest", h("code", {}, st.state_digest)], ["Last snapshot index", st.last_snapshot_index],
        ["Applied since start", st.applied_since_start], ["Session bytes", fmtBytes(st.retries.session_bytes) + " of " + fmtBytes(st.retries.session_bytes_limit)]]));
  }
  await load();
  const t = setInterval(load, 3000);
  return () => clearInterval(t);
}

// ---------------------------------------------------------------- tenants

async function tenantsView(ctx) {
  const body = h("div");
  fill(ctx.main, h("h1", {}, "Tenants and quotas"), body);
  const names = ctx.admin ? ctx.tenants() : [ctx.tenant];
  if (ctx.admin) await ctx.reloadTenants();
  const list = ctx.admin ? ctx.tenants() : names;
  const shown = list.slice(0, 200);
  const quotas = await Promise.all(shown.map((t) => get(tpath(t, "quota")).catch((e) => e)));
  const rows = shown.map((t, i) => {
    const q = quotas[i];
    const cells = q instanceof Error
      ? [h("td", { colspan: 4 }, q instanceof APIError && q.status === 403 ? "quota not readable with this token" : String(q.message))]
      : [h("td", { class: "num" }, fmtBytes(q.used_bytes) + " / " + (q.max_bytes ? fmtBytes(q.max_bytes) : "no limit")),
        h("td", { class: "num" }, q.used_keys + " / " + (q.max_keys || "no limit")),
        h("td", { class: "num" }, q.rate_per_sec ? `${q.rate_per_sec}/s (burst ${q.burst})` : "no limit"),
        h("td", {}, h("a", { href: `#/t/${encodeURIComponent(t)}/queues` }, "open"))];
    return h("tr", {}, h("th", { scope: "row" }, t), cells);
  });
  fill(body, table("Tenants", ["Tenant", "Data (used / limit)", "Keys (used / limit)", "Request rate per principal", ""], rows, { empty: "No tenant yet (bin/baton tenant create NAME)." }),
    list.length > shown.length ? h("p", { class: "hint" }, `The first ${shown.length} of ${list.length} tenants.`) : null,
    ctx.admin ? null : h("p", { class: "hint" }, "A principal's token sees its own tenant only."));
}

// ---------------------------------------------------------------- queues

// Claims per minute sampled while the console is open, per tenant/queue:
// the throughput of the last minutes, drawn as a sparkline (at most 30
// samples per queue, 500 queues).
const samples = new Map();

function sample(key, cpm) {
  let s = samples.get(key);
  if (!s) {
    if (samples.size >= 500) samples.delete(samples.keys().next().value);
    s = [];
    samples.set(key, s);
  }
  const now = Date.now();
  if (!s.length || now - s[s.length - 1][0] >= 5000) s.push([now, cpm]);
  else s[s.length - 1][1] = cpm;
  if (s.length > 30) s.shift();
  return s;
}

function spark(s, label) {
  const max = Math.max(1, ...s.map((x) => x[1]));
  const pts = (s.length === 1 ? [[0, s[0][1]], [1, s[0][1]]] : s).map((x, i, a) => `${(i * 100) / (a.length - 1)},${20 - (x[1] / max) * 18}`).join(" ");
  const svg = h("svg", { class: "spark", viewBox: "0 0 100 22", preserveAspectRatio: "none", role: "img", "aria-label": label });
  svg.append(h("svg:polyline", { points: pts }));
  return svg;
}

/** Running tasks: the API's count of live leases when it answers one, else the status's count. */
function running(q) {
  return q.running ?? (q.by_status || {}).running ?? 0;
}

function statusChips(by) {
  return Object.entries(by || {}).sort().map(([k, v]) => [badge(`${k} ${v}`, k), " "]);
}

async function queuesView(ctx) {
  if (ctx.rest.length) return queueView(ctx, ctx.rest[0]);
  const body = h("div");
  const pg = pager((tok) => load(tok));
  fill(ctx.main, h("h1", {}, "Queues"), body, pg.el,
    h("p", { class: "hint" }, "Throughput is claims per minute, sampled every few seconds while this page is open."));
  async function load(tok = pg.token) {
    let res;
    try { res = await get(tpath(ctx.tenant, "queues") + qs({ limit: 100, page_token: tok })); } catch (e) { fill(body, errorBox(e)); return; }
    const rows = res.queues.map((q) => {
      const s = sample(ctx.tenant + "/" + q.queue, q.claims_per_minute);
      return h("tr", {},
        h("th", { scope: "row" }, h("a", { href: tlink(ctx, "queues", q.queue) }, q.queue)),
        h("td", { class: "num" }, q.tasks), h("td", {}, statusChips(q.by_status)),
        h("td", { class: "num" }, q.waiting), h("td", { class: "num" }, running(q)),
        h("td", { class: "num" }, q.dead),
        h("td", {}, q.oldest_pending_at ? fmtAge(q.oldest_pending_age_ms) : "none"),
        h("td", { class: "num" }, q.claims_per_minute, " ", spark(s, `claims per minute of ${q.queue}, last samples`)));
    });
    fill(body, table("Queues of " + ctx.tenant, ["Queue", "Tasks", "By status", "Waiting", "Running", "Dead", "Oldest waiting", "Claims/min"], rows,
      { empty: "No queue holds a task yet." }));
    pg.update(res.next_page_token, res.queues.length);
  }
  await load();
  const refresh = debounce(() => load(), 300);
  ctx.live(["tasks"], refresh);
  const t = setInterval(() => load(), 5000);
  return () => { clearInterval(t); refresh.cancel(); };
}

async function queueView(ctx, queue) {
  const stats = h("div");
  const tasks = h("div");
  fill(ctx.main, h("h1", {}, "Queue ", h("code", {}, queue)), stats, h("h2", {}, "Tasks"), tasks);
  async function loadStats() {
    let q;
    try { q = await get(tpath(ctx.tenant, "queues", queue)); } catch (e) { fill(stats, errorBox(e)); return; }
    const s = sample(ctx.tenant + "/" + queue, q.claims_per_minute);
    fill(stats,
      h("div", { class: "cards" },
        card("Tasks", q.tasks, "stat-tasks"), card("Waiting", q.waiting, "stat-waiting"), card("Running", running(q), "stat-running"),
        q.lease_expired !== undefined ? card("Lease expired", q.lease_expired) : null, q.blocked !== undefined ? card("Blocked on dependencies", q.blocked) : null,
        card("Dead", q.dead, "stat-dead"), card("Due later", q.due_later),
        card("Oldest waiting", q.oldest_pending_at ? fmtAge(q.oldest_pending_age_ms) : "none"),
        card("Claims / min", q.claims_per_minute)),
      h("p", {}, "By status: ", statusChips(q.by_status), " Throughput: ", spark(s, "claims per minute, last samples"),
        h("span", { class: "hint" }, ` as of ${fmtTime(q.as_of)}`)));
  }
  await loadStats();
  const list = await taskList(ctx, tasks, { queue, fixedQueue: true });
  const refresh = debounce(() => { loadStats(); list.reload(); }, 200);
  ctx.live(["tasks"], (ev) => { if (ev.type === "delete" || !ev.value || ev.value.queue === queue) refresh(); });
  const t = setInterval(loadStats, 5000);
  return () => { clearInterval(t); refresh.cancel(); };
}

// ---------------------------------------------------------------- tasks

/** A filtered, server-paged task table in el; answers {reload}. */
async function taskList(ctx, el, opts = {}) {
  const f = { queue: opts.queue || ctx.query.queue || "", status: opts.status ?? ctx.query.status ?? "", owner: ctx.query.owner || "" };
  const field = (name, label, value, attrs = {}) => {
    const id = "f-" + name;
    return h("label", { for: id }, label, h("input", { id, name, value, autocomplete: "off", ...attrs }));
  };
  const form = h("form", { class: "filters", role: "search", "aria-label": "Filter tasks" },
    opts.fixedQueue ? null : field("queue", "Queue", f.queue),
    opts.fixedStatus ? null : field("status", "Status", f.status, { list: "statuses" }),
    field("owner", "Owner", f.owner),
    h("datalist", { id: "statuses" }, ["pending", "running", "done", "dead", "cancelled"].map((s) => h("option", { value: s }))),
    h("button", { type: "submit" }, "Filter"));
  const out = h("div");
  const pg = pager((tok) => load(tok));
  fill(el, form, out, pg.el);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const d = new FormData(form);
    if (!opts.fixedQueue) f.queue = String(d.get("queue") || "").trim();
    if (!opts.fixedStatus) f.status = String(d.get("status") || "").trim();
    f.owner = String(d.get("owner") || "").trim();
    pg.reset();
    load("");
  });
  async function load(tok = pg.token) {
    let res;
    try {
      res = await fullPage((t, limit) => get(tpath(ctx.tenant, "tasks") + qs({ queue: f.queue, status: f.status, owner: f.owner, limit, page_token: t })), "tasks", tok);
    } catch (e) { fill(out, errorBox(e)); return; }
    const rows = res.tasks.map((t) => h("tr", { dataset: { task: t.task_id } },
      h("th", { scope: "row" }, h("a", { href: tlink(ctx, "tasks", t.task_id) }, t.task_id)),
      opts.fixedQueue ? null : h("td", {}, h("a", { href: tlink(ctx, "queues", t.queue) }, t.queue)),
      h("td", {}, badge(t.status), t.owner && leaseLive(t) ? [" ", badge("leased", "running")] : null),
      h("td", {}, t.owner || ""), h("td", { class: "num" }, t.attempt), h("td", { class: "num" }, t.priority),
      h("td", {}, fmtTime(t.updated_at)),
      opts.showError ? h("td", {}, t.last_error ? h("code", {}, t.last_error.length > 120 ? t.last_error.slice(0, 120) + "…" : t.last_error) : "") : null,
      opts.actions ? h("td", {}, h("div", { class: "row-actions" }, opts.actions(t, () => load()))) : null));
    const cols = ["Task", opts.fixedQueue ? null : "Queue", "Status", "Owner", "Attempt", "Priority", "Updated", opts.showError ? "Last error" : null, opts.actions ? "Actions" : null].filter(Boolean);
    fill(out, table(opts.caption || "Tasks", cols, rows, {
      empty: res.next_page_token ? "No match among the 200,000 tasks examined for this page: the next page goes on." : "No task matches.",
    }));
    pg.update(res.next_page_token, res.tasks.length);
  }
  await load("");
  return { reload: () => load() };
}

// A server page examines at most 10,000 records, so a filtered page may
// come back short, or empty, with a next_page_token. fullPage follows the
// tokens until it has a page of PAGE items, the list ends, or it has made
// MAX_CONTINUE requests (200,000 records examined), and answers the items
// with the token to go on from.
const MAX_CONTINUE = 20;

async function fullPage(fetchPage, key, tok) {
  const items = [];
  let next = tok;
  for (let i = 0; i < MAX_CONTINUE; i++) {
    const res = await fetchPage(next, PAGE - items.length);
    items.push(...res[key]);
    next = res.next_page_token || "";
    if (!next || items.length >= PAGE) break;
  }
  return { [key]: items, next_page_token: next };
}

function leaseLive(t) {
  return t.lease_until && new Date(t.lease_until).getTime() > Date.now();
}

async function tasksView(ctx) {
  if (ctx.rest.length) return taskView(ctx, ctx.rest[0]);
  const goto = h("form", { class: "toolbar", role: "search", "aria-label": "Open a task by id" },
    h("label", { for: "task-id" }, "Task id "), h("input", { id: "task-id", name: "id", autocomplete: "off" }),
    h("button", { type: "submit", class: "secondary" }, "Open"));
  goto.addEventListener("submit", (e) => { e.preventDefault(); const v = goto.elements.id.value.trim(); if (v) location.hash = tlink(ctx, "tasks", v); });
  const el = h("div");
  fill(ctx.main, h("h1", {}, "Tasks"), goto, el,
    h("p", { class: "hint" }, `Pages of ${PAGE} in task-id order, read from the server one page at a time (a filter that matches few tasks follows the server's pages until it fills one, up to 200,000 tasks examined).`));
  const list = await taskList(ctx, el);
  const refresh = debounce(() => list.reload(), 300);
  ctx.live(["tasks"], refresh);
  return () => refresh.cancel();
}

/** A task's dependencies, as far as the API answers them (issue 32). */
function depsFacts(ctx, t) {
  const link = (d) => {
    const id = typeof d === "string" ? d : d && d.task_id;
    return id ? [h("a", { href: tlink(ctx, "tasks", id) }, id), d.status ? [" ", badge(d.status)] : null, " "] : JSON.stringify(d);
  };
  const out = [];
  if (Array.isArray(t.depends_on)) out.push(["Depends on", t.depends_on.length ? t.depends_on.map(link) : "none"]);
  if (Array.isArray(t.dependencies)) out.push(["Dependencies", t.dependencies.length ? t.dependencies.map(link) : "none"]);
  if (t.depends_on_count !== undefined) out.push(["Dependencies left", `${t.dependencies_left ?? "?"} of ${t.depends_on_count}`]);
  if (t.dependency_policy !== undefined) out.push(["Dependency policy", t.dependency_policy]);
  return out;
}

async function taskView(ctx, id) {
  const body = h("div");
  fill(ctx.main, h("h1", {}, "Task ", h("code", {}, id)), body);
  let task;
  let tick = 0;
  function countdown() {
    const el = document.getElementById("lease-countdown");
    if (!el || !task) return;
    if (!task.lease_until) { el.textContent = "no lease"; return; }
    const ms = new Date(task.lease_until).getTime() - Date.now();
    el.textContent = ms > 0 ? `ends in ${fmtAge(ms)} (${fmtTime(task.lease_until)})` : `expired ${fmtAge(-ms)} ago (${fmtTime(task.lease_until)})`;
  }
  async function load() {
    try { task = await get(tpath(ctx.tenant, "tasks", id)); } catch (e) { fill(body, errorBox(e)); task = undefined; return; }
    const t = task;
    const deps = depsFacts(ctx, t);
    if (t.depends_on_count && !Array.isArray(t.dependencies)) {
      // The list of a task's dependencies with their outcomes, where the API serves it.
      try {
        const res = await get(tpath(ctx.tenant, "tasks", id, "dependencies") + qs({ limit: 100 }));
        deps.push(["Dependencies", res.dependencies.length ? res.dependencies.map((d) => [h("a", { href: tlink(ctx, "tasks", d.task_id) }, d.task_id), " ",
          badge(d.resolved ? d.status : "waiting", d.resolved ? d.status : "running"), " "]) : "none"],
        res.next_page_token ? ["", "the first 100 only"] : null);
      } catch { /* not served by this version */ }
    }
    fill(body,
      h("div", { class: "row-actions" }, taskActions(ctx, t, load)),
      dl([["Queue", h("a", { href: tlink(ctx, "queues", t.queue) }, t.queue)], ["Status", badge(t.status)], ["Owner", t.owner || "none"],
        ["Lease", h("span", { id: "lease-countdown" })], ["Fencing token", h("code", { id: "fencing-token" }, String(t.fencing_token))],
        ["Attempts", `${t.attempt}` + (t.max_attempts ? ` of ${t.max_attempts}` : " (no limit)")], ["Version", t.version], ["Priority", t.priority],
        ["Last error", t.last_error ? h("code", {}, t.last_error) : "none"], ["Failed at", fmtTime(t.failed_at)],
        ["Available at", fmtTime(t.available_at)], ["Artifact", t.artifact_id ? h("code", {}, t.artifact_id) : "none"],
        ["Created", fmtTime(t.created_at)], ["Updated", fmtTime(t.updated_at)], t.expires_at ? ["Expires", fmtTime(t.expires_at)] : null,
        ...deps]),
      h("div", { class: "split" },
        h("section", { "aria-labelledby": "payload-h" }, h("h2", { id: "payload-h" }, "Payload"), jsonBlock(t.payload, "payload")),
        h("section", { "aria-labelledby": "result-h" }, h("h2", { id: "result-h" }, "Result"), jsonBlock(t.result, "result"))));
    countdown();
  }
  await load();
  tick = setInterval(countdown, 1000);
  const refresh = debounce(load, 150);
  ctx.live(["tasks"], (ev) => { if (ev.key === id) refresh(); }, { prefix: id });
  return () => { clearInterval(tick); refresh.cancel(); };
}

/** Retry and cancel, each behind a confirmation, for a dead (or any unleased) task. */
function taskActions(ctx, t, done) {
  const out = [];
  if (t.status === "dead" || t.status === "cancelled") {
    out.push(h("button", { type: "button", "aria-label": `Retry ${t.task_id}`, onclick: async () => {
      if (!(await confirmDialog(`Retry task ${t.task_id}?`, `It goes back to pending in queue ${t.queue} with its attempts reset to 0.`, "Retry"))) return;
      try {
        await api("POST", tpath(ctx.tenant, "tasks", t.task_id, "retry"), { expect_version: t.version });
        ctx.announce(`Task ${t.task_id} retried.`);
      } catch (e) { ctx.announce(`Retry failed: ${e.message}`); }
      done();
    } }, "Retry"));
  }
  if (t.status === "dead") {
    out.push(h("button", { type: "button", class: "danger", "aria-label": `Cancel ${t.task_id}`, onclick: async () => {
      if (!(await confirmDialog(`Cancel task ${t.task_id}?`, "Its status becomes cancelled; no claim takes it again.", "Cancel task"))) return;
      try {
        await api("POST", tpath(ctx.tenant, "tasks", t.task_id, "update"), { status: "cancelled", expect_version: t.version, expect_status: t.status });
        ctx.announce(`Task ${t.task_id} cancelled.`);
      } catch (e) { ctx.announce(`Cancel failed: ${e.message}`); }
      done();
    } }, "Cancel"));
  }
  return out;
}

async function deadView(ctx) {
  const el = h("div");
  fill(ctx.main, h("h1", {}, "Dead letters"),
    h("p", { class: "hint" }, "Tasks in status dead: their attempts ran out or a worker failed them as non-retryable. Retry puts one back to pending; cancel ends it."), el);
  const list = await taskList(ctx, el, { status: "dead", fixedStatus: true, showError: true, caption: "Dead tasks", actions: (t, reload) => taskActions(ctx, t, reload) });
  const refresh = debounce(() => list.reload(), 300);
  ctx.live(["tasks"], refresh);
  return () => refresh.cancel();
}

// ---------------------------------------------------------------- artifacts

async function artifactsView(ctx) {
  if (ctx.rest.length) return artifactView(ctx, ctx.rest[0]);
  const form = h("form", { class: "filters", role: "search", "aria-label": "Filter artifacts" },
    h("label", { for: "a-prefix" }, "Name prefix", h("input", { id: "a-prefix", name: "prefix", value: ctx.query.prefix || "", autocomplete: "off" })),
    h("button", { type: "submit" }, "Filter"));
  const out = h("div");
  const pg = pager((tok) => load(tok));
  let prefix = ctx.query.prefix || "";
  form.addEventListener("submit", (e) => { e.preventDefault(); prefix = form.elements.prefix.value.trim(); pg.reset(); load(""); });
  fill(ctx.main, h("h1", {}, "Artifacts"), form, out, pg.el);
  async function load(tok = pg.token) {
    let res;
    try { res = await get(tpath(ctx.tenant, "artifacts") + qs({ prefix, limit: 100, page_token: tok })); } catch (e) { fill(out, errorBox(e)); return; }
    fill(out, table("Artifacts", ["Name", "Latest version", "Versions"], res.artifacts.map((a) => h("tr", {},
      h("th", { scope: "row" }, h("a", { href: tlink(ctx, "artifacts", a.name) }, a.name)),
      h("td", { class: "num" }, a.latest_version), h("td", { class: "num" }, a.versions))), { empty: "No artifact." }));
    pg.update(res.next_page_token, res.artifacts.length);
  }
  await load("");
  const refresh = debounce(() => load(), 300);
  ctx.live(["artifacts"], refresh);
  return () => refresh.cancel();
}

const PREVIEW_TEXT = 256 << 10;
const PREVIEW_IMAGE = 16 << 20;

async function artifactView(ctx, name) {
  const body = h("div");
  const preview = h("section", { "aria-labelledby": "preview-h", id: "preview" });
  fill(ctx.main, h("h1", {}, "Artifact ", h("code", {}, name)), body, preview);
  let urls = [];
  let latestSeen = 0;
  async function load() {
    let versions;
    try { versions = (await get(tpath(ctx.tenant, "artifacts", name, "versions"))).versions; } catch (e) { fill(body, errorBox(e)); return; }
    let refs = [];
    let refsNote = "";
    try { refs = (await get(tpath(ctx.tenant, "refs"))).refs || []; } catch (e) { refsNote = e instanceof APIError && e.status === 403 ? "refs not readable with this token" : e.message; }
    const rows = versions.slice().reverse().map((v) => {
      const pointing = refs.filter((r) => r.artifact_id === v.artifact_id);
      return h("tr", {},
        h("th", { scope: "row" }, v.version),
        h("td", {}, h("code", { title: v.artifact_id }, v.artifact_id.slice(0, 19) + "…")),
        h("td", { class: "num" }, fmtBytes(v.size)), h("td", {}, v.media_type || ""),
        h("td", {}, pointing.length ? pointing.map((r) => [badge(r.ref, "ok"), " "]) : refsNote || "none"),
        h("td", {}, v.created_by || "admin", " ", fmtTime(v.created_at)),
        h("td", {}, h("div", { class: "row-actions" },
          h("button", { type: "button", class: "secondary", "aria-label": `Preview version ${v.version}`, onclick: () => show(v) }, "Preview"),
          h("button", { type: "button", class: "secondary", "aria-label": `Download version ${v.version}`, onclick: () => download(v) }, "Download"))));
    });
    fill(body, table("Versions, newest first", ["Version", "Artifact id", "Size", "Media type", "Refs", "Created", ""], rows, { empty: "No version." }));
    const newest = versions[versions.length - 1];
    if (newest && newest.version > latestSeen) { latestSeen = newest.version; show(newest); } // a new version: preview it
  }
  const content = (v) => tpath(ctx.tenant, "artifacts", name, "versions", String(v.version), "content");
  function revoke() { urls.forEach((u) => URL.revokeObjectURL(u)); urls = []; }
  async function show(v) {
    revoke();
    const mt = (v.media_type || "").toLowerCase();
    const head = h("h2", { id: "preview-h" }, `Preview of version ${v.version}`);
    try {
      if (mt.startsWith("image/")) {
        if (v.size > PREVIEW_IMAGE) { fill(preview, head, h("p", {}, `An image of ${fmtBytes(v.size)}: download it to see it.`)); return; }
        const blob = await (await raw(content(v))).blob();
        const u = URL.createObjectURL(blob);
        urls.push(u);
        fill(preview, head, h("img", { class: "preview", src: u, alt: `${name} version ${v.version} (${mt})` }));
        return;
      }
      const textual = mt.startsWith("text/") || mt.includes("json") || mt.includes("xml") || mt.includes("yaml") || mt === "";
      if (!textual) { fill(preview, head, h("p", {}, `No preview for ${mt}: download it.`)); return; }
      const res = await raw(content(v));
      const reader = res.body.getReader();
      const parts = [];
      let n = 0;
      while (n < PREVIEW_TEXT) {
        const { value, done } = await reader.read();
        if (done) break;
        parts.push(value);
        n += value.length;
      }
      reader.cancel().catch(() => {});
      const bytes = new Uint8Array(Math.min(n, PREVIEW_TEXT));
      let off = 0;
      for (const p of parts) { const take = Math.min(p.length, bytes.length - off); bytes.set(p.subarray(0, take), off); off += take; if (off >= bytes.length) break; }
      let text = new TextDecoder("utf-8", { fatal: false }).decode(bytes);
      const cut = v.size > PREVIEW_TEXT;
      if (!cut && (mt.includes("json") || (mt === "" && /^\s*[[{]/.test(text)))) {
        try { text = JSON.stringify(JSON.parse(text), null, 2); } catch { /* shown as it is */ }
      }
      fill(preview, head, h("pre", { class: "preview", tabindex: "0", "aria-label": "content" }, text),
        cut ? h("p", { class: "hint" }, `The first ${fmtBytes(PREVIEW_TEXT)} of ${fmtBytes(v.size)}.`) : null);
    } catch (e) { fill(preview, head, errorBox(e)); }
  }
  async function download(v) {
    try {
      const blob = await (await raw(content(v))).blob();
      const u = URL.createObjectURL(blob);
      const a = h("a", { href: u, download: `${name}-v${v.version}` });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(u), 60000);
    } catch (e) { ctx.announce("Download failed: " + e.message); }
  }
  await load();
  const refresh = debounce(load, 300);
  ctx.live(["artifacts", "refs"], (ev) => { if (ev.resource === "refs" || String(ev.key).startsWith(name + "/")) refresh(); });
  return () => { refresh.cancel(); revoke(); };
}

// ---------------------------------------------------------------- threads

async function threadsView(ctx) {
  if (ctx.rest.length) return threadView(ctx, ctx.rest[0]);
  const goto = h("form", { class: "toolbar", role: "search", "aria-label": "Open a thread by id" },
    h("label", { for: "thread-id" }, "Thread id "), h("input", { id: "thread-id", name: "id", autocomplete: "off" }),
    h("button", { type: "submit", class: "secondary" }, "Open"));
  goto.addEventListener("submit", (e) => { e.preventDefault(); const v = goto.elements.id.value.trim(); if (v) location.hash = tlink(ctx, "threads", v); });
  const out = h("div");
  const pg = pager((tok) => load(tok));
  fill(ctx.main, h("h1", {}, "Threads"), goto, out, pg.el,
    h("p", { class: "hint" }, "Threads of this page of checkpoints (200 a page, across threads in key order)."));
  async function load(tok = pg.token) {
    let res;
    try { res = await get(tpath(ctx.tenant, "checkpoints") + qs({ limit: 200, page_token: tok })); } catch (e) { fill(out, errorBox(e)); return; }
    const by = new Map();
    for (const c of res.checkpoints) {
      const t = by.get(c.thread_id) || { n: 0, ns: new Set(), last: "" };
      t.n++;
      t.ns.add(c.checkpoint_ns || "");
      if (c.created_at > t.last) t.last = c.created_at;
      by.set(c.thread_id, t);
    }
    fill(out, table("Threads", ["Thread", "Checkpoints on this page", "Namespaces", "Newest"], [...by].map(([id, t]) => h("tr", {},
      h("th", { scope: "row" }, h("a", { href: tlink(ctx, "threads", id) }, id)), h("td", { class: "num" }, t.n),
      h("td", {}, [...t.ns].map((n) => n || "(default)").join(", ")), h("td", {}, fmtTime(t.last)))), { empty: "No checkpoint on this page." }));
    pg.update(res.next_page_token, by.size);
  }
  await load("");
  const refresh = debounce(() => load(), 500);
  ctx.live(["checkpoints"], refresh);
  return () => refresh.cancel();
}

const MAX_CHECKPOINTS = 5000;

async function threadView(ctx, thread) {
  const body = h("div");
  const detail = h("section", { id: "checkpoint-detail", "aria-live": "polite" });
  fill(ctx.main, h("h1", {}, "Thread ", h("code", {}, thread)), body, detail);
  let selected = "";
  async function load() {
    const all = [];
    let tok = "";
    try {
      do {
        const res = await get(tpath(ctx.tenant, "checkpoints") + qs({ thread, limit: 1000, pending_writes: "true", page_token: tok }));
        all.push(...res.checkpoints);
        tok = res.next_page_token || "";
      } while (tok && all.length < MAX_CHECKPOINTS);
    } catch (e) { fill(body, errorBox(e)); return; }
    const byNs = new Map();
    for (const c of all) {
      const ns = c.checkpoint_ns || "";
      if (!byNs.has(ns)) byNs.set(ns, []);
      byNs.get(ns).push(c);
    }
    const heads = new Map(await Promise.all([...byNs.keys()].map(async (ns) => {
      try { return [ns, (await get(tpath(ctx.tenant, "threads", thread, "checkpoints", "latest") + qs({ checkpoint_ns: ns }))).checkpoint_id]; } catch { return [ns, ""]; }
    })));
    const sections = [...byNs].sort().map(([ns, cps]) => h("section", { "aria-label": `Namespace ${ns || "(default)"}` },
      h("h2", {}, "Namespace ", ns ? h("code", {}, ns) : "(default)", h("span", { class: "hint" }, ` ${cps.length} checkpoints`)),
      checkpointTree(cps, heads.get(ns), (c) => select(c), selected)));
    fill(body, all.length ? sections : h("p", {}, "This thread has no checkpoint."),
      tok ? h("p", { class: "hint" }, `The first ${all.length} checkpoints only.`) : null);
  }
  async function select(c) {
    selected = c.checkpoint_id;
    for (const b of body.querySelectorAll(".node-btn")) b.setAttribute("aria-pressed", String(b.dataset.id === selected && b.dataset.ns === (c.checkpoint_ns || "")));
    let full = c;
    try { full = await get(tpath(ctx.tenant, "threads", thread, "checkpoints", c.checkpoint_id) + qs({ checkpoint_ns: c.checkpoint_ns })); } catch { /* the list's copy */ }
    const writes = full.pending_writes || [];
    fill(detail, h("h2", {}, "Checkpoint ", h("code", {}, c.checkpoint_id)),
      dl([["Parent", c.parent_id || "none (a root)"], ["Namespace", c.checkpoint_ns || "(default)"], ["Created", fmtTime(c.created_at)]]),
      h("div", { class: "split" },
        h("div", {}, h("h3", {}, "Data"), jsonBlock(full.data, "checkpoint data")),
        h("div", {}, h("h3", {}, "Metadata"), jsonBlock(full.metadata, "checkpoint metadata"))),
      h("h3", {}, "Pending writes"),
      table("Pending writes", ["Task", "Index", "Channel", "Value"], writes.map((w) => h("tr", {},
        h("td", {}, w.task_id), h("td", { class: "num" }, w.idx), h("td", {}, w.channel), h("td", {}, h("code", {}, JSON.stringify(w.value))))),
      { empty: "No pending write.", captionHidden: true }));
  }
  await load();
  const refresh = debounce(load, 300);
  ctx.live(["checkpoints"], (ev) => { if (typeof ev.key === "string" && ev.key.startsWith(thread + "/")) refresh(); }, { prefix: thread + "/" });
  return () => refresh.cancel();
}

// ---------------------------------------------------------------- KV

async function kvView(ctx) {
  const form = h("form", { class: "filters", role: "search", "aria-label": "Browse a namespace" },
    h("label", { for: "kv-ns" }, "Namespace", h("input", { id: "kv-ns", name: "ns", value: ctx.query.ns || "", required: true, autocomplete: "off" })),
    h("label", { for: "kv-prefix" }, "Key prefix", h("input", { id: "kv-prefix", name: "prefix", value: ctx.query.prefix || "", autocomplete: "off" })),
    h("button", { type: "submit" }, "Browse"));
  const out = h("div");
  const value = h("section", { "aria-live": "polite" });
  const pg = pager((tok) => load(tok));
  let ns = ctx.query.ns || "";
  let prefix = ctx.query.prefix || "";
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    location.hash = tlink(ctx, "kv") + qs({ ns: form.elements.ns.value.trim(), prefix: form.elements.prefix.value.trim() });
  });
  fill(ctx.main, h("h1", {}, "KV"), form, out, pg.el, value);
  async function load(tok = pg.token) {
    if (!ns) { fill(out, h("p", { class: "hint" }, "Name a namespace to browse its keys.")); pg.update("", 0); return; }
    let res;
    try { res = await get(tpath(ctx.tenant, "kv", ns) + qs({ prefix, limit: 100, page_token: tok })); } catch (e) { fill(out, errorBox(e)); return; }
    fill(out, table(`Keys of ${ns}`, ["Key", "Version", "Updated", "Expires", "Value"], res.entries.map((e) => {
      const s = JSON.stringify(e.value);
      return h("tr", {},
        h("th", { scope: "row" }, h("button", { type: "button", class: "node-btn", onclick: () => fill(value, h("h2", {}, "Value of ", h("code", {}, e.key)), jsonBlock(e.value, "value")) }, e.key)),
        h("td", { class: "num" }, e.version), h("td", {}, fmtTime(e.updated_at)), h("td", {}, e.expires_at ? fmtTime(e.expires_at) : "never"),
        h("td", {}, h("code", {}, s.length > 100 ? s.slice(0, 100) + "…" : s)));
    }), { empty: res.next_page_token ? "Nothing readable on this page of the scan: try the next page." : "No key." }));
    pg.update(res.next_page_token, res.entries.length);
  }
  await load("");
  if (ns) {
    const refresh = debounce(() => load(), 300);
    ctx.live(["kv"], refresh, { prefix: ns + "/" + prefix });
    return () => refresh.cancel();
  }
}

// ---------------------------------------------------------------- ops

const MAX_OPS = 500;

async function opsView(ctx) {
  const form = h("form", { class: "toolbar", role: "search", "aria-label": "Look up an operation" },
    h("label", { for: "op-id" }, "Operation id "), h("input", { id: "op-id", name: "id", autocomplete: "off", required: true }),
    h("button", { type: "submit", class: "secondary" }, "Look up"));
  const found = h("div", { "aria-live": "polite" });
  const out = h("div");
  const ops = new Map();
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try { fill(found, opTable("Operation", [await get(tpath(ctx.tenant, "ops", form.elements.id.value.trim()))])); } catch (e2) { fill(found, errorBox(e2)); }
  });
  fill(ctx.main, h("h1", {}, "Operations ledger"), form, found, h("h2", {}, "Recent operations"),
    h("p", { class: "hint" }, `From the node's retained watch history, then live; the newest ${MAX_OPS}.`), out);
  const render = debounce(() => fill(out, opTable("Recent operations", [...ops.values()].reverse())), 100);
  render();
  ctx.live(["ops"], (ev) => {
    ops.delete(ev.key);
    if (ev.type === "put" && ev.value) ops.set(ev.key, ev.value);
    while (ops.size > MAX_OPS) ops.delete(ops.keys().next().value);
    render();
  }, { fromIndex: 1 });
  return () => render.cancel();
}

function opTable(caption, list) {
  return table(caption, ["Operation", "Kind", "State", "Task", "Result", "Updated"], list.map((o) => h("tr", {},
    h("th", { scope: "row" }, h("code", {}, o.op_id)), h("td", {}, o.kind), h("td", {}, badge(o.state)), h("td", {}, o.task_id || ""),
    h("td", {}, o.result === null || o.result === undefined ? "" : h("code", {}, JSON.stringify(o.result).slice(0, 120))),
    h("td", {}, fmtTime(o.updated_at)))), { empty: "None seen yet." });
}

export const views = {
  cluster: clusterView,
  tenants: tenantsView,
  queues: queuesView,
  tasks: tasksView,
  dead: deadView,
  artifacts: artifactsView,
  threads: threadsView,
  kv: kvView,
  ops: opsView,
};
