// The Morphz inspector's page: one script, no dependencies, every byte served by
// `morphz ui`. Views read the inspector's JSON API (services/ui/http_app.py); all data is
// put in the page as text nodes, never as markup.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const STATE_COLOURS = { active: "#3a9d5d", retiring: "#e0a030", retired: "#9a9a9a" };
const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = tag.startsWith("svg:")
    ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "on") for (const [ev, fn] of Object.entries(v)) node.addEventListener(ev, fn);
    // CSSOM, not a style attribute: the Content-Security-Policy allows no inline style.
    else if (k === "style") for (const [p, val] of Object.entries(v)) node.style.setProperty(p, val);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

// -- state and API ---------------------------------------------------------------------------
const ui = { view: "contexts", params: {} };

function context() { return $("context").value; }
function revision() { return $("revision").value || ""; }
function reveal() { return $("reveal").checked ? "1" : ""; }

async function api(view, params, body) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== "" && v !== undefined) q.set(k, v);
  const init = body === undefined ? {} : {
    method: "POST", body: JSON.stringify(body),
    headers: { "Content-Type": "application/json", "X-Morphz-UI": "1" } };
  const reply = await fetch(`/api/${view}?${q}`, { credentials: "same-origin", ...init });
  const data = await reply.json();
  if (!reply.ok) {
    if (reply.status === 401) location.href = "/login";
    const e = data.error || {};
    throw new Error(`${e.reason || reply.status}: ${e.message || ""}`);
  }
  return data;
}

function showError(err) {
  const box = $("error");
  box.hidden = !err;
  box.textContent = err ? String(err.message || err) : "";
}

function ctxParams(extra) {
  return { context: context(), revision: revision(), reveal: reveal(), ...extra };
}

// -- routing ----------------------------------------------------------------------------------
function parseHash() {
  const [path, query] = (location.hash.slice(2) || "contexts").split("?");
  ui.view = path || "contexts";
  ui.params = Object.fromEntries(new URLSearchParams(query || ""));
  if (ui.params.context && $("context").value !== ui.params.context) {
    if (![...$("context").options].some((o) => o.value === ui.params.context)) {
      $("context").append(el("option", { value: ui.params.context }, ui.params.context));
    }
    $("context").value = ui.params.context;
  }
  if (ui.params.revision !== undefined) $("revision").value = ui.params.revision;
}

function go(view, params) {
  const q = new URLSearchParams({ context: context(), ...(params || {}) });
  location.hash = `#/${view}?${q}`;
}

async function render() {
  parseHash();
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("current", a.dataset.view === ui.view
      || (a.dataset.view === "evaluations" && ["evaluation", "encdiff"].includes(ui.view)));
  }
  showError(null);
  const main = $("view");
  main.replaceChildren(el("p", { class: "loading" }, "loading…"));
  main.dataset.state = "loading";
  try {
    const view = VIEWS[ui.view] || VIEWS.contexts;
    await view(main);
    main.dataset.state = "ready";
  } catch (err) {
    main.replaceChildren();
    main.dataset.state = "error";
    showError(err);
  }
}

// -- contexts --------------------------------------------------------------------------------
async function contextsView(main) {
  const data = await api("contexts");
  const rows = data.contexts.map((c) => {
    const lag = el("td", { class: "lag" }, "…");
    const audit = el("td", { class: "audit" }, el("button", { on: { click: async () => {
      audit.textContent = "auditing…";
      try {
        const d = await api("context", { context: c.context, audit: "1" });
        audit.textContent = d.audit.match
          ? `match (${d.audit.events_replayed} events)` : `MISMATCH: ${d.audit.differences.join(", ") || d.audit.replay_error}`;
      } catch (err) { audit.textContent = String(err.message); }
    } } }, "audit"));
    api("context", { context: c.context }).then(
      (d) => { lag.textContent = d.index.error ? d.index.error.reason : String(d.index.lag); },
      (err) => { lag.textContent = String(err.message); });
    const fs = c.frames_by_state || {};
    return el("tr", { "data-context": c.context },
      el("td", {}, el("a", { href: `#/mind?context=${encodeURIComponent(c.context)}` }, c.context)),
      el("td", {}, c.revision), el("td", {}, c.tick),
      el("td", {}, `${fs.active || 0} active, ${fs.retiring || 0} retiring, ${fs.retired || 0} retired`),
      el("td", {}, c.events), el("td", {}, (c.sessions || []).join(", ")), lag, audit);
  });
  main.replaceChildren(el("h2", {}, "Contexts"), el("table", { id: "contexts" },
    el("thead", {}, el("tr", {}, ["context", "revision", "tick", "frames", "events",
      "sessions", "index lag", "audit"].map((h) => el("th", {}, h)))),
    el("tbody", {}, rows)));
}

// -- Mind graph ------------------------------------------------------------------------------
function layout(graph, focus) {
  // Rings by distance from the focus (or one ring when the whole Mind is drawn); raw
  // events sit on the ring outside their frames.
  const adj = new Map();
  const link = (a, b) => { (adj.get(a) || adj.set(a, new Set()).get(a)).add(b); };
  for (const e of graph.edges) { link(e.from, e.to); link(e.to, e.from); }
  const frames = graph.nodes.filter((n) => n.kind === "frame").map((n) => n.id);
  const events = graph.nodes.filter((n) => n.kind === "event").map((n) => n.ref);
  const depth = new Map();
  if (focus && frames.includes(focus)) {
    depth.set(focus, 0);
    const queue = [focus];
    while (queue.length) {
      const n = queue.shift();
      for (const m of adj.get(n) || []) {
        if (!depth.has(m) && frames.includes(m)) { depth.set(m, depth.get(n) + 1); queue.push(m); }
      }
    }
  }
  for (const f of frames) if (!depth.has(f)) depth.set(f, focus ? 1 : 1);
  const outer = Math.max(1, ...depth.values()) + 1;
  for (const r of events) depth.set(r, outer);
  const rings = new Map();
  for (const [id, d] of depth) (rings.get(d) || rings.set(d, []).get(d)).push(id);
  const pos = new Map();
  for (const [d, ids] of rings) {
    const radius = d === 0 ? 0 : 140 * d;
    ids.forEach((id, i) => {
      const a = (2 * Math.PI * i) / ids.length - Math.PI / 2 + d * 0.4;
      pos.set(id, [radius * Math.cos(a), radius * Math.sin(a)]);
    });
  }
  return { pos, size: 140 * outer + 90 };
}

function drawGraph(graph, focus, onPick) {
  const { pos, size } = layout(graph, focus);
  const svg = el("svg:svg", { id: "graph", viewBox: `${-size} ${-size} ${2 * size} ${2 * size}`,
    width: 760, height: 760, role: "img", "aria-label": "Mind graph" });
  svg.append(el("svg:defs", {}, el("svg:marker", { id: "arrow", viewBox: "0 0 10 10", refX: 28,
    refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
  el("svg:path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#555" }))));
  for (const e of graph.edges) {
    const a = pos.get(e.from); const b = pos.get(e.to);
    if (!a || !b) continue;
    svg.append(el("svg:g", { class: `edge ${e.kind}`, "data-from": e.from, "data-to": e.to,
      "data-name": e.name },
    el("svg:line", { x1: a[0], y1: a[1], x2: b[0], y2: b[1], "marker-end": "url(#arrow)" }),
    el("svg:text", { x: (a[0] + b[0]) / 2, y: (a[1] + b[1]) / 2 - 4, class: "edge-label" }, e.name)));
  }
  for (const n of graph.nodes) {
    const id = n.kind === "frame" ? n.id : n.ref;
    const [x, y] = pos.get(id) || [0, 0];
    const label = n.kind === "frame"
      ? (n.state === "retiring" ? `${n.id} (due t${n.due_tick})` : n.id) : `${n.ref} ${n.event_kind}`;
    const shape = n.kind === "frame"
      ? el("svg:circle", { r: 18, cx: x, cy: y, fill: STATE_COLOURS[n.state] || "#ccc",
        class: n.protected ? "protected" : "" })
      : el("svg:rect", { x: x - 9, y: y - 9, width: 18, height: 18, fill: "#dde6f5" });
    svg.append(el("svg:g", { class: `node ${n.kind} ${n.state}${id === focus ? " focus" : ""}`,
      "data-id": id, "data-state": n.state, tabindex: 0, on: { click: () => onPick(n) } },
    el("svg:title", {}, n.kind === "frame" ? `${n.id}: ${n.state}` : `${n.ref}: ${n.preview}`),
    shape, el("svg:text", { x, y: y + 32, class: "node-label" }, label)));
  }
  return svg;
}

async function frameDetail(box, id) {
  box.replaceChildren(el("p", {}, `loading ${id}…`));
  const d = await api("frame", ctxParams({ id }));
  const f = d.frame;
  const asOf = (r) => el("a", { href: "#", class: "as-of", on: { click: (ev) => {
    ev.preventDefault(); go("mind", { revision: r, focus: id });
  } } }, `view as of revision ${r}`);
  box.replaceChildren(
    el("h3", {}, f.id),
    el("p", {}, `state ${f.state}${f.state === "retiring" ? ` (due tick ${f.due_tick})` : ""}`
      + `, frame revision ${f.revision}, changed at revision ${f.changed_at}`
      + `${f.protected ? ", protected" : ""}${f.secret ? ", holds secrets" : ""}`),
    el("h4", {}, "body"), el("pre", { class: "body" }, f.body),
    el("h4", {}, "sources"),
    el("ul", { class: "sources" }, d.sources.length ? d.sources.map((s) => el("li", { "data-ref": s.ref },
      s.event_kind ? `${s.ref} ${s.event_kind} (${s.state}${s.secret ? ", secret" : ""}): ${s.preview}${s.truncated ? "…" : ""}`
        : `frame ${s.ref}`)) : el("li", {}, "none")),
    el("h4", {}, "relations"),
    el("ul", { class: "relations" }, d.relations.length ? d.relations.map((r) => el("li", {},
      `${r.subject} ${r.name} ${r.object}`)) : el("li", {}, "none")),
    el("h4", {}, "revisions"),
    el("ul", { class: "revisions" }, d.revisions.map((r) => el("li", { "data-revision": r.revision },
      `frame revision ${r.revision} (context revision ${r.changed_at}, ${r.state}): `,
      el("code", {}, r.body), " ", asOf(r.changed_at)))),
    el("h4", {}, "last transaction"),
    d.last_transaction
      ? el("p", { class: "last-tx" }, `${d.last_transaction.ref}: revision ${d.last_transaction.revision}`
        + `, ${d.last_transaction.ops} ops${d.last_transaction.reason ? `, reason "${d.last_transaction.reason}"` : ""}`
        + ` (session ${d.last_transaction.session}${d.last_transaction.activation ? `, ${d.last_transaction.activation}` : ""})`)
      : el("p", {}, "none"));
}

async function mindView(main) {
  const p = ui.params;
  const data = await api("mind", ctxParams({ focus: p.focus || "", depth: p.depth || "",
    page: p.page || "", find: p.find || "" }));
  const detail = el("aside", { id: "detail" }, el("p", {}, "click a node"));
  const pick = (n) => {
    if (n.kind === "frame") frameDetail(detail, n.id).catch(showError);
    else detail.replaceChildren(el("h3", {}, n.ref), el("p", {},
      `${n.event_kind}, session ${n.session}, ${n.actor}, ${n.state}${n.secret ? ", secret" : ""}, ${n.time}`),
    el("pre", { class: "body" }, n.preview + (n.truncated ? "…" : "")));
  };
  const nav = (params) => go("mind", { revision: revision(), focus: p.focus || "",
    find: p.find || "", ...params });
  const find = el("input", { id: "find", placeholder: "find frame id", value: p.find || "" });
  const list = el("div", { id: "frame-list" },
    el("form", { on: { submit: (ev) => { ev.preventDefault(); nav({ find: find.value, page: 0 }); } } }, find),
    el("p", {}, `${data.listed_total} of ${data.frames_total} frames, page ${data.page + 1} of ${data.pages}`),
    el("ol", { start: data.page * 100 + 1 }, data.page_frames.map((f) => el("li", {},
      el("a", { href: "#", class: `state-${f.state}`, "data-id": f.id, on: { click: (ev) => {
        ev.preventDefault(); nav({ focus: f.id });
      } } }, f.id)))),
    el("button", { disabled: data.page === 0, on: { click: () => nav({ page: data.page - 1 }) } }, "previous"),
    el("button", { disabled: data.page + 1 >= data.pages, on: { click: () => nav({ page: data.page + 1 }) } }, "next"));
  const head = el("p", { id: "mind-head" },
    `revision ${data.revision} of ${data.current_revision}; `,
    data.focus ? `neighbourhood of ${data.focus}, depth ${data.depth}` : "the whole Mind",
    ` (${data.graph.nodes.length} nodes, ${data.graph.edges.length} edges)`,
    data.exact_relations ? "" : " — relations approximate (a later commit could not be rewound)");
  const legend = el("p", { class: "legend" }, Object.entries(STATE_COLOURS).map(([s, c]) =>
    el("span", { style: { "--c": c }, class: "swatch" }, s)), el("span", { class: "swatch protected" }, "protected"),
  " — solid arrows: relations; dashed: sources; squares: raw events");
  main.replaceChildren(el("h2", {}, `Mind of ${data.context}`), head, legend,
    el("div", { class: "mind" }, list, el("div", { class: "canvas" }, drawGraph(data.graph, data.focus, pick)), detail));
  if (p.focus) pick({ kind: "frame", id: p.focus });
}

// -- timeline --------------------------------------------------------------------------------
function receipt(tx) {
  return el("div", { class: "receipt" },
    el("div", {}, `revision ${tx.revision}${tx.reason ? ` — reason "${tx.reason}"` : ""}`),
    el("ul", {}, tx.results.map((r) => el("li", {},
      `#${r.index} ${r.op} ${r.target} -> ${r.outcome}${r.frame_revision ? ` (frame revision ${r.frame_revision})` : ""}`)),
    tx.more_ops ? el("li", {}, `… ${tx.more_ops} more ops`) : null));
}

async function timelineView(main) {
  const page = Number(ui.params.page || 0);
  const data = await api("timeline", { context: context(), reveal: reveal(), page, revision: revision() });
  const rows = data.events.map((e) => el("tr", { "data-ref": e.ref, class: `kind-${e.event_kind}` },
    el("td", {}, e.ref), el("td", {}, e.time), el("td", {}, e.event_kind), el("td", {}, e.session),
    el("td", {}, e.actor), el("td", {}, e.state + (e.secret ? " (secret)" : "")),
    el("td", {}, e.transaction ? receipt(e.transaction) : `${e.preview}${e.truncated ? "…" : ""}`)));
  const pager = el("p", {},
    el("button", { disabled: page === 0, on: { click: () => go("timeline", { page: page - 1 }) } }, "previous"),
    ` page ${page + 1} of ${data.pages} `,
    el("button", { disabled: page + 1 >= data.pages, on: { click: () => go("timeline", { page: page + 1 }) } }, "next"));
  const q = el("input", { id: "search-q", placeholder: "recall search", size: 30 });
  const mode = el("select", { id: "search-mode" }, ["hybrid", "lexical", "vector"].map((m) => el("option", { value: m }, m)));
  const since = el("input", { id: "search-since", placeholder: "since (ISO 8601 with offset)", size: 24 });
  const until = el("input", { id: "search-until", placeholder: "until", size: 24 });
  const results = el("div", { id: "search-results" });
  const search = el("form", { id: "search", on: { submit: async (ev) => {
    ev.preventDefault();
    results.replaceChildren(el("p", {}, "searching…"));
    try {
      const d = await api("search", { context: context(), q: q.value, mode: mode.value,
        since: since.value, until: until.value });
      results.replaceChildren(d.hits.length ? el("table", {}, el("tbody", {}, d.hits.map((h) =>
        el("tr", { "data-id": h.ref || h.id }, el("td", {}, h.ref || h.id), el("td", {}, h.kind),
          el("td", {}, h.event_kind), el("td", {}, h.state), el("td", {}, h.time),
          el("td", {}, h.preview), el("td", {}, Number(h.score).toFixed(3)),
          el("td", {}, `lexical #${h.lexical_rank} vector #${h.vector_rank}`)))))
        : el("p", {}, `nothing found (${d.empty})`));
    } catch (err) { results.replaceChildren(el("p", { class: "error" }, err.message)); }
  } } }, q, mode, since, until, el("button", { type: "submit" }, "search"));
  main.replaceChildren(el("h2", {}, `Timeline of ${context()}`),
    data.revision ? el("p", { id: "timeline-head" }, `the history up to revision ${data.revision} (its next commit excluded)`) : "",
    search, results, pager,
    el("table", { id: "timeline" }, el("thead", {}, el("tr", {}, ["ref", "time", "kind", "session",
      "actor", "state", "preview / transaction"].map((h) => el("th", {}, h)))), el("tbody", {}, rows)));
}

// -- encoding --------------------------------------------------------------------------------
function bar(used, limit, cls) {
  const pct = limit ? Math.min(100, (100 * used) / limit) : 0;
  return el("span", { class: `bar ${cls || ""}` }, el("span", { style: { width: `${pct.toFixed(1)}%` } }));
}

function showEncoding(box, d) {
  const total = d.regions.reduce((s, r) => s + r.bytes, 0) || 1;
  const pr = d.pressure || {};
  const previews = d.items.filter((i) => i.residency === "preview");
  box.replaceChildren(
    el("p", {}, `snapshot ${d.snapshot}, revision ${d.revision}, tick ${d.tick}, activation `
      + `${(d.activation || {}).id || ""}, ${d.bytes} bytes`
      + (d.replay ? ` — replay ${d.replay.match ? "matches" : "DIFFERS"} (${d.replay.hash})` : "")),
    el("p", { id: "pressure" }, `budget: ${pr.used_bytes} of ${pr.limit_bytes} bytes (${pr.level}, `
      + `${pr.permille}‰)`, bar(pr.used_bytes, pr.limit_bytes, `level-${pr.level}`)),
    el("ol", { id: "regions" }, d.regions.map((r) => el("li", { class: "region", "data-name": r.name },
      el("span", { class: "region-name" }, r.name), ` ${r.bytes} bytes`,
      r.previews ? el("span", { class: "preview-mark" }, ` ${r.previews} preview(s)`) : "",
      bar(r.bytes, total), el("details", {}, el("summary", {}, "text"), el("pre", {}, r.text))))),
    previews.length ? el("div", { id: "previews" }, el("h4", {}, "previews (not the whole observation)"),
      el("ul", {}, previews.map((i) => el("li", { class: "preview-mark" },
        `${i.key}: preview, ${i.shown_bytes} of ${i.total_bytes} bytes shown`)))) : "");
}

async function encodingView(main) {
  const out = el("div", { id: "encoding" });
  const snap = el("input", { id: "snapshot", placeholder: "enc-…", size: 28, value: ui.params.snapshot || "" });
  const act = el("input", { id: "activation", placeholder: "a1", size: 6, value: ui.params.activation || "" });
  const session = el("input", { id: "session", placeholder: "session", size: 10, value: ui.params.session || "main" });
  const load = async (fn) => {
    out.replaceChildren(el("p", {}, "working…"));
    try { showEncoding(out, await fn()); } catch (err) { out.replaceChildren(el("p", { class: "error" }, err.message)); }
  };
  const replay = () => api("encoding", { context: context(), snapshot: snap.value, reveal: reveal() });
  const run = (fn) => (ev) => { ev.preventDefault(); load(fn); };
  main.replaceChildren(el("h2", {}, `Encoding of ${context()}`),
    el("form", { id: "replay", on: { submit: run(replay) } },
      "replay snapshot ", snap, el("button", { type: "submit" }, "replay")),
    el("form", { id: "compile", on: { submit: run(() => api("compile", {}, { context: context(),
      activation: act.value, session: session.value })) } },
    "or compile again for activation ", act, " of session ", session,
    el("button", { type: "submit" }, "compile"),
    el("small", {}, " (claims no input; records a snapshot, changes no frame)")), out);
  if (!act.value) {
    api("activations", { context: context() }).then((d) => { if (!act.value) act.value = d.latest; },
      () => {});
  }
  if (ui.params.snapshot) await load(replay);
}

// -- diff ------------------------------------------------------------------------------------
async function diffView(main) {
  const p = ui.params;
  const from = el("input", { id: "diff-from", type: "number", min: 1, size: 5, value: p.from || "1" });
  const to = el("input", { id: "diff-to", type: "number", min: 1, size: 5, value: p.to || "2" });
  const form = el("form", { on: { submit: (ev) => { ev.preventDefault(); go("diff", { from: from.value, to: to.value }); } } },
    "from revision ", from, " to ", to, el("button", { type: "submit" }, "diff"));
  main.replaceChildren(el("h2", {}, `Diff of ${context()}`), form);
  if (!p.from || !p.to) return;
  const d = await api("diff", { context: context(), from: p.from, to: p.to, reveal: reveal() });
  const section = (id, title, items, render) => el("section", { id }, el("h3", {}, `${title} (${items.length})`),
    el("ul", {}, items.map(render)));
  main.append(el("div", { id: "diff" },
    section("diff-created", "created", d.created, (f) => el("li", { "data-id": f.id }, `${f.id}: `, el("code", {}, f.body))),
    section("diff-revised", "revised", d.revised, (f) => el("li", { "data-id": f.id },
      `${f.id}: frame revision ${f.from_revision} -> ${f.to_revision}`,
      el("div", { class: "body-diff" }, f.body_diff.map((l) => el("div", { class: `diff-${l.op}` },
        `${l.op === "added" ? "+ " : l.op === "removed" ? "- " : "  "}${l.text}`))))),
    section("diff-retired", "retired", d.retired, (f) => el("li", { "data-id": f.id },
      `${f.id}: ${f.state}${f.due_tick ? ` (due tick ${f.due_tick})` : ""}`)),
    section("diff-restored", "restored", d.restored, (f) => el("li", { "data-id": f.id }, f.id)),
    section("diff-related", "relations added", d.relations_added, (r) => el("li", {}, `${r.subject} ${r.name} ${r.object}`)),
    section("diff-unrelated", "relations removed", d.relations_removed, (r) => el("li", {}, `${r.subject} ${r.name} ${r.object}`)),
    section("diff-transactions", "transactions", d.transactions, (t) => el("li", {},
      `${t.ref}: revision ${t.revision}, ${t.ops} ops${t.reason ? `, reason "${t.reason}"` : ""}`))));
}

// evaluationsView, evaluationView and encodingDiffView are steps.js's (loaded first).
const VIEWS = { contexts: contextsView, mind: mindView, timeline: timelineView,
  encoding: encodingView, diff: diffView, evaluations: evaluationsView,
  evaluation: evaluationView, encdiff: encodingDiffView };

// -- start -----------------------------------------------------------------------------------
async function header() {
  // The banner and the context list load beside the first view, not before it.
  try {
    const [who, list] = await Promise.all([api("whoami"), api("contexts")]);
    $("banner").textContent = who.banner;
    $("banner").dataset.mode = who.mode;
    const chosen = context();
    $("context").replaceChildren(...list.contexts.map((c) => el("option", { value: c.context }, c.context)));
    if (chosen && ![...$("context").options].some((o) => o.value === chosen)) {
      $("context").append(el("option", { value: chosen }, chosen));
    }
    if (chosen) $("context").value = chosen;
  } catch (err) { showError(err); }
}

async function start() {
  for (const id of ["context", "revision", "reveal"]) {
    $(id).addEventListener("change", () => {
      const params = { ...ui.params, context: context(), revision: revision() };
      if (id === "context") { delete params.focus; delete params.snapshot; }
      location.hash = `#/${ui.view}?${new URLSearchParams(params)}`;
      if (id === "reveal") render();
    });
  }
  window.addEventListener("hashchange", render);
  parseHash();
  if (ui.params.context) await Promise.all([header(), render()]);
  else { await header(); await render(); }  // the first context is the default
}

start();
