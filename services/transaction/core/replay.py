"""Replay of a context's events into fresh projections, for audit (compare) and for
rebuild-projections (repair). Uses the live reducer, so both judge by the same rules."""
from __future__ import annotations

from morphz.services.transaction.core import chain
from morphz.shared.errors import MorphzError
from morphz.services.transaction.core.reducer import apply_event
from morphz.shared.mind.state import MindState
from morphz.shared.storage.api import SIDE_TABLES, TABLES, Write
from morphz.shared.storage.memory_store import MemoryStore

# Every table derived from the events: all but the events themselves and the side tables
# (encoding snapshots: records written beside the Mind, not by events).
AUDITED = tuple(t for t in TABLES if t != "events" and t not in SIDE_TABLES)


def replay(context: str, events) -> tuple[dict[str, dict], int]:
    """Apply events from nothing with the live reducer; every audited table's rows."""
    store = MemoryStore()
    count = 0
    for ev in events:
        with store.reader(context) as r:
            m = MindState(r)
            apply_event(m, ev)
            seq = r.commit_seq
        store.commit(context, seq, m.writes())
        count += 1
    with store.reader(context) as r:
        return {t: dict(r.scan(t)) for t in AUDITED}, count


def audit_report(context: str, m: MindState) -> dict:
    """Each projection of `m` compared with a replay of its events (never repaired)."""
    links = chain.verify(sorted(m.rows("events").items()))
    try:
        expected, count = replay(context, m.events())
    except (MorphzError, ValueError, TypeError, KeyError) as e:
        # A history that cannot be replayed (a gap, an undecodable or impossible event) is
        # reported, with the chain's first broken link; nothing can be compared.
        return {"context": context, "match": False, "events_replayed": 0, "projections": [],
                "chain": links, "replay_error": _short(e)}
    checks = [_report(t, expected[t], m.rows(t)) for t in AUDITED]
    return {"context": context, "match": links["match"] and all(c["match"] for c in checks),
            "events_replayed": count, "projections": checks, "chain": links,
            "replay_error": ""}


def _short(e: Exception) -> str:
    text = e.message if isinstance(e, MorphzError) else f"{type(e).__name__}: {e}"
    return text[:200]


def rebuild_plan(context: str, m: MindState) -> tuple[dict, list[Write]]:
    """The writes that make every projection equal to a replay of the events, and the
    report. Append-only tables cannot be rewritten: they are reported unrepairable."""
    expected, count = replay(context, m.events())
    writes, rewritten, unrepairable = [], {}, []
    for table in AUDITED:
        changed = _changed(expected[table], m.rows(table))
        if changed and TABLES[table]:
            unrepairable.append(table)
            continue
        writes += [Write(table, k, expected[table].get(k)) for k in changed]
        if changed:
            rewritten[table] = len(changed)
    return ({"context": context, "events_replayed": count, "rewritten": rewritten,
             "unrepairable": unrepairable}, writes)


def _changed(expected: dict, actual: dict) -> list:
    """Keys whose rows differ (or exist on one side only)."""
    return [k for k in set(expected) | set(actual) if expected.get(k) != actual.get(k)]


def _report(table: str, expected: dict, actual: dict) -> dict:
    diffs = []
    for k in sorted(_changed(expected, actual), key=repr):
        state = "missing" if k not in actual else "unexpected" if k not in expected else "differs"
        diffs.append(f"{'/'.join(map(str, k)) or '(context)'}: {state}")
    return {"projection": table, "match": not diffs, "differences": diffs[:20]}
