"""The UI extension (UI-*): the implementation's web inspector, reached over plain HTTP
(`run --inspector-url`, with `--inspector-token-file` and, for the authorization half,
`--inspector-second-token-file`). The cases read its page, its assets and its JSON views,
named as Morphz's inspector names them (an implementation claiming the extension serves
them so): GET /api/contexts; /api/mind, /api/frame (id), /api/timeline, /api/diff (from,
to), /api/encoding (snapshot) and /api/search (q, mode), each with `context` and, where
a revision applies, `revision`; for UI-03, /api/evaluations (session: a session's
evaluations, newest first, `rows`) and /api/evaluation (activation: one step)."""
from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit

from morphz_conformance.driver import Evaluation
from morphz_conformance.registry import CaseFailed, CaseRun, case

# XML namespace names are identifiers a script uses, never fetched.
NAMESPACES = ("http://www.w3.org/",)
_REFERENCE = re.compile(r"""\b(?:src|href|action)\s*=\s*["']([^"']*)["']""", re.I)
_ABSOLUTE = re.compile(r"""https?://([^/\s"'`)<>]+)[^\s"'`)<>]*""", re.I)


def _ok(t: CaseRun, reply, what: str):
    t.eq(reply.status, 200, f"{what} ({reply.url}): HTTP status")
    if "json" in reply.headers.get("content-type", ""):
        try:
            return reply.json()
        except ValueError:
            raise CaseFailed(f"{what}: not JSON: {reply.text[:200]!r}") from None
    return reply


def _outside(base: str, text: str) -> list[str]:
    """Absolute http(s) URLs in `text` that point anywhere but the inspector itself."""
    own = urlsplit(base).netloc
    return [m.group(0) for m in _ABSOLUTE.finditer(text)
            if not m.group(0).startswith(NAMESPACES) and m.group(1) != own]


@case("UI-01", "the inspector shows only what its principal may read; secrets as their "
      "marker; every asset and datum from the inspector itself", needs=("inspector",))
def ui_01_principal_secrets_and_own_assets(t: CaseRun):
    d, ctx = t.driver, t.context()
    ui = d.inspector()
    secret = t.secret("sk-live-PLANTED-ui-7d2e41 deploy key")
    frame_secret = t.secret("PLANTED-ui-frame-0c9b55")
    ev = d.append(ctx, "s1", "user-message", secret, secret=True)
    t.tx(ctx, f'(create vault (url "https://deploy.example") (token (secret "{frame_secret}")))')
    page = _ok(t, ui.get("/"), "the inspector's page")
    replies = [page]
    refs = [r for r in _REFERENCE.findall(page.text) if r and not r.startswith("#")]
    t.check(refs, "the page references no script or stylesheet")
    for ref in refs:
        url = urljoin(ui.url + "/", ref)
        t.check(urlsplit(url).netloc == urlsplit(ui.url).netloc,
                f"the page loads {ref!r} from outside the inspector")
        asset = ui.get(urlsplit(url).path)
        t.eq(asset.status, 200, f"the page's asset {ref}")
        replies.append(asset)
    for reply in replies:
        if reply.headers.get("content-type", "").startswith(("text/html", "text/javascript",
                                                             "application/javascript",
                                                             "text/css")):
            t.eq(_outside(ui.url, reply.text), [], f"URLs outside the inspector in {reply.url}")
    listing = _ok(t, ui.get("/api/contexts"), "contexts")
    t.check(ctx in {c.get("context") for c in listing.get("contexts", [])},
            f"{ctx} is not listed for its creator")
    views = {"mind": ui.get("/api/mind", context=ctx),
             "frame": ui.get("/api/frame", context=ctx, id="vault"),
             "timeline": ui.get("/api/timeline", context=ctx),
             "search": ui.get("/api/search", context=ctx, q="deploy key", mode="lexical")}
    for name, reply in views.items():
        _ok(t, reply, name)
        replies.append(reply)
    t.check(f"[secret {ev.ref}]" in views["timeline"].text,
            f"the timeline does not show {ev.ref} as its marker [secret {ev.ref}]")
    t.check("[secret" in views["frame"].json()["frame"]["body"],
            "the vault frame's secret part is not shown as a marker")
    if "principals" in d.capabilities():
        other = d.inspector("other")
        listed = _ok(t, other.get("/api/contexts"), "contexts, as a principal without grants")
        t.check(ctx not in {c.get("context") for c in listed.get("contexts", [])},
                f"{ctx} is listed for a principal without grants")
        for name in ("mind", "timeline"):
            refused = other.get(f"/api/{name}", context=ctx)
            t.check(refused.status in (403, 404),
                    f"{name} as a principal without grants: HTTP {refused.status}")
            replies.append(refused)
        anonymous = d.inspector("anonymous").get("/api/mind", context=ctx)
        t.eq(anonymous.status, 401, "the Mind view without an inspector token: HTTP status")
        replies.append(anonymous)
    for reply in replies:
        for planted in (secret, frame_secret):
            t.check(planted not in reply.text, f"a planted secret in {reply.url}")


@case("UI-02", "the Mind graph, timeline, encoding and diff views show a context's state at "
      "a chosen revision", needs=("inspector",))
def ui_02_views_at_a_chosen_revision(t: CaseRun):
    d, ctx = t.driver, t.context()
    ui = d.inspector()
    d.append(ctx, "s1", "user-message", "Ship v1 once the regression tests pass.")
    a1 = d.activate(ctx, "s1")
    r1 = t.tx(ctx, "(create release (goal ship-v1) (stage waiting-tests))", session="s1",
              activation=a1.id)
    report = d.append(ctx, "s1", "tool-result", "regression suite: 120 passed, 0 failed")
    a2 = d.activate(ctx, "s1")
    r2 = t.tx(ctx, f"(derive test-result (from {report.ref}) (tests passed)) "
              "(revise release (goal ship-v1) (stage packaging)) "
              f"(relate test-result supports release) (retire {report.ref})",
              reason="test results absorbed", session="s1", activation=a2.id)
    enc = d.encoding(ctx, "s1", activation=a2.id)

    def frames(mind: dict) -> dict:
        return {n["id"]: n for n in mind["graph"]["nodes"] if n.get("kind") == "frame"}

    first = _ok(t, ui.get("/api/mind", context=ctx, revision=r1.revision), "the Mind at r1")
    t.eq(sorted(frames(first)), ["release"], "frames drawn at revision 1")
    t.eq(frames(first)["release"]["body"], "(goal ship-v1) (stage waiting-tests)",
         "release's body at revision 1")
    second = _ok(t, ui.get("/api/mind", context=ctx, revision=r2.revision), "the Mind at r2")
    t.eq(sorted(frames(second)), ["release", "test-result"], "frames drawn at revision 2")
    edges = {(e["from"], e["name"], e["to"]) for e in second["graph"]["edges"]}
    for edge in (("test-result", "supports", "release"), ("test-result", "source", report.ref)):
        t.check(edge in edges, f"the edge {edge} is not drawn at revision 2: {sorted(edges)}")
    t.check(report.ref in {n.get("ref") for n in second["graph"]["nodes"]},
            f"the raw event {report.ref} is not drawn as a leaf")
    old = _ok(t, ui.get("/api/frame", context=ctx, id="release", revision=r1.revision),
              "release at revision 1")
    t.eq(old["frame"]["body"], "(goal ship-v1) (stage waiting-tests)", "release as of r1")
    timeline = _ok(t, ui.get("/api/timeline", context=ctx, revision=r1.revision),
                   "the timeline at revision 1")
    refs = [e["ref"] for e in timeline["events"]]
    t.check(report.ref in refs and r2.event_ref not in refs,
            f"the timeline at revision 1 should end before {r2.event_ref}: {refs}")
    now = _ok(t, ui.get("/api/timeline", context=ctx), "the timeline")
    tx = next((e.get("transaction") for e in now["events"] if e["ref"] == r2.event_ref), None)
    t.check(tx and tx.get("revision") == r2.revision and tx.get("reason") ==
            "test results absorbed", f"{r2.event_ref}'s transaction: {tx!r}")
    diff = _ok(t, ui.get("/api/diff", context=ctx, **{"from": r1.revision, "to": r2.revision}),
               "the diff r1..r2")
    t.eq([f["id"] for f in diff["created"]], ["test-result"], "frames created r1..r2")
    revised = {f["id"]: f for f in diff["revised"]}
    t.eq(sorted(revised), ["release"], "frames revised r1..r2")
    lines = {(line["op"], line["text"]) for line in revised["release"]["body_diff"]}
    t.check({("removed", "(stage waiting-tests)"), ("added", "(stage packaging)")} <= lines,
            f"release's body diff: {sorted(lines)}")
    t.check({"subject": "test-result", "name": "supports", "object": "release"} in
            diff["relations_added"], f"relations added: {diff['relations_added']}")
    shown = _ok(t, ui.get("/api/encoding", context=ctx, snapshot=enc.snapshot),
                "the encoding view")
    t.eq([r["name"] for r in shown["regions"]], list(enc.regions),
         "the encoding view's regions, against the compile's physical order")
    t.eq(shown["revision"], enc.revision, "the snapshot's revision")
    t.eq(sum(r["bytes"] for r in shown["regions"]) <= enc.bytes, True,
         "region bytes within the encoding's")


@case("UI-03", "an evaluation can be stepped through: its claimed inputs, its encoding by "
      "region, its recall calls, its transaction and the Mind's change, with the previous "
      "and next step", needs=("inspector",))
def ui_03_an_evaluation_step_by_step(t: CaseRun):
    d, ctx = t.driver, t.context()
    ui = d.inspector()
    d.append(ctx, "s1", "user-message", "Ship v1 once the regression tests pass.")
    e1 = d.encoding(ctx, "s1")
    t.tx(ctx, "(create release (goal ship-v1) (stage waiting-tests))", session="s1",
         activation=e1.activation)
    d.deliver(ctx, e1.activation)
    report = d.append(ctx, "s1", "tool-result", "regression suite: 120 passed, 0 failed")
    e2 = d.encoding(ctx, "s1")
    recall = d.search(ctx, "regression", evaluation=Evaluation("s1", e2.activation))
    r2 = t.tx(ctx, f"(derive test-result (from {report.ref}) (tests passed)) "
              "(revise release (goal ship-v1) (stage packaging)) "
              "(relate test-result supports release)", reason="tests absorbed",
              session="s1", activation=e2.activation, request_id=t.request_id("step-2"))
    d.deliver(ctx, e2.activation)
    d.append(ctx, "s1", "user-message", "and the changelog?")
    e3 = d.encoding(ctx, "s1")
    listing = _ok(t, ui.get("/api/evaluations", context=ctx, session="s1"), "evaluations")
    t.eq([r.get("activation") for r in listing.get("rows", [])],
         [e3.activation, e2.activation, e1.activation], "s1's evaluations, newest first")
    step = _ok(t, ui.get("/api/evaluation", context=ctx, activation=e2.activation),
               "the step view")
    t.check(report.ref in [i.get("ref") for i in step.get("inputs", [])],
            f"{report.ref} among the claimed inputs: {step.get('inputs')}")
    enc = step.get("encoding") or {}
    t.eq(enc.get("hash"), e2.hash, "the step's snapshot")
    t.eq([r.get("name") for r in enc.get("regions", [])], list(e2.regions),
         "its encoding by region, in physical order")
    t.eq([c.get("ref") for c in step.get("recalls", [])], [recall.observation_ref],
         "its recall calls")
    t.eq([x.get("ref") for x in step.get("transactions", [])], [r2.event_ref],
         "its transaction")
    changes = {(c.get("key"), c.get("change")) for c in (step.get("mind") or {}).get(
        "changes", [])}
    t.check({("test-result", "derived"), ("release", "revised"),
             ("test-result supports release", "related")} <= changes,
            f"the Mind's change: {sorted(changes)}")
    t.eq((step.get("previous"), step.get("next")), (e1.activation, e3.activation),
         "the previous and next steps")
