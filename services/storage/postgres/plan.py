"""What a batch writes: the queued submissions, and each one's writes as statements."""
from __future__ import annotations

from typing import Optional

from morphz.shared.errors import MorphzError
from morphz.shared.storage import keys
from morphz.shared.mind.tables import TABLES
from morphz.shared.storage.api import Ticket, Write
from morphz.shared.storage.feed import Change


class Submission(Ticket):
    """A commit or side record queued for the next batch."""

    def __init__(self, context: str, expect: Optional[int], writes: list[Write],
                 change: Optional[Change] = None, fence: int = 0, *, until: float = 0.0,
                 bounded: bool = False) -> None:
        super().__init__()
        self.context, self.expect, self.writes, self.fence = context, expect, writes, fence
        self.change = change
        self.done = False
        # When its caller stops waiting (time.monotonic()); `bounded`: that is the call's
        # deadline (else the store's own bound for a commit).
        self.until, self.bounded = until, bounded
        self.erased: list[tuple[int, str]] = []  # events it erased: (seq, old record's digest)


def expected_seq(sub: Submission) -> int:
    return -1 if sub.expect is None else sub.expect


class Refused(Exception):
    """A submission's own refusal found inside its savepoint (roll it back)."""

    def __init__(self, error: MorphzError) -> None:
        super().__init__(error.message)
        self.error = error


def plan_writes(writes: list[Write], prefix: bytes, *,
                side: bool = False) -> list[tuple[str, str, list]]:
    """A submission's writes as statements: the rows of one table and kind (upsert,
    insert into an append-only table, delete, aside, erase) in one statement each. A key
    written more than once in the submission keeps its writes' order, one statement
    each, after the others (no other key's write depends on it). Raises Refused for
    a delete from an append-only table. `side`: side records (put_records), inserts."""
    if side:
        tables: dict[str, list] = {}
        for w in writes:
            tables.setdefault(w.table, []).append((keys.encode_in(prefix, w.key), w.value))
        return [("insert", table, rows) for table, rows in tables.items()]
    seen: dict[tuple[str, bytes], int] = {}
    encoded = []
    for w in writes:
        k = keys.encode_in(prefix, w.key)
        seen[(w.table, k)] = seen.get((w.table, k), 0) + 1
        encoded.append((w, k))
    groups: dict[tuple[str, str], list] = {}
    repeated: list[tuple[str, str, list]] = []
    for w, k in encoded:
        if w.quarantine:
            kind, row = "aside", (k, w)
        elif w.erase:  # an existing row rewritten (store.py: deleted, then inserted)
            kind, row = "erase", (k, w.value)
        elif TABLES[w.table]:
            if w.value is None:
                raise Refused(MorphzError("STORAGE_APPEND_ONLY",
                                           f"table {w.table} is append-only", table=w.table))
            kind, row = "insert", (k, w.value)
        else:
            kind, row = ("delete", (k, None)) if w.value is None else ("upsert", (k, w.value))
        if seen[(w.table, k)] > 1:
            repeated.append((kind, w.table, [row]))
        else:
            groups.setdefault((kind, w.table), []).append(row)
    return [(kind, table, rows) for (kind, table), rows in groups.items()] + repeated
