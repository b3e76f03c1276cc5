// Small DOM helpers: elements are built with h(), never from HTML strings,
// so nothing the API answers is ever parsed as markup.

/** h("a", {href: "#/x", class: "c", onclick: f}, "text", child, [more]) */
export function h(tag, attrs, ...children) {
  const el = tag === "svg" || tag.startsWith("svg:") ? document.createElementNS("http://www.w3.org/2000/svg", tag.replace("svg:", "")) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "class") el.setAttribute("class", v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

/** Replaces el's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A table in a scrollable, focusable region (keyboard users can scroll it). */
export function table(caption, columns, rows, opts = {}) {
  const t = h("table", { class: opts.class },
    h("caption", { class: opts.captionHidden ? "visually-hidden" : undefined }, caption),
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: columns.length, class: "empty" }, opts.empty || "Nothing here."))));
  return h("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-label": caption }, t);
}

/** A definition list from [term, value] pairs. */
export function dl(pairs) {
  return h("dl", { class: "facts" }, pairs.filter(Boolean).map(([k, v]) => [h("dt", {}, k), h("dd", {}, v ?? "")]));
}

export function fmtTime(s) {
  if (!s) return "";
  const d = new Date(s);
  return isNaN(d) ? s : d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

export function fmtAge(ms) {
  if (ms === null || ms === undefined) return "";
  const s = Math.round(ms / 1000);
  if (Math.abs(s) < 120) return `${s} s`;
  if (Math.abs(s) < 7200) return `${Math.round(s / 60)} min`;
  if (Math.abs(s) < 172800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

export function fmtBytes(n) {
  if (!n) return "0 B";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${u[i]}`;
}

/** JSON shown as text, pretty-printed. */
export function jsonBlock(v, label) {
  return h("pre", { class: "json", tabindex: "0", "aria-label": label }, JSON.stringify(v, null, 2) ?? "null");
}

/** A <dialog> asking to confirm; resolves true on confirm. */
export function confirmDialog(title, text, action) {
  return new Promise((resolve) => {
    const d = h("dialog", { "aria-labelledby": "confirm-title", "aria-describedby": "confirm-text" },
      h("h2", { id: "confirm-title" }, title),
      h("p", { id: "confirm-text" }, text),
      h("div", { class: "actions" },
        h("button", { type: "button", class: "secondary", onclick: () => d.close("cancel") }, "Keep as is"),
        h("button", { type: "button", class: "danger", onclick: () => d.close("ok") }, action)));
    d.addEventListener("close", () => { d.remove(); resolve(d.returnValue === "ok"); });
    document.body.append(d);
    d.showModal();
    d.querySelector("button.secondary").focus();
  });
}
