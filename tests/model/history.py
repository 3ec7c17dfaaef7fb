"""History checker for one context (issue 3): given what a test saw (acknowledged receipts and
rejections) and the history the server gives back (its events), report every violation of

  - a gapless version chain: the committed context-tx events, in event order, are revisions
    1..R, R is the context's revision, every event @e0..@e(N-1) exists with its own seq;
  - no lost update: no transaction was accepted at a revision when a boundary it reads or
    writes was written after its base (in particular: no base version accepted twice for
    the same boundary); exact-version operations only at their exact base;
  - every acknowledged commit present: its receipt's event is a context-tx event with the same
    request id (and text), at the receipt's revision, applied once;
  - every rejected request absent: no event carries it (unless another attempt of the same
    request was acknowledged).

Use `check_history(client, ctx, acked, rejected)` against a server, or `check_events(events,
revision, acked, rejected)` on a history already read (doctored histories in tests).

  acked:    [{"request_id": str, "receipt": dict, "text": str (optional)}]
            receipt of a transaction (has "event_ref", "revision") or of an event append
            (has "ref", "seq"); replayed receipts may be listed too.
  rejected: [{"request_id": str, "text": str, "kind": "tx" (default) | "event",
              "reason": str (optional, informative)}]
"""
from __future__ import annotations

from typing import Optional

from morphz.services.transaction.core.boundaries import footprint
from morphz.services.transaction.core.txlang import EXACT_VERSION_OPS, parse_text
from morphz.shared.errors import MorphzError

CONTEXT_TX = "context-tx"


def read_history(client, ctx: str) -> tuple[list[Optional[dict]], int]:
    """Every event of the context, @e0 .. @e(N-1) (None where one cannot be read), and the
    context's revision."""
    status = client.status(ctx)
    events: list[Optional[dict]] = []
    for n in range(status["event_count"]):
        try:
            events.append(client.get_event(ctx, f"@e{n}"))
        except MorphzError:
            events.append(None)
    return events, status["revision"]


def check_history(client, ctx: str, acked: list[dict], rejected: list[dict]) -> list[str]:
    events, revision = read_history(client, ctx)
    return check_events(events, revision, acked, rejected)


def _canonical(text: str) -> Optional[str]:
    try:
        return parse_text(text).render()
    except MorphzError:
        return None


def check_events(events: list[Optional[dict]], revision: int, acked: list[dict],
                 rejected: list[dict]) -> list[str]:
    problems: list[str] = []

    # -- the chain ---------------------------------------------------------------------
    txs: list[tuple[int, dict]] = []  # (revision, event) of the committed transactions
    rev_of_seq: dict[int, int] = {}
    for n, ev in enumerate(events):
        if ev is None:
            problems.append(f"@e{n} is missing from the history")
            continue
        if ev.get("seq") != n or ev.get("ref", f"@e{n}") != f"@e{n}":
            problems.append(f"@e{n} carries seq {ev.get('seq')} / ref {ev.get('ref')}")
        if ev.get("kind") == CONTEXT_TX:
            txs.append((len(txs) + 1, ev))
            rev_of_seq[n] = len(txs)
    if len(txs) != revision:
        problems.append(f"the context is at revision {revision} but its history holds "
                        f"{len(txs)} committed transactions: the version chain has a gap")

    # -- no lost update ------------------------------------------------------------------
    parsed: dict[int, tuple[int, set, set, set]] = {}  # revision -> (base, reads, writes, ops)
    for rev, ev in txs:
        try:
            tx = parse_text(ev.get("text", ""))
        except MorphzError as e:
            problems.append(f"revision {rev} (@e{ev['seq']}): its text does not parse: "
                            f"{e.reason}")
            continue
        reads, writes = footprint(tx)
        parsed[rev] = (tx.base_version, reads, writes, {o.op for o in tx.ops})
    for rev, (base, reads, writes, ops) in sorted(parsed.items()):
        if base >= rev:
            problems.append(f"revision {rev} was accepted with base-version {base}, not "
                            "before it")
            continue
        if base != rev - 1 and ops & set(EXACT_VERSION_OPS):
            problems.append(f"revision {rev} ({', '.join(sorted(ops & set(EXACT_VERSION_OPS)))})"
                            f" needs the exact version but was rebased from {base}")
        for between in range(base + 1, rev):
            if between not in parsed:
                continue
            b_base, _, b_writes, _ = parsed[between]
            overlap = sorted(b_writes & (reads | writes))
            if not overlap:
                continue
            same = " (the same base version accepted twice for the same boundary)" \
                if b_base == base else ""
            problems.append(f"lost update: revision {rev} was accepted from base {base} although "
                            f"revision {between} wrote {', '.join(overlap)} after that base"
                            f"{same}")

    # -- request ids are applied once ----------------------------------------------------
    by_request: dict[str, list[dict]] = {}
    for ev in events:
        if ev is not None and ev.get("request_id"):
            by_request.setdefault(ev["request_id"], []).append(ev)
    for rid, evs in sorted(by_request.items()):
        if len(evs) > 1:
            problems.append(f"request {rid} was applied {len(evs)} times: "
                            f"{', '.join('@e%d' % e['seq'] for e in evs)}")

    # -- every acknowledged commit is present ---------------------------------------------
    claimed: set[int] = set()
    acked_requests: dict[str, set] = {}
    for a in acked:
        receipt, rid, text = a.get("receipt") or {}, a.get("request_id", ""), a.get("text")
        if "event_ref" in receipt:
            ref, kind = receipt["event_ref"], "tx"
        elif "ref" in receipt:
            ref, kind = receipt["ref"], "event"
        else:
            problems.append(f"acknowledged request {rid or '(no id)'}: receipt names no event")
            continue
        seq = int(ref[2:]) if ref.startswith("@e") and ref[2:].isdigit() else -1
        ev = events[seq] if 0 <= seq < len(events) else None
        what = f"acknowledged {'commit' if kind == 'tx' else 'input'} " \
               f"{rid or '(no id)'} ({ref})"
        if ev is None:
            problems.append(f"{what} is absent from the history")
            continue
        claimed.add(seq)
        if rid:
            acked_requests.setdefault(rid, set()).add(_canonical(text) if text and kind == "tx"
                                                       else text)
        if ev.get("request_id", "") != rid:
            problems.append(f"{what}: the event there carries request "
                            f"{ev.get('request_id') or '(no id)'}")
        if kind == "tx":
            if ev.get("kind") != CONTEXT_TX:
                problems.append(f"{what}: the event there is a {ev.get('kind')}, not a "
                                "committed transaction")
                continue
            if text is not None and _canonical(text) != ev.get("text"):
                problems.append(f"{what}: the committed text differs from the request")
            if rev_of_seq.get(seq) != receipt.get("revision"):
                problems.append(f"{what}: acknowledged as revision {receipt.get('revision')} "
                                f"but it is revision {rev_of_seq.get(seq)} of the history")
            base = parsed.get(rev_of_seq.get(seq), (None,))[0]
            if "base_version" in receipt and base is not None and \
                    receipt["base_version"] != base:
                problems.append(f"{what}: acknowledged with base {receipt['base_version']} but "
                                f"the history records base {base}")
        else:
            if ev.get("kind") == CONTEXT_TX:
                problems.append(f"{what}: the event there is a committed transaction")
            elif text is not None and ev.get("text") != text:
                problems.append(f"{what}: the recorded input text differs")

    # -- every rejected request is absent --------------------------------------------------
    for r in rejected:
        rid, kind = r.get("request_id", ""), r.get("kind", "tx")
        text = r.get("text")
        canon = _canonical(text) if kind == "tx" and text is not None else text
        if kind == "tx" and text is not None and canon is None:
            continue  # it never parsed: nothing of it can be in the history
        if rid and canon in acked_requests.get(rid, set()):
            continue  # another attempt of this same request was acknowledged
        for n, ev in enumerate(events):
            if ev is None or n in claimed:
                continue
            if (ev.get("kind") == CONTEXT_TX) != (kind == "tx"):
                continue
            if rid and ev.get("request_id") != rid:
                continue
            if canon is not None and ev.get("text") != canon:
                continue
            if not rid and canon is None:
                continue
            problems.append(f"rejected request {rid or '(no id)'} "
                            f"({r.get('reason', 'rejected')}) is in the history at @e{n}")
    return problems
