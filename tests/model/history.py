"""History checker for one context (issue 3): given what a test saw (acknowledged receipts,
rejections and the states of the Mind it observed) and the history the server gives back
(its events), report every violation of

  - a gapless version chain: the committed context-tx events, in event order, are revisions
    1..R, R is the context's revision, every event @e0..@e(N-1) exists with its own seq;
  - no lost update: no transaction was accepted although a boundary it reads or writes was
    changed after its read point (base revision, and the tick it saw); what each transaction
    and each activation changed is learnt from consecutive observed states, mapped to
    boundaries and footprints by the reference model's rules (`reference.py`), never by the
    server's own; exact-version operations only at their exact base;
  - no change without a cause: the observed Mind changes only at a committed transaction or
    an activation (an activation only retires frames);
  - every acknowledged commit present: its receipt's event is a context-tx event with the same
    request id (and text), at the receipt's revision, applied once;
  - every rejected request absent: no event carries it (unless another attempt of the same
    request was acknowledged).

Use `check_history(client, ctx, acked, rejected, observed)` against a server, or
`check_events(events, revision, acked, rejected, observed)` on a history already read
(doctored histories in tests).

  acked:    [{"request_id": str, "receipt": dict, "text": str (optional),
              "read_tick": int (optional: the tick of the activation the commit named;
                                a declared (base-tick T) in its text wins)}]
            receipt of a transaction (has "event_ref", "revision") or of an event append
            (has "ref", "seq"); replayed receipts may be listed too.
  rejected: [{"request_id": str, "text": str, "kind": "tx" (default) | "event",
              "reason": str (optional, informative)}]
  observed: [reference.mind_view(...)] in the order they were read, each naming the number
            of events the history held when it was read ("events"); parts it did not read
            are None (observations: only the @eN read). Without observations (None) no lost
            update can be judged.
"""
from __future__ import annotations

from typing import Optional

from morphz.shared.errors import MorphzError

from reference import (ACTIVE, EXACT_VERSION_OPS, WINDOW, Stamp, after, changed_boundaries,
                       _canon, footprint, frame_view, mind_view, parse_tx)

CONTEXT_TX, ACTIVATION = "context-tx", "activation"


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


def observe_revisions(client, ctx: str, events: list[Optional[dict]]) -> list[dict]:
    """Observations of a history made only of transactions (no activation, no rollback):
    every frame as it stood at each revision (as-of reads), from an empty Mind on. Relations,
    order, observations and sessions are not observed."""
    ids = [f["id"] for f in client.list_frames(ctx)["frames"]]
    views = [mind_view(0, 0, 1, {}, None, None, None, None)]
    revision = 0
    for n, ev in enumerate(events):
        if ev is None or ev.get("kind") != CONTEXT_TX:
            continue
        revision += 1
        frames = {}
        for fid in ids:
            try:
                f = client.get_frame(ctx, fid, at_revision=revision)
            except MorphzError:
                continue
            frames[fid] = _frame_of(f)
        views.append(mind_view(revision, 0, n + 1, frames, None, None, None, None))
    return views


def observe(client, ctx: str, refs=()) -> dict:
    """The Mind as the server shows it now, as a reference view: frames in projection order,
    relations, session states, revision, tick, event count, and the observations in refs.
    Its reads are not one snapshot: only for a context nobody else writes meanwhile."""
    listed = client.list_frames(ctx)
    status = client.status(ctx)
    edges = {(e["subject"], e["name"], e["object"])
             for f in listed["frames"] for e in f["relations"]}
    observations = {}
    for r in sorted(refs):
        ev = client.get_event(ctx, r)
        observations[r] = {"state": ev["state"] or ACTIVE, "protected": ev["protected"]}
    return mind_view(status["revision"], status["cognitive_tick"], status["event_count"],
                     {f["id"]: _frame_of(f) for f in listed["frames"]}, edges,
                     [f["id"] for f in listed["frames"]], observations,
                     {s["id"]: s["state"] for s in status["sessions"]})


def _frame_of(f: dict) -> dict:
    """A frame as the server shows it, in the reference model's view."""
    retire = f.get("retire")
    return frame_view(f["body"], f["revision"], f["state"], f["protected"], f["sources"],
                      f["generation"],
                      (retire["generation"], retire["due_tick"]) if retire else None)


def check_history(client, ctx: str, acked: list[dict], rejected: list[dict],
                  observed: Optional[list[dict]] = None) -> list[str]:
    events, revision = read_history(client, ctx)
    return check_events(events, revision, acked, rejected, observed)


def _canonical(text: Optional[str]) -> Optional[tuple]:
    """A transaction text read by the reference model (not the server's parser, whose
    rendering is part of what is checked): equal for the same transaction however spelled;
    None when it does not read as one."""
    try:
        tx = parse_tx(text or "")
    except Exception:  # noqa: BLE001 - any text the model cannot read is no transaction
        return None
    return (tx.base, tx.base_tick, tx.reason, tuple(_canon(o) for o in tx.ops))


def check_events(events: list[Optional[dict]], revision: int, acked: list[dict],
                 rejected: list[dict], observed: Optional[list[dict]] = None) -> list[str]:
    problems: list[str] = []

    # -- the chain ---------------------------------------------------------------------
    rev_of_seq: dict[int, int] = {}  # seq -> revision of the committed transactions
    for n, ev in enumerate(events):
        if ev is None:
            problems.append(f"@e{n} is missing from the history")
            continue
        if ev.get("seq") != n or ev.get("ref", f"@e{n}") != f"@e{n}":
            problems.append(f"@e{n} carries seq {ev.get('seq')} / ref {ev.get('ref')}")
        if ev.get("kind") == CONTEXT_TX:
            rev_of_seq[n] = len(rev_of_seq) + 1
    if len(rev_of_seq) != revision:
        problems.append(f"the context is at revision {revision} but its history holds "
                        f"{len(rev_of_seq)} committed transactions: the version chain has a gap")

    # -- no lost update, no change without a cause -----------------------------------------
    read_ticks = {a["receipt"]["event_ref"]: a["read_tick"] for a in acked
                  if a.get("read_tick") is not None and "event_ref" in (a.get("receipt") or {})}
    commits: dict[int, tuple] = {}  # seq -> (revision, Tx, tau)
    for n, rev in rev_of_seq.items():
        try:
            tx = parse_tx(events[n].get("text", ""))
        except (ValueError, IndexError, AssertionError) as e:
            problems.append(f"revision {rev} (@e{n}): its text does not parse: {e!r}")
            continue
        tx.session = events[n].get("session", "")  # the session the commit named
        # the tick it read at: declared, else that of the activation it named
        tau = tx.base_tick if tx.base_tick is not None else read_ticks.get(f"@e{n}")
        commits[n] = (rev, tx, tau)
        exact = sorted({o[0] for o in tx.ops} & set(EXACT_VERSION_OPS))
        if tx.base >= rev:
            problems.append(f"revision {rev} was accepted with base-version {tx.base}, not "
                            "before it")
        elif tx.base != rev - 1 and exact:
            problems.append(f"revision {rev} ({', '.join(exact)}) needs the exact version but "
                            f"was rebased from {tx.base}")
    if observed is not None:
        activations = {n for n, ev in enumerate(events)
                       if ev is not None and ev.get("kind") == ACTIVATION}
        changes, found = _changes(observed, commits, activations)
        problems += found
        problems += _lost_updates(commits, changes)

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
            if text is not None and _canonical(text) != _canonical(ev.get("text")):
                problems.append(f"{what}: the committed text differs from the request")
            if rev_of_seq.get(seq) != receipt.get("revision"):
                problems.append(f"{what}: acknowledged as revision {receipt.get('revision')} "
                                f"but it is revision {rev_of_seq.get(seq)} of the history")
            base = commits[seq][1].base if seq in commits else None
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
            if canon is not None and canon != (_canonical(ev.get("text")) if kind == "tx"
                                               else ev.get("text")):
                continue
            if not rid and canon is None:
                continue
            problems.append(f"rejected request {rid or '(no id)'} "
                            f"({r.get('reason', 'rejected')}) is in the history at @e{n}")
    return problems


# -- lost updates, from observed states ---------------------------------------------------------

def _changes(observed: list[dict], commits: dict, activations: set) -> tuple[list, list[str]]:
    """What changed where: [(boundary, Stamp, seq of the event that changed it)], from the
    differences of consecutive observations; a difference is put down to the one transaction
    or activation between them (several: it cannot be told which, and is left out)."""
    changes: list[tuple[str, Stamp, int]] = []
    problems: list[str] = []
    for seq, (rev, tx, _) in commits.items():  # checkpoint identity: made or dropped
        changes += [(f"checkpoint:{op[1]}", Stamp(rev), seq) for op in tx.ops
                    if op[0] in ("checkpoint", "drop-checkpoint")]

    def put_down(boundaries: set, lo: int, cur: dict, by_activation: bool = True) -> None:
        if not boundaries:
            return
        causes = [s for s in range(lo, cur["events"])
                  if s in commits or (by_activation and s in activations)]
        where = f"between @e{lo} and @e{cur['events']}"
        if not causes:
            problems.append(f"the Mind changed {where} without a transaction"
                            f"{' or activation' if by_activation else ''}: "
                            f"{', '.join(sorted(boundaries))}")
        elif len(causes) == 1 and causes[0] in commits:
            changes.extend((b, Stamp(commits[causes[0]][0]), causes[0]) for b in boundaries)
        elif len(causes) == 1:
            wrong = sorted(b for b in boundaries if not b.startswith("life:"))
            if wrong:
                problems.append(f"the activation @e{causes[0]} changed {', '.join(wrong)}")
            # a window retirement; `window` stands for all of them (a rollback reads it)
            stamp = Stamp(cur["revision"], cur["tick"], "window")
            changes.extend((b, stamp, causes[0]) for b in boundaries | {WINDOW})

    read_at: dict[str, tuple[dict, int]] = {}  # @eN -> (state last read, events then)
    prev = None
    for cur in observed:
        if prev is not None:
            put_down(changed_boundaries(dict(prev, observations=None),
                                        dict(cur, observations=None)), prev["events"], cur)
        for ref, state in (cur["observations"] or {}).items():
            if ref in read_at and read_at[ref][0] != state:  # only a transaction can
                put_down({f"life:{ref}"}, read_at[ref][1], cur, by_activation=False)
            read_at[ref] = (state, cur["events"])
        prev = cur
    return changes, problems


def _lost_updates(commits: dict, changes: list) -> list[str]:
    """A transaction accepted although a boundary of its own footprint changed after its
    read point (before it committed)."""
    problems = []
    for seq, (rev, tx, tau) in sorted(commits.items()):
        reads, writes = footprint(tx)
        lost = sorted({(b, s) for b, s, at in changes
                       if at < seq and b in reads | writes and after(s, tx.base, tau)})
        if not lost:
            continue
        point = f"base {tx.base}" + (f", tick {tau}" if tau is not None else "")
        what = ", ".join(f"{b} (revision {s.revision}" +
                         (f", tick {s.tick} by the window)" if s.tick is not None else ")")
                         for b, s in lost)
        same = " (the same base version accepted twice for the same boundary)" \
            if any(s.tick is None and s.revision in _bases(commits, tx.base) for _, s in lost) \
            else ""
        problems.append(f"lost update: revision {rev} was accepted from {point} although "
                        f"{what} changed after it{same}")
    return problems


def _bases(commits: dict, base: int) -> set:
    """Revisions accepted from this base."""
    return {rev for rev, tx, _ in commits.values() if tx.base == base}
