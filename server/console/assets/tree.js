// A namespace's checkpoints drawn as a tree: a straight chain is one list,
// and a checkpoint with several children (a fork, put with "fork": true)
// opens one nested list per branch, so lists nest only as deep as the
// forks do, however long the chains.
import { h } from "./dom.js";

/**
 * cps: the namespace's checkpoints (any order); head: the head's id;
 * onSelect(c) when a checkpoint's button is pressed.
 */
export function checkpointTree(cps, head, onSelect, selected) {
  const byId = new Map(cps.map((c) => [c.checkpoint_id, c]));
  const children = new Map();
  const roots = [];
  // Oldest first, so that branches read in the order they were made.
  const ordered = cps.slice().sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : 0));
  for (const c of ordered) {
    if (c.parent_id && byId.has(c.parent_id)) {
      if (!children.has(c.parent_id)) children.set(c.parent_id, []);
      children.get(c.parent_id).push(c);
    } else roots.push(c);
  }
  const node = (c) => {
    const kids = children.get(c.checkpoint_id) || [];
    const isHead = c.checkpoint_id === head;
    return h("li", { class: kids.length > 1 ? "forked" : undefined, dataset: { checkpoint: c.checkpoint_id } },
      h("button", {
        type: "button", class: "node-btn" + (isHead ? " head" : ""), "aria-pressed": String(c.checkpoint_id === selected),
        dataset: { id: c.checkpoint_id, ns: c.checkpoint_ns || "" }, onclick: () => onSelect(c),
        "aria-label": `Checkpoint ${c.checkpoint_id}` + (isHead ? ", head" : "") + (kids.length > 1 ? `, fork with ${kids.length} branches` : "") +
          (c.pending_writes && c.pending_writes.length ? `, ${c.pending_writes.length} pending writes` : ""),
      }, c.checkpoint_id),
      " ", isHead ? h("span", { class: "badge ok" }, "head") : null,
      kids.length > 1 ? [" ", h("span", { class: "badge fork" }, `fork: ${kids.length} branches`)] : null,
      c.pending_writes && c.pending_writes.length ? [" ", h("span", { class: "badge" }, `${c.pending_writes.length} pending write${c.pending_writes.length === 1 ? "" : "s"}`)] : null,
      kids.length > 1 ? h("ul", { role: "group", "aria-label": `Branches from ${c.checkpoint_id}` },
        kids.map((k, i) => h("li", { class: "branch" }, h("span", { class: "hint" }, `branch ${i + 1}`), chain(k)))) : null);
  };
  // A chain: c, its only child, that one's only child, ... in one list.
  const chain = (c) => {
    const items = [];
    for (let cur = c; cur;) {
      items.push(node(cur));
      const kids = children.get(cur.checkpoint_id) || [];
      cur = kids.length === 1 ? kids[0] : undefined;
    }
    return h("ul", {}, items);
  };
  const tree = h("ul", { class: "tree", "aria-label": "Checkpoint tree" }, roots.map((r) => h("li", {}, chain(r))));
  return tree;
}
