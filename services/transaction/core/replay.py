"""Replay of a context's events into fresh projections, for audit (compare) and for
rebuild-projections (repair). Uses the live reducer, so both judge by the same rules."""
from __future__ import annotations

from morphz.services.transaction.core.reducer import apply_event
from morphz.shared.mind.state import MindState
from morphz.shared.storage.api import TABLES, Write
from morphz.shared.storage.memory_store import MemoryStore

# Every projection derived from the events (the events themselves are the input).
AUDITED = ("meta", "frames", "frame_versions", "relations", "relations_in", "order",
           "order_rank", "inbox", "root_requests", "boundaries", "checkpoints", "sessions",
           "observations", "pending", "activations", "retire_due", "idempotency", "outbox",
           "event_ids")


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
    expected, count = replay(context, m.events())
    checks = [_compare(t, expected[t], m.rows(t)) for t in AUDITED]
    return {"context": context, "match": all(c["match"] for c in checks),
            "events_replayed": count, "projections": checks}


def rebuild_plan(context: str, m: MindState) -> tuple[dict, list[Write]]:
    """The writes that make every projection equal to a replay of the events, and the
    report. Append-only tables cannot be rewritten: they are reported unrepairable."""
    expected, count = replay(context, m.events())
    writes, rewritten, unrepairable = [], {}, []
    for table in AUDITED:
        actual = m.rows(table)
        changed = [k for k in set(expected[table]) | set(actual)
                   if expected[table].get(k) != actual.get(k)]
        if changed and TABLES[table]:
            unrepairable.append(table)
            continue
        writes += [Write(table, k, expected[table].get(k)) for k in changed]
        if changed:
            rewritten[table] = len(changed)
    return ({"context": context, "events_replayed": count, "rewritten": rewritten,
             "unrepairable": unrepairable}, writes)


def _compare(table: str, expected: dict, actual: dict) -> dict:
    diffs = []
    for k in sorted(set(expected) | set(actual), key=repr):
        if expected.get(k) != actual.get(k):
            state = "missing" if k not in actual else "unexpected" if k not in expected else "differs"
            diffs.append(f"{'/'.join(map(str, k)) or '(context)'}: {state}")
    return {"projection": table, "match": not diffs, "differences": diffs[:20]}
