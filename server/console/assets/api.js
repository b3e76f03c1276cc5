// The console's only way to the cluster: the public HTTP API (docs/api.md)
// of the node that served the page, with the signed-in token. The token
// lives in sessionStorage (this tab only, gone when it closes), never in a
// cookie, so no other site can make the browser send it.

const KEY_TOKEN = "baton.token";
const KEY_TENANT = "baton.tenant";
const KEY_ADMIN = "baton.admin";

export const session = {
  get token() { return sessionStorage.getItem(KEY_TOKEN) || ""; },
  get tenant() { return sessionStorage.getItem(KEY_TENANT) || ""; },
  get admin() { return sessionStorage.getItem(KEY_ADMIN) === "1"; },
  save(token, tenant, admin) {
    sessionStorage.setItem(KEY_TOKEN, token);
    sessionStorage.setItem(KEY_TENANT, tenant);
    sessionStorage.setItem(KEY_ADMIN, admin ? "1" : "0");
  },
  setTenant(t) { sessionStorage.setItem(KEY_TENANT, t); },
  clear() { sessionStorage.removeItem(KEY_TOKEN); sessionStorage.removeItem(KEY_TENANT); sessionStorage.removeItem(KEY_ADMIN); },
};

/** An error answer of the API: status, code and message as the server sent them. */
export class APIError extends Error {
  constructor(status, code, message, details) {
    super(message || code || `HTTP ${status}`);
    this.status = status;
    this.code = code || "";
    this.details = details || {};
  }
}

function headers(token, extra) {
  const h = { Authorization: "Bearer " + (token ?? session.token), ...extra };
  return h;
}

async function errorOf(res) {
  let body;
  try { body = await res.json(); } catch { body = undefined; }
  const e = body && body.error ? body.error : {};
  const { code, message, ...details } = e;
  return new APIError(res.status, code, message, details);
}

/** A JSON request; answers the decoded body (undefined for 204). */
export async function api(method, path, body, opts = {}) {
  const init = { method, headers: headers(opts.token), signal: opts.signal, cache: "no-store" };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  const res = await fetch(path, init);
  if (!res.ok) throw await errorOf(res);
  if (res.status === 204) return undefined;
  return res.json();
}

export const get = (path, opts) => api("GET", path, undefined, opts);

/** The raw answer of a GET (artifact content), its status checked. */
export async function raw(path, opts = {}) {
  const res = await fetch(path, { headers: headers(opts.token), signal: opts.signal, cache: "no-store" });
  if (!res.ok) throw await errorOf(res);
  return res;
}

/** A path below the tenant, each segment percent-encoded. */
export function tpath(tenant, ...segments) {
  return "/v1/tenants/" + encodeURIComponent(tenant) + (segments.length ? "/" + segments.map(encodeURIComponent).join("/") : "");
}

/** A query string of the set, non-empty values. */
export function qs(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") u.set(k, String(v));
  const s = u.toString();
  return s ? "?" + s : "";
}

/**
 * A watch stream (text/event-stream) read with fetch, since EventSource
 * cannot send an Authorization header. onEvent gets each event's decoded
 * data; the stream resumes after its last event id when it drops (backoff
 * 0.5 s to 5 s), until stop() is called. onState hears "live", "retrying"
 * and "stopped".
 */
export function watch(tenant, resources, onEvent, onState = () => {}, opts = {}) {
  const ctl = new AbortController();
  let lastId = "";
  let fromIndex = opts.fromIndex;
  let stopped = false;
  let backoff = 500;
  (async () => {
    while (!stopped) {
      try {
        const h = headers();
        if (lastId) h["Last-Event-ID"] = lastId;
        const q = { resources: resources.join(","), prefix: opts.prefix, from_index: lastId ? undefined : fromIndex };
        const res = await fetch(tpath(tenant, "watch") + qs(q), { headers: h, signal: ctl.signal, cache: "no-store" });
        if (!res.ok) {
          const err = await errorOf(res);
          if (res.status === 401 || res.status === 403 || res.status === 400) { onState("stopped", err); return; }
          if (res.status === 410) { // compacted: from the oldest retained event, or from now
            lastId = "";
            fromIndex = fromIndex !== undefined && err.details.floor ? err.details.floor : undefined;
            continue;
          }
          throw err;
        }
        onState("live");
        backoff = 500;
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let cut;
          while ((cut = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, cut);
            buf = buf.slice(cut + 2);
            let id = "", data = "", ev = "message";
            for (const line of block.split("\n")) {
              if (line.startsWith("id:")) id = line.slice(3).trim();
              else if (line.startsWith("data:")) data += line.slice(5).trim();
              else if (line.startsWith("event:")) ev = line.slice(6).trim();
            }
            if (!data) continue;
            if (ev === "error") throw new APIError(0, "stream", data);
            if (id) lastId = id;
            try { onEvent(JSON.parse(data)); } catch (e) { console.error("watch event", e); }
          }
        }
      } catch (e) {
        if (stopped) return;
        onState("retrying", e);
      }
      await new Promise((r) => setTimeout(r, backoff));
      backoff = Math.min(backoff * 2, 5000);
    }
  })();
  return { stop() { stopped = true; ctl.abort(); onState("stopped"); } };
}
