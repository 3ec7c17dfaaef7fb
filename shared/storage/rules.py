"""The physical rules every store checks a commit's writes by, beyond mind.tables' TABLES
append-only flags (the shapes of the keys the change feed names, quarantine and erasure
writes), and the errors a store refuses a commit or a read with; one definition, so
LmdbStore, PostgresStore and MemoryStore refuse alike."""
from __future__ import annotations

from morphz.shared.errors import MorphzError
from morphz.shared.mind.tables import ERASABLE_TABLES
from morphz.shared.storage.api import Key, Write

# The one shape of a key the change feed names: an event's seq, a frame's id.
_FEED_KEY = {"events": int, "frames": str}


def check_write(w: Write) -> None:
    """A commit's write beyond its table: the keys the change feed names (an event's
    seq, a frame's id) have their one shape; a quarantine write names another table's row
    and carries no value; an erasure's rewrite, a row of a table it may rewrite, and a
    value."""
    kind = _FEED_KEY.get(w.table)
    if kind is not None and not (len(w.key) == 1 and type(w.key[0]) is kind):
        raise MorphzError("STORAGE_KEY_INVALID", f"a {w.table} key is one "
                          f"{kind.__name__}", table=w.table)
    check_quarantine(w)
    if w.erase and (w.table not in ERASABLE_TABLES or w.value is None or w.quarantine):
        raise MorphzError("STORAGE_TABLE_INVALID", "an erasure rewrites a row of "
                          f"{', '.join(sorted(ERASABLE_TABLES))} with a value",
                          table=w.table[:80])


def check_quarantine(w: Write) -> None:
    """What a quarantine write may name: a row of a table commits write, no value."""
    if w.quarantine and (w.table == "quarantine" or w.value is not None):
        raise MorphzError("STORAGE_TABLE_INVALID", "a quarantine write names a row of "
                          "another table and carries no value", table=w.table[:80])


def quarantine_key(w: Write, commit_seq: int) -> Key:
    """Where the row goes: unique, since a commit moves a key at most once."""
    return (commit_seq, w.table, *w.key)


def quarantine_missing(w: Write) -> MorphzError:
    return MorphzError("STORAGE_KEY_MISSING", f"no row to quarantine in {w.table}",
                       table=w.table)


def erase_missing(w: Write) -> MorphzError:
    return MorphzError("STORAGE_KEY_MISSING", f"no row to erase in {w.table}", table=w.table)


def fenced(context: str, fence: int, highest: int) -> MorphzError:
    """The rejection of a commit whose fencing token is below the context's highest."""
    return MorphzError("FENCED", f"context {context} accepted fencing token {highest}; this "
                       f"commit carries {fence}: a newer owner holds the context",
                       context=context, fence=fence, highest=highest)


def context_not_found(context: str) -> MorphzError:
    return MorphzError("CONTEXT_NOT_FOUND", f"context {context[:80]} does not exist",
                       context=context[:80])
