// The console's shell: sign-in, navigation, the tenant in view, routing by
// the URL's fragment (#/t/acme/queues), and one watch stream for the view
// on screen.
import { session, get, tpath, APIError, watch } from "./api.js";
import { h, fill } from "./dom.js";
import { views } from "./views.js";

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const who = document.getElementById("who");
const status = document.getElementById("status");

let cleanup = () => {};
let stream = null;
let liveEl = null;
let tenants = [];

/** A short message in the polite live region (screen readers hear it). */
export function announce(text) {
  status.textContent = text;
  clearTimeout(announce.t);
  announce.t = setTimeout(() => { status.textContent = ""; }, 4000);
}

const SECTIONS = [
  { id: "cluster", label: "Cluster", admin: true },
  { id: "tenants", label: "Tenants and quotas" },
  { id: "queues", label: "Queues", tenant: true },
  { id: "tasks", label: "Tasks", tenant: true },
  { id: "dead", label: "Dead letters", tenant: true },
  { id: "artifacts", label: "Artifacts", tenant: true },
  { id: "threads", label: "Threads", tenant: true },
  { id: "kv", label: "KV", tenant: true },
  { id: "ops", label: "Operations", tenant: true },
];

function href(section, tenant = session.tenant) {
  const s = SECTIONS.find((x) => x.id === section);
  return s && s.tenant ? `#/t/${encodeURIComponent(tenant)}/${section}` : `#/${section}`;
}

/** Parses the fragment: #/t/TENANT/SECTION/REST...?query */
function parseRoute() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const [p, q = ""] = raw.split("?");
  const parts = p.split("/").filter(Boolean).map(decodeURIComponent);
  const query = Object.fromEntries(new URLSearchParams(q));
  if (parts[0] === "t" && parts.length >= 2) return { tenant: parts[1], section: parts[2] || "queues", rest: parts.slice(3), query };
  return { tenant: "", section: parts[0] || "", rest: parts.slice(1), query };
}

function renderNav(route) {
  const items = SECTIONS.filter((s) => !(s.tenant && !session.tenant) && !(s.admin && !session.admin)).map((s) =>
    h("li", {}, h("a", { href: href(s.id, route.tenant || session.tenant), "aria-current": s.id === route.section ? "page" : undefined }, s.label)));
  fill(nav, h("ul", {}, items));
}

function renderWho(route) {
  if (!session.token) { fill(who); return; }
  liveEl = h("span", { class: "live", id: "live", hidden: true });
  let tenantCtl;
  if (session.admin) {
    const sel = h("select", { id: "tenant-select", onchange: () => {
      session.setTenant(sel.value);
      const r = parseRoute();
      location.hash = href(SECTIONS.find((s) => s.id === r.section && s.tenant) ? r.section : "queues", sel.value);
    } }, h("option", { value: "" }, "(choose)"), tenants.map((t) => h("option", { value: t, selected: t === (route.tenant || session.tenant) }, t)));
    tenantCtl = [h("label", { for: "tenant-select" }, "Tenant"), sel];
  } else {
    tenantCtl = [h("span", {}, "Tenant "), h("strong", { id: "tenant-name" }, session.tenant)];
  }
  fill(who, tenantCtl, h("span", {}, session.admin ? "admin token" : "principal token"), liveEl,
    h("button", { type: "button", class: "secondary", onclick: signOut }, "Sign out"));
}

function signOut() {
  session.clear();
  if (stream) stream.stop();
  location.hash = "#/signin";
}

/** Opens the view's watch stream (or none); events go to onEvent. */
function live(tenant, resources, onEvent, opts) {
  if (stream) { stream.stop(); stream = null; }
  if (!resources || !resources.length || !tenant) { setLive(""); return; } // a view without a stream
  stream = watch(tenant, resources, onEvent, (state, err) => {
    if (state === "live") setLive("live", true);
    else if (state === "retrying") setLive("reconnecting");
    else setLive(err ? "not live: " + err.message : "not live");
  }, opts);
}

function setLive(text, on = false) {
  if (!liveEl) return;
  liveEl.hidden = !text;
  liveEl.textContent = text;
  liveEl.classList.toggle("on", on);
}

function signInView() {
  fill(nav);
  fill(who);
  const err = h("div", { id: "signin-error", role: "alert" });
  const token = h("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true, "aria-describedby": "token-hint" });
  const tenant = h("input", { id: "tenant", name: "tenant", autocomplete: "off", "aria-describedby": "tenant-hint" });
  const form = h("form", { class: "signin", "aria-labelledby": "signin-title" },
    h("label", { for: "token" }, "Token"), token,
    h("span", { id: "token-hint", class: "hint" }, "The admin token, or a principal's token (btk_…). It is kept in this tab's session storage only."),
    h("label", { for: "tenant" }, "Tenant"), tenant,
    h("span", { id: "tenant-hint", class: "hint" }, "Required for a principal's token (its tenant); optional for the admin token."),
    h("button", { type: "submit" }, "Sign in"), err);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    fill(err);
    try {
      await signIn(token.value.trim(), tenant.value.trim());
    } catch (e2) {
      fill(err, h("p", { class: "error" }, e2.message));
    }
  });
  fill(main, h("h1", { id: "signin-title" }, "Sign in"), form);
  token.focus();
}

async function signIn(token, tenant) {
  if (!token) throw new Error("Enter a token.");
  let admin = false;
  try {
    await get("/v1/cluster?consistency=stale", { token });
    admin = true;
  } catch (e) {
    if (!(e instanceof APIError)) throw e;
    if (e.status === 401) throw new Error("The cluster does not accept this token (" + e.message + ").");
    if (e.status !== 403) throw e;
  }
  if (!admin) {
    if (!tenant) throw new Error("This is a principal's token: enter its tenant.");
    try {
      await get(tpath(tenant, "watch") + "?resources=none", { token });
    } catch (e) {
      // The watch route refuses another tenant's principal before it looks
      // at anything else; an unknown resource name (400) means the tenant is right.
      if (e instanceof APIError && e.status === 403) throw new Error(`This token cannot be used in tenant "${tenant}": ${e.message}`);
      if (!(e instanceof APIError) || e.status !== 400) throw e;
    }
  }
  session.save(token, tenant, admin);
  location.hash = admin ? "#/cluster" : href("queues", tenant);
}

async function loadTenants() {
  tenants = [];
  if (!session.admin) return;
  try { tenants = (await get("/v1/tenants?consistency=stale")).tenants || []; } catch { tenants = []; }
  if (!session.tenant && tenants.length) session.setTenant(tenants[0]);
}

let tenantsLoaded = false;

async function route() {
  cleanup();
  cleanup = () => {};
  if (stream) { stream.stop(); stream = null; }
  const r = parseRoute();
  if (!session.token || r.section === "signin") { tenantsLoaded = false; signInView(); return; }
  if (!tenantsLoaded) { await loadTenants(); tenantsLoaded = true; }
  if (!r.section) { location.replace(session.admin ? "#/cluster" : href("queues")); return; }
  if (r.tenant && r.tenant !== session.tenant) {
    if (session.admin) session.setTenant(r.tenant);
  }
  renderNav(r);
  renderWho(r);
  const view = views[r.section];
  if (!view) { fill(main, h("h1", { tabindex: "-1" }, "Not found"), h("p", {}, "No such page of the console.")); return; }
  const ctx = {
    tenant: r.tenant || session.tenant, rest: r.rest, query: r.query, admin: session.admin, main,
    href, live: (resources, onEvent, opts) => live(r.tenant || session.tenant, resources, onEvent, opts), announce,
    tenants: () => tenants, reloadTenants: async () => { await loadTenants(); renderWho(r); },
  };
  fill(main, h("p", { class: "hint" }, "Loading…"));
  try {
    const c = await view(ctx);
    if (typeof c === "function") cleanup = c;
  } catch (e) {
    fill(main, h("h1", { tabindex: "-1" }, SECTIONS.find((s) => s.id === r.section)?.label || "Error"),
      h("p", { class: "error", role: "alert" }, errorText(e)));
  }
  const h1 = main.querySelector("h1");
  if (h1 && document.activeElement !== main && route.moved) { h1.setAttribute("tabindex", "-1"); h1.focus(); }
  route.moved = true;
}

export function errorText(e) {
  if (e instanceof APIError) {
    if (e.status === 403) return "Not allowed: " + e.message + " (the signed-in token's grants do not cover this).";
    if (e.status === 401) return "Signed out: " + e.message;
    return `${e.code || "error"} (${e.status}): ${e.message}`;
  }
  return String(e && e.message ? e.message : e);
}

window.addEventListener("hashchange", route);
route();
