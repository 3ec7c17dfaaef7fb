// The inspector's evaluation pages (UI-03): a session's evaluations, one evaluation as a
// step (what the model saw by region, its recall calls, its transactions' receipts, the
// Mind's change), previous / next step, and the diff of two encodings by region.
// Loaded before app.js, whose helpers (el, api, go, context, reveal) these call and
// whose VIEWS table names them. Keys: j / ArrowDown and k / ArrowUp move through a list,
// Enter opens a row; n / ArrowRight and p / ArrowLeft go to the next and previous step;
// d diffs a step's encoding with the previous step's; u goes up to the list.
"use strict";

function changeText(c) {
  return `${c.change} ${c.kind} ${c.key}${c.frame_revision ? ` (frame revision ${c.frame_revision})` : ""}`
    + (c.revision ? ` at r${c.revision}` : " (by the clock)");
}

// -- the list of a session's evaluations ----------------------------------------------
async function evaluationsView(main) {
  const p = ui.params;
  const d = await api("evaluations", { context: context(), session: p.session || "", cursor: p.cursor || "" });
  const open = (a) => go("evaluation", { activation: a, session: d.session });
  const pick = el("select", { id: "eval-session", on: { change: (ev) => go("evaluations", { session: ev.target.value }) } },
    d.sessions.map((s) => el("option", { value: s, selected: s === d.session }, s)));
  const rows = d.rows.map((r, i) => el("tr", { class: `eval-row level-${r.level}`, "data-activation": r.activation,
    "data-index": i, tabindex: 0, on: { click: () => open(r.activation), keydown: (ev) => { if (ev.key === "Enter") open(r.activation); } } },
  el("td", {}, el("a", { href: `#/evaluation?${new URLSearchParams({ context: context(), activation: r.activation })}` }, r.activation)),
  el("td", {}, r.time),
  el("td", { class: "eval-inputs" }, r.inputs.map((x) => el("div", {}, `${x.ref} ${x.kind}: ${x.preview}`))),
  el("td", { class: "eval-pressure" }, `${r.bytes} of ${r.limit_bytes} B, ${r.level}`, bar(r.bytes, r.limit_bytes, `level-${r.level}`)),
  el("td", { class: "eval-changes" }, r.changes.length ? r.changes.map((c) => el("div", {}, c)) : "no change",
    r.more_changes ? el("div", {}, `… ${r.more_changes} more`) : "",
    r.recalls ? el("div", { class: "eval-recalls" }, `${r.recalls} recall call(s)`) : "")));
  main.replaceChildren(el("h2", {}, `Evaluations of ${context()}`),
    el("p", {}, "session ", pick, " — newest first; ", el("kbd", {}, "j"), "/", el("kbd", {}, "k"), " move, ",
      el("kbd", {}, "Enter"), " opens a step"),
    el("table", { id: "evaluations" }, el("thead", {}, el("tr", {}, ["activation", "time", "inputs",
      "budget and pressure", "what changed"].map((h) => el("th", {}, h)))), el("tbody", {}, rows)),
    el("p", {}, p.cursor ? el("button", { id: "eval-first", on: { click: () => go("evaluations", { session: d.session }) } }, "newest") : "",
      d.next_cursor ? el("button", { id: "eval-older", on: { click: () => go("evaluations", { session: d.session, cursor: d.next_cursor }) } }, "older") : ""));
  if (!rows.length) main.append(el("p", { id: "eval-none" }, "no evaluation was compiled in this session"));
  else select(rows, 0);
}

function select(rows, i) {
  rows.forEach((r, j) => r.setAttribute("aria-selected", String(i === j)));
  rows[i].focus();
}

// -- one evaluation as a step -----------------------------------------------------------
function regionList(enc) {
  if (!enc) return el("p", { id: "step-encoding" }, "no snapshot was compiled for this evaluation");
  if (enc.withheld) {
    return el("p", { id: "step-encoding", class: "withheld" },
      `snapshot ${enc.snapshot} was compiled revealing secrets: ask to reveal them to see its text`);
  }
  const total = enc.regions.reduce((s, r) => s + r.bytes, 0) || 1;
  return el("div", { id: "step-encoding" },
    el("p", { id: "step-hash", "data-match": String(enc.match) }, `snapshot ${enc.snapshot} `, el("code", {}, enc.hash),
      enc.match ? " — replay gives the same bytes" : ` — replay DIFFERS (${enc.replay_hash})`),
    el("ol", { id: "step-regions" }, enc.regions.map((r) => el("li", { class: "region", "data-name": r.name },
      el("span", { class: "region-name" }, r.name), ` ${r.bytes} bytes, ${r.items.length} item(s)`,
      r.previews ? el("span", { class: "preview-mark" }, ` ${r.previews} preview(s)`) : "", bar(r.bytes, total),
      r.items.filter((i) => i.residency === "preview").map((i) => el("div", { class: "preview-mark", "data-key": i.key },
        `${i.key}: preview, ${i.shown_bytes} of ${i.total_bytes} bytes shown`)),
      el("details", {}, el("summary", {}, "text"), el("pre", { class: "region-text" }, r.text))))));
}

function stepSection(id, title, items, render) {
  return el("section", { id }, el("h3", {}, `${title} (${items.length})`),
    items.length ? el("ul", {}, items.map(render)) : el("p", {}, "none"));
}

async function evaluationView(main) {
  const p = ui.params;
  const d = await api("evaluation", { context: context(), activation: p.activation || "", snapshot: p.snapshot || "", reveal: reveal() });
  const step = (a) => a && go("evaluation", { activation: a });
  const snaps = d.snapshots;
  const prevSnap = d.previous ? `previous step ${d.previous}` : "no previous step";
  main.replaceChildren(
    el("h2", {}, `Evaluation ${d.activation} of session ${d.session}`),
    el("p", { id: "step-nav" },
      el("button", { id: "step-prev", disabled: !d.previous, on: { click: () => step(d.previous) } }, `← previous ${d.previous || ""}`),
      el("button", { id: "step-up", on: { click: () => go("evaluations", { session: d.session }) } }, "all evaluations"),
      el("button", { id: "step-next", disabled: !d.next, on: { click: () => step(d.next) } }, `next ${d.next || ""} →`),
      el("button", { id: "step-diff", disabled: !d.previous || !snaps.length, title: prevSnap,
        on: { click: () => diffWithPrevious(d) } }, "diff encoding with previous step"),
      el("small", {}, " keys: p / n, d, u")),
    el("p", { id: "step-head" }, `tick ${d.tick}${d.tick_advanced ? " (advanced)" : ""}, `
      + `${d.delivered ? "delivered" : "open"}, claimed at ${d.time || "?"} (${d.activation_ref || "?"})`
      + (d.delivery_ref ? `, delivered ${d.delivery_ref}` : "")
      + (d.complete ? "" : ` — history read up to @e${d.scanned_to} only`)),
    stepSection("step-inputs", "claimed inputs", d.inputs, (x) => el("li", { "data-ref": x.ref },
      `${x.ref} ${x.kind} (${x.session}${x.secret ? ", secret" : ""}): `, el("span", { class: "input-text" }, x.preview),
      x.chars > x.preview.length ? "…" : "")),
    stepSection("step-snapshots", "snapshots", snaps, (s) => el("li", { "data-snapshot": s.snapshot },
      el("a", { href: `#/evaluation?${new URLSearchParams({ context: context(), activation: d.activation, snapshot: s.snapshot })}` }, s.snapshot),
      ` ${s.time}, ${s.bytes} of ${s.limit_bytes} B (${s.level}), revision ${s.revision}`)),
    el("section", {}, el("h3", {}, "what the model saw, by region"), regionList(d.encoding)),
    stepSection("step-recalls", "recall calls", d.recalls, (c) => el("li", { "data-ref": c.ref },
      `${c.ref} ${c.op} "${c.query}": ${c.hit_count} found `, el("code", {}, c.hits.join(" ")))),
    stepSection("step-actions", "actions", d.actions, (a) => el("li", { "data-ref": a.ref },
      `${a.ref}: ${a.preview} -> ${a.result || "no result yet"}`)),
    stepSection("step-transactions", "transactions", d.transactions, (t) => el("li", { "data-ref": t.ref, class: "receipt" },
      `${t.ref}: revision ${t.revision || "?"} from base ${t.base_version}${t.rebased ? " (rebased)" : ""}`
        + `${t.reason ? ` — reason "${t.reason}"` : ""}`,
      el("ul", {}, t.results.map((r) => el("li", {}, `${r.op} ${r.target} -> ${r.outcome || "?"}`
        + (r.frame_revision ? ` (frame revision ${r.frame_revision})` : "")))))),
    el("section", { id: "step-mind" }, el("h3", {}, `Mind: revision ${d.mind.from_revision} -> ${d.mind.to_revision}`),
      d.mind.changes.length ? el("ul", {}, d.mind.changes.map((c) => el("li", { "data-key": c.key, "data-change": c.change }, changeText(c))))
        : el("p", {}, "no change"),
      d.bodies.map((b) => el("div", { class: "body-diff", "data-frame": b.frame }, el("strong", {}, `${b.frame} at r${b.revision}`),
        body_lines(b.before || "", b.after || "")))));
}

function body_lines(before, after) {
  const a = splitItems(before); const b = splitItems(after);
  return [...a.filter((x) => !b.includes(x)).map((x) => el("div", { class: "diff-removed" }, `- ${x}`)),
    ...b.filter((x) => !a.includes(x)).map((x) => el("div", { class: "diff-added" }, `+ ${x}`))];
}

function splitItems(body) {
  // A canonical body's top-level forms, e.g. "(goal x) (stage y)" -> ["(goal x)", "(stage y)"].
  const out = []; let depth = 0; let start = 0; let quoted = false;
  for (let i = 0; i < body.length; i++) {
    const ch = body[i];
    if (quoted) { quoted = ch !== "\"" || body[i - 1] === "\\"; } else if (ch === "\"") quoted = true;
    else if (ch === "(") { if (depth++ === 0) start = i; } else if (ch === ")" && --depth === 0) out.push(body.slice(start, i + 1));
  }
  return out.length ? out : (body ? [body] : []);
}

async function diffWithPrevious(d) {
  const prev = await api("evaluation", { context: context(), activation: d.previous, reveal: reveal() });
  const from = prev.snapshots.length ? prev.snapshots[prev.snapshots.length - 1].snapshot : "";
  const to = d.encoding ? d.encoding.snapshot : "";
  if (from && to) go("encdiff", { from, to });
}

// -- two encodings, region by region -----------------------------------------------------
async function encodingDiffView(main) {
  const p = ui.params;
  const from = el("input", { id: "encdiff-from", placeholder: "enc-… (older)", size: 28, value: p.from || "" });
  const to = el("input", { id: "encdiff-to", placeholder: "enc-… (newer)", size: 28, value: p.to || "" });
  main.replaceChildren(el("h2", {}, `Encoding diff in ${context()}`),
    el("form", { on: { submit: (ev) => { ev.preventDefault(); go("encdiff", { from: from.value, to: to.value }); } } },
      "from ", from, " to ", to, el("button", { type: "submit" }, "diff")));
  if (!p.from || !p.to) return;
  const d = await api("encoding_diff", { context: context(), from: p.from, to: p.to, reveal: reveal() });
  main.append(el("p", { id: "encdiff-head" }, `${d.changed.length} region(s) changed: ${d.changed.join(", ") || "none"}`),
    el("table", { id: "encdiff" }, el("thead", {}, el("tr", {}, ["region", "status", "bytes", "items"].map((h) => el("th", {}, h)))),
      el("tbody", {}, d.regions.map((r) => el("tr", { class: `region-${r.status}`, "data-name": r.name, "data-status": r.status },
        el("td", {}, r.name), el("td", {}, r.status), el("td", {}, `${r.from_bytes} -> ${r.to_bytes}`),
        el("td", {}, [...r.added.map((k) => el("div", { class: "diff-added" }, `+ ${k}`)),
          ...r.removed.map((k) => el("div", { class: "diff-removed" }, `- ${k}`)),
          ...r.changed.map((k) => el("div", { class: "diff-changed" }, `~ ${k}`))]))))));
}

// -- keys ---------------------------------------------------------------------------------
function stepKeys(ev) {
  if (ev.altKey || ev.ctrlKey || ev.metaKey || /^(INPUT|SELECT|TEXTAREA)$/.test(ev.target.tagName)) return;
  if (ui.view === "evaluation") {
    const click = { n: "step-next", ArrowRight: "step-next", p: "step-prev", ArrowLeft: "step-prev",
      d: "step-diff", u: "step-up" }[ev.key];
    const button = click && document.getElementById(click);
    if (button && !button.disabled) { ev.preventDefault(); button.click(); }
  } else if (ui.view === "evaluations") {
    const rows = [...document.querySelectorAll("#evaluations tr.eval-row")];
    if (!rows.length) return;
    const at = Math.max(0, rows.findIndex((r) => r.getAttribute("aria-selected") === "true"));
    const move = { j: 1, ArrowDown: 1, k: -1, ArrowUp: -1 }[ev.key];
    if (move) { ev.preventDefault(); select(rows, Math.min(rows.length - 1, Math.max(0, at + move))); }
    else if (ev.key === "Enter" && ev.target === document.body) { ev.preventDefault(); rows[at].click(); }
  }
}

document.addEventListener("keydown", stepKeys);
