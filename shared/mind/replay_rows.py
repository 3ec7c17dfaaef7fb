"""The read model's side of a replay (transaction/core/replay.py drives the live reducer
over the events): the stored events in seq order, the rows the replay writes, and those
rows compared with the store's, table by table. Table names stay here; the transaction
core asks for what it means."""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

import msgspec

from morphz.shared.deadline import NEVER, Deadline
from morphz.shared.mind import envelope, receipts, records as R
from morphz.shared.mind.state import MindState
from morphz.shared.mind.tables import SIDE_TABLES, TABLES
from morphz.shared.storage.api import Key, Write
from morphz.shared.storage.overlay import Overlay, OverlayReader

# Every table derived from the events: all but the events themselves, the side tables
# (encoding snapshots: records written beside the Mind, not by events) and the rows
# repairs moved aside.
AUDITED = tuple(t for t in TABLES if t not in ("events", "quarantine") and t not in SIDE_TABLES)

Rows = dict[str, dict[Key, bytes]]  # audited table -> its rows


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


class ReplayedMind(MindState):
    """One replayed event's candidate Mind (or a run of plain inputs'). Its event row is
    the event's stored bytes when there are some (`raw`: they decode to the event
    applied, as its encoding would), and it sets no chain hash: ReplayRows.result() hashes
    the last event's encoding once, at the end."""

    def __init__(self, reader: OverlayReader, meta: Optional[R.Meta]):
        super().__init__(reader)
        if meta is not None:
            self.init_meta(meta)
        self.raw: Optional[bytes] = None

    def add_event(self, ev: R.Event) -> None:
        if self.raw is None:  # a stored event is read from the history (_HistoryReader)
            self._put("events", (ev.seq,), R.dumps(ev))
        self._put("event_ids", (ev.id,), str(ev.seq).encode())
        self.note_link(self.require_meta(ev.context), ev)


class _HistoryReader(OverlayReader):
    """A replay's rows, and the stored history's events up to the one being replayed,
    which are never copied into the rows: the latest `recent_bytes` of them are kept
    (what the reducer reads back is mostly recent: claimed inputs, sources), an older
    one is read from the store again. A replay holds a bounded part of the history."""

    def __init__(self, rows: Overlay, history: Callable[[int], Optional[bytes]],
                 recent_bytes: int) -> None:
        super().__init__(rows)
        self._history = history
        self._recent: OrderedDict[int, bytes] = OrderedDict()
        self._recent_bytes = 0
        self._limit = recent_bytes
        self._upto = 0  # events below this seq have been replayed (or are being)

    def admit(self, seq: int, raw: bytes) -> None:
        """Event `seq` (its stored bytes) is replayed next."""
        self._recent[seq] = raw
        self._recent_bytes += len(raw)
        self._upto = seq + 1
        while self._recent_bytes > self._limit and len(self._recent) > 1:
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


class ReplayRows:
    """The rows a replay has written so far, which each next candidate Mind reads. With
    `history(seq)` (the stored bytes of any stored event) the events are read from there,
    not from these rows; admit() each before it is applied."""

    def __init__(self, history: Optional[Callable[[int], Optional[bytes]]] = None,
                 recent_bytes: int = 0) -> None:
        self._rows = Overlay()
        self._done = OverlayReader(self._rows) if history is None else \
            _HistoryReader(self._rows, history, recent_bytes)

    def candidate(self, meta: Optional[R.Meta]) -> ReplayedMind:
        """A fresh candidate Mind over the rows so far, carrying `meta` along."""
        return ReplayedMind(self._done, meta)

    def admit(self, seq: int, raw: bytes) -> None:
        self._done.admit(seq, raw)

    def fold(self, m: ReplayedMind) -> Optional[R.Meta]:
        """Lay a candidate's writes over the rows; its Meta object, for the next one."""
        self._rows.update(m.overlay())
        return m.meta()

    def result(self, meta: Optional[R.Meta], last: Optional[R.Event]) -> Rows:
        """Every audited table's rows, the meta (chained to the last event) written once."""
        if meta is not None:
            meta.chain = envelope.next_link(vars(last), R.dumps(last),
                                            envelope.LINK in last.data)
            self._rows.put("meta", (), R.dumps(meta))
        return {t: self._rows.present(t) for t in AUDITED}


# -- the replay's rows against the store's ----------------------------------------------
@dataclass(frozen=True, slots=True)
class TableDiff:
    """An audited table's differences: "key: missing|unexpected|differs", by key."""
    table: str
    diffs: tuple[str, ...]


def compare(expected: Rows, m: MindState) -> list[TableDiff]:
    """Each audited table of `m` against the replay's rows."""
    out = []
    for table in AUDITED:
        want, actual = expected[table], m.rows(table)
        diffs = []
        for k in sorted(_changed(want, actual, table), key=repr):
            state = "missing" if k not in actual else "unexpected" if k not in want else "differs"
            diffs.append(f"{'/'.join(map(str, k)) or '(context)'}: {state}")
        out.append(TableDiff(table, tuple(diffs)))
    return out


@dataclass(frozen=True, slots=True)
class Repair:
    """What makes `m`'s projections equal to a replay's: the writes, the rows rewritten
    by table, and the append-only tables that differ (they cannot be rewritten)."""
    writes: list[Write]
    rewritten: dict[str, int]
    unrepairable: tuple[str, ...]


def repair(expected: Rows, m: MindState) -> Repair:
    writes: list[Write] = []
    rewritten, unrepairable = {}, []
    for table in AUDITED:
        changed = _changed(expected[table], m.rows(table), table)
        if changed and TABLES[table]:
            unrepairable.append(table)
            continue
        writes += [Write(table, k, expected[table].get(k)) for k in changed]
        if changed:
            rewritten[table] = len(changed)
    return Repair(writes, rewritten, tuple(unrepairable))


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
