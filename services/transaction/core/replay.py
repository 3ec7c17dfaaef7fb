"""Replay of a context's events into fresh projections, for audit (compare) and for
rebuild-projections (repair). Uses the live reducer, so both judge by the same rules."""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Optional

from morphz.services.transaction.core import chain
from morphz.shared.process.cycles import cycles_not_collected
from morphz.shared.deadline import NEVER, Deadline
from morphz.shared.errors import MorphzError
from morphz.services.transaction.core.reducer import apply_event, shares_candidate
from morphz.shared.mind import records as R
from morphz.shared.mind.replay_rows import (
    ReplayedMind, ReplayRows, Rows, compare, repair, stored_events)
from morphz.services.transaction.core.results import (
    AuditResult, ChainCheck, ProjectionCheck, RebuildResult)
from morphz.shared.mind.state import MindState
from morphz.shared.mind.strays import strays
from morphz.shared.storage.api import Write

STOPPED = ("DEADLINE_EXCEEDED", "CANCELLED")  # the call stopped, not the replay
RECENT_EVENT_BYTES = 32 << 20  # the stored events a replay keeps, latest first


def replay(context: str, events: Iterable[R.Event]) -> tuple[Rows, int]:
    """Apply events from nothing with the live reducer, each on what the ones before it
    wrote (as each was committed on its predecessor); every audited table's rows."""
    return _replay((ev, None) for ev in events)


def _replay(events: Iterable[tuple[R.Event, Optional[bytes]]],
            history: Optional[Callable[[int], Optional[bytes]]] = None,
            ) -> tuple[Rows, int]:
    """replay() of (event, its stored bytes or None). Each event gets a fresh candidate
    Mind over the rows before it (the reducer reads what an event changed against them),
    except that a run of plain inputs shares one (reducer.shares_candidate: they never
    read the rows before their writes); the Meta object passes from one to the next
    instead of a meta row written and read again per event, and goes into the rows once,
    after the last. Stored events (with their bytes) come with `history(seq)`, the stored
    bytes of any of them: the replay reads them from there, not from its rows."""
    rows = ReplayRows(history, RECENT_EVENT_BYTES)
    meta: Optional[R.Meta] = None
    last: Optional[R.Event] = None
    count = 0
    m: Optional[ReplayedMind] = None
    last_shares = False  # shares_candidate(last)
    for ev, raw in events:
        shares = shares_candidate(ev)
        if m is None or not (shares and last_shares):
            if m is not None:
                meta = rows.fold(m)
            m = rows.candidate(meta)
        m.raw = raw
        if raw is not None:  # a stored event: `history` was given, the rows read it
            rows.admit(ev.seq, raw)
        apply_event(m, ev, reply=False)
        last, last_shares = ev, shares
        count += 1
    if m is not None:
        meta = rows.fold(m)
    return rows.result(meta, last), count


def _events(stored: Iterable[tuple[int, bytes, Any]]) -> Iterator[tuple[R.Event, bytes]]:
    """Each stored event as a record, with its bytes; one that cannot be read raises when
    the replay reaches it."""
    for _, raw, value in stored:
        if isinstance(value, ValueError):
            raise value
        yield R.from_dict(R.Event, value), raw


class _Unreadable(Exception):
    """The store failed while the history was walked: its error, not a replay's."""


def _chained(stored: Iterator[tuple[int, bytes, Any]],
             links: chain.Verifier) -> Iterator[tuple[int, bytes, Any]]:
    """`stored`, each event judged by `links` as it passes; the store's errors come out as
    _Unreadable, which no replay error handler takes for the history's fault."""
    while True:
        try:
            item = next(stored)
        except StopIteration:
            return
        except Exception as e:
            raise _Unreadable() from e
        links.add(*item)
        yield item


@cycles_not_collected
def audit_report(context: str, m: MindState, deadline: Deadline = NEVER) -> AuditResult:
    """Each projection of `m` compared with a replay of its events (never repaired). The
    chain is judged in the same walk of the history; over all of it, also when the
    replay stops. Past `deadline` it raises DEADLINE_EXCEEDED / CANCELLED."""
    stored = stored_events(m, deadline)
    links = chain.Verifier()
    try:
        expected, count = _replay(_events(_chained(stored, links)), m.event_row)
    except _Unreadable as e:
        raise e.__cause__ from None
    except (MorphzError, ValueError, TypeError, KeyError) as e:
        if isinstance(e, MorphzError) and e.reason in STOPPED:
            raise
        # A history that cannot be replayed (a gap, an undecodable or impossible event) is
        # reported, with the chain's first broken link; nothing can be compared.
        for item in stored:  # the rest of the history, for the chain
            if not links.add(*item):
                break
        return AuditResult(context, False, 0, (), ChainCheck(**links.result()), _short(e))
    links_found = ChainCheck(**links.result())
    checks = tuple(ProjectionCheck(d.table, not d.diffs, d.diffs[:20])
                   for d in compare(expected, m))
    return AuditResult(context, links_found.match and all(c.match for c in checks), count,
                       checks, links_found, "")


def _short(e: Exception) -> str:
    text = e.message if isinstance(e, MorphzError) else f"{type(e).__name__}: {e}"
    return text[:200]


@cycles_not_collected
def rebuild_plan(context: str, m: MindState,
                 deadline: Deadline = NEVER) -> tuple[RebuildResult, list[Write]]:
    """The writes that make every projection equal to a replay of the events, and the
    report. Stray rows past the history's end are moved aside first (quarantined: kept,
    out of the way); other differences in append-only tables cannot be rewritten and are
    reported unrepairable."""
    moved = strays(context, m)
    for table, key in moved:
        m.quarantine(table, key)
    expected, count = _replay(_events(stored_events(m, deadline)), m.event_row)
    fix = repair(expected, m)
    writes = [Write(t, k, None, quarantine=True) for t, k in moved] + fix.writes
    return RebuildResult(context, count, fix.rewritten, fix.unrepairable,
                         tuple(f"{t}/{'/'.join(map(str, k))}" for t, k in moved)), writes
