"""Replay of a context's events into fresh projections, for audit (compare) and for
rebuild-projections (repair). Uses the live reducer, so both judge by the same rules."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Iterable, Iterator, Optional

import msgspec

from morphz.services.transaction.core import chain
from morphz.shared.cycles import cycles_not_collected
from morphz.shared.deadline import NEVER, Deadline
from morphz.shared.errors import MorphzError
from morphz.services.transaction.core.reducer import apply_event, shares_candidate
from morphz.shared.mind import receipts, records as R
from morphz.services.transaction.core.results import (
    AuditResult, ChainCheck, ProjectionCheck, RebuildResult)
from morphz.shared.mind.state import MindState
from morphz.shared.storage.api import SIDE_TABLES, TABLES, Key, Write
from morphz.shared.storage.overlay import Overlay, OverlayReader

# Every table derived from the events: all but the events themselves, the side tables
# (encoding snapshots: records written beside the Mind, not by events) and the rows
# repairs moved aside.
AUDITED = tuple(t for t in TABLES if t not in ("events", "quarantine") and t not in SIDE_TABLES)
STOPPED = ("DEADLINE_EXCEEDED", "CANCELLED")  # the call stopped, not the replay
RECENT_EVENT_BYTES = 32 << 20  # the stored events a replay keeps, latest first


class _Replayed(MindState):
    """One replayed event's candidate Mind (or a run of plain inputs'). Its event row is
    the event's stored bytes when there are some (`raw`: they decode to the event
    applied, as its encoding would), and it sets no chain hash: replay() hashes the last
    event's encoding once, at the end."""

    def __init__(self, reader: OverlayReader, meta: Optional[R.Meta]):
        super().__init__(reader)
        if meta is not None:
            self.init_meta(meta)
        self.raw: Optional[bytes] = None

    def add_event(self, ev: R.Event) -> None:
        if self.raw is None:  # a stored event is read from the history (_HistoryReader)
            self._put("events", (ev.seq,), R.dumps(ev))
        self._put("event_ids", (ev.id,), str(ev.seq).encode())


class _HistoryReader(OverlayReader):
    """A replay's rows, and the stored history's events up to the one being replayed,
    which are never copied into the rows: the latest RECENT_EVENT_BYTES of them are kept
    (what the reducer reads back is mostly recent: claimed inputs, sources), an older
    one is read from the store again. A replay holds a bounded part of the history."""

    def __init__(self, rows: Overlay, history: Callable[[int], Optional[bytes]]) -> None:
        super().__init__(rows)
        self._history = history
        self._recent: OrderedDict[int, bytes] = OrderedDict()
        self._recent_bytes = 0
        self._upto = 0  # events below this seq have been replayed (or are being)

    def admit(self, seq: int, raw: bytes) -> None:
        """Event `seq` (its stored bytes) is replayed next."""
        self._recent[seq] = raw
        self._recent_bytes += len(raw)
        self._upto = seq + 1
        while self._recent_bytes > RECENT_EVENT_BYTES and len(self._recent) > 1:
            self._recent_bytes -= len(self._recent.popitem(last=False)[1])

    def get(self, table: str, key: Key) -> Optional[bytes]:
        if table != "events":
            return self._rows.get(table, key, None)  # OverlayReader.get, without the call
        seq = key[0]
        if not isinstance(seq, int) or not 0 <= seq < self._upto:
            return None  # not replayed yet: as the rows of the moment would say
        raw = self._recent.get(seq)
        return raw if raw is not None else self._history(seq)

    def scan(self, table: str, prefix: Key = (), after: Optional[Key] = None,
             limit: int = 0, reverse: bool = False) -> Iterator[tuple[Key, bytes]]:
        if table == "events":  # no rule reads the history in ranges
            raise NotImplementedError("a replay does not scan the events it replays")
        return super().scan(table, prefix, after, limit, reverse)


def replay(context: str, events: Iterable[R.Event]) -> tuple[dict[str, dict], int]:
    """Apply events from nothing with the live reducer, each on what the ones before it
    wrote (as each was committed on its predecessor); every audited table's rows."""
    return _replay((ev, None) for ev in events)


def _replay(events: Iterable[tuple[R.Event, Optional[bytes]]],
            history: Optional[Callable[[int], Optional[bytes]]] = None,
            ) -> tuple[dict[str, dict], int]:
    """replay() of (event, its stored bytes or None). Each event gets a fresh candidate
    Mind over the rows before it (the reducer reads what an event changed against them),
    except that a run of plain inputs shares one (reducer.shares_candidate: they never
    read the rows before their writes); the Meta object passes from one to the next
    instead of a meta row written and read again per event, and goes into the rows once,
    after the last. Stored events (with their bytes) come with `history(seq)`, the stored
    bytes of any of them: the replay reads them from there, not from its rows."""
    rows = Overlay()
    done = OverlayReader(rows) if history is None else _HistoryReader(rows, history)
    meta: Optional[R.Meta] = None
    last: Optional[R.Event] = None
    count = 0
    m: Optional[_Replayed] = None
    last_shares = False  # shares_candidate(last)
    for ev, raw in events:
        shares = shares_candidate(ev)
        if m is None or not (shares and last_shares):
            if m is not None:
                rows.update(m.overlay())
                meta = m.meta()
            m = _Replayed(done, meta)
        m.raw = raw
        if raw is not None:  # a stored event: `history` was given, `done` reads it
            done.admit(ev.seq, raw)
        apply_event(m, ev, reply=False)
        last, last_shares = ev, shares
        count += 1
    if m is not None:
        rows.update(m.overlay())
        meta = m.meta()
    if meta is not None:
        meta.chain = R.event_hash(R.dumps(last))
        rows.put("meta", (), R.dumps(meta))
    return {t: rows.present(t) for t in AUDITED}, count


def stored_events(m: MindState, deadline: Deadline = NEVER) -> Iterator[tuple[int, bytes, Any]]:
    """The stored events in seq order, each read and decoded once for both the chain and
    the replay: (seq, bytes, decoded JSON or the ValueError decoding raised). A
    generator: the history is walked, never held (the replay keeps only the rows). The
    walk stops at the call's deadline (SEC-07), checked before each event, and tells it
    how far it is (a job's progress)."""
    meta = m.meta()
    total = meta.next_seq if meta is not None else 0
    for (seq,), raw in m.event_rows():
        deadline.check("the walk of the history")
        deadline.advanced(seq + 1, max(total, seq + 1))
        try:
            value = R.decode_json(raw)
        except ValueError as e:
            value = e
        yield seq, raw, value


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
    checks = tuple(_report(t, expected[t], m.rows(t)) for t in AUDITED)
    return AuditResult(context, links_found.match and all(c.match for c in checks), count,
                       checks, links_found, "")


def _short(e: Exception) -> str:
    text = e.message if isinstance(e, MorphzError) else f"{type(e).__name__}: {e}"
    return text[:200]


def strays(context: str, m: MindState) -> list[tuple[str, tuple]]:
    """Rows no commit could have written: events at or past the meta's next sequence (a
    row slipped in at the tail blocks every later append), and event ids naming such a
    seq or none. The history and its chain end where the meta says."""
    end = m.require_meta(context).next_seq
    out = [("events", (seq,)) for seq in m.event_seqs_from(end)]
    for k, raw in m.row_items("event_ids"):
        seq = raw.decode("ascii", "replace")
        if not seq.isdigit() or int(seq) >= end:
            out.append(("event_ids", k))
    return out


def orphans(m: MindState) -> list[tuple[str, tuple]]:
    """Every row of a context that has rows but no meta (written by something other than
    the transaction path: it was never created), to move aside before creating it."""
    if m.meta() is not None or not m.commit_seq:
        return []
    return [(t, k) for t in TABLES if t != "quarantine" and t not in SIDE_TABLES
            for k in m.rows(t)]


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
    writes = [Write(t, k, None, quarantine=True) for t, k in moved]
    rewritten, unrepairable = {}, []
    for table in AUDITED:
        changed = _changed(expected[table], m.rows(table), table)
        if changed and TABLES[table]:
            unrepairable.append(table)
            continue
        writes += [Write(table, k, expected[table].get(k)) for k in changed]
        if changed:
            rewritten[table] = len(changed)
    return RebuildResult(context, count, rewritten, tuple(unrepairable),
                         tuple(f"{t}/{'/'.join(map(str, k))}" for t, k in moved)), writes


def _changed(expected: dict, actual: dict, table: str = "") -> list:
    """Keys whose rows differ (or exist on one side only). Idempotency records are
    compared by what they say (receipts.canonical): a replay writes the current version
    where the history kept an older one, which reads the same."""
    if expected == actual:  # the usual answer, from one comparison in C
        return []
    same = _SAME.get(table, _equal)
    return [k for k in set(expected) | set(actual) if not same(expected.get(k), actual.get(k))]


def _equal(a: Optional[bytes], b: Optional[bytes]) -> bool:
    return a == b


def _same_receipt(a: Optional[bytes], b: Optional[bytes]) -> bool:
    if a == b:
        return True
    try:
        return receipts.canonical(a) == receipts.canonical(b)
    except (ValueError, TypeError, KeyError, AttributeError, msgspec.MsgspecError):
        # an unreadable record: it differs
        return False


_SAME = {"idempotency": _same_receipt}


def _report(table: str, expected: dict, actual: dict) -> ProjectionCheck:
    diffs = []
    for k in sorted(_changed(expected, actual, table), key=repr):
        state = "missing" if k not in actual else "unexpected" if k not in expected else "differs"
        diffs.append(f"{'/'.join(map(str, k)) or '(context)'}: {state}")
    return ProjectionCheck(table, not diffs, tuple(diffs[:20]))
