"""The LMDB store's writes (store.py): a commit's writes encoded for its group's write
transaction, where each submission's rows go in a child transaction of its own, all or
none. An encoded write is (handle, append-only: True, False or ERASE, table, key,
value: bytes, None to delete, a Quarantine, or an erasure's (value, key))."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Optional

import lmdb

from morphz.shared.errors import MorphzError
from morphz.shared.storage import keys
from morphz.shared.mind.tables import SIDE_TABLES, TABLES
from morphz.shared.storage.api import Ticket, Write
from morphz.shared.storage.feed import Change
from morphz.shared.storage.rules import (check_write, erase_missing, quarantine_key,
                                         quarantine_missing)

ERASE = object()  # an encoded write's "append-only" place: an erasure's rewrite


@dataclass(frozen=True)
class Quarantine:
    """An encoded write that moves its row aside (`prefix`: its context's)."""
    write: Write
    prefix: bytes


class Submission(Ticket):
    def __init__(self, context: str, expect: Optional[int], encoded: list,
                 change: Optional[Change] = None, fence: int = 0) -> None:
        super().__init__()
        self.context, self.expect, self.encoded, self.fence = context, expect, encoded, fence
        self.change = change  # its keys; position and commit_seq are set when it applies
        self.erased: list[tuple[int, str]] = []  # events it erased: (seq, old record's digest)
        # Set by the leader that applied it, which holds the leader lock its waiter takes
        # next: a plain flag (an Event was only ever polled, for 7 us per commit).
        self.done = False


def expected(sub: Submission) -> int:
    return -1 if sub.expect is None else sub.expect


def written(sub: Submission) -> int:
    """About the bytes a submission adds (a row's key, value and LMDB's node header)."""
    return sum(len(key) + (0 if value is None or isinstance(value, Quarantine)
                           else len(value)) + 16
               for _, _, _, key, value in sub.encoded)


def puts_a_row(sub: Submission) -> bool:
    """Whether a submission puts a row (not only deletes or moves rows aside)."""
    return any(value is not None and not isinstance(value, Quarantine)
               for _, _, _, _, value in sub.encoded)


def u64(n: int) -> bytes:
    return n.to_bytes(8, "big")


def delete_under(txn: lmdb.Transaction, db, prefix: bytes) -> None:
    """Delete every row of `db` whose key starts with `prefix`."""
    cur = txn.cursor(db=db)
    if not cur.set_range(prefix):
        return
    while cur.key().startswith(prefix):
        if not cur.delete():  # (moves to the next row)
            break


def encode(dbs: dict, context: str, writes: list[Write]) -> list:
    """A commit's writes encoded (bad tables and keys fail here, before anything is
    queued)."""
    encoded = []
    prefix = keys.context_prefix(context)
    for w in writes:
        db = dbs.get(w.table)
        if db is None or w.table in SIDE_TABLES:
            keys.check_commit_table(w.table)
        check_write(w)
        if w.quarantine:
            encoded.append((db, True, w.table, keys.encode_in(prefix, w.key),
                            Quarantine(w, prefix)))
            continue
        if w.erase:  # an existing row rewritten, even of an append-only table
            encoded.append((db, ERASE, w.table, keys.encode_in(prefix, w.key),
                            (w.value, w.key)))
            continue
        encoded.append((db, TABLES[w.table], w.table, keys.encode_in(prefix, w.key),
                        w.value))
    return encoded


def put_rows(child: lmdb.Transaction, dbs: dict, sub: Submission, commit_seq: int) -> None:
    """A submission's rows, in its child transaction `child`, as commit `commit_seq`
    (a refusal raises MorphzError: the caller aborts the child)."""
    for _, append_only, table, key, value in sub.encoded:
        # (the handle of this environment: reclaim() may have opened another since the
        # write was encoded)
        db = dbs[table]
        if isinstance(value, Quarantine):
            move_aside(child, db, dbs["quarantine"], key, value, commit_seq)
            continue
        if append_only is ERASE:
            old = child.get(key, db=db)
            if old is None:
                raise erase_missing(Write(table, (), None))
            child.put(key, value[0], db=db)
            if table == "events":  # for the erasure log
                sub.erased.append((value[1][0], hashlib.sha256(old).hexdigest()))
        elif append_only:  # a new row only: a put that overwrites nothing
            if value is None or not child.put(key, value, db=db, overwrite=False):
                raise MorphzError("STORAGE_APPEND_ONLY", f"table {table} is append-only",
                                  table=table)
        elif value is None:
            child.delete(key, db=db)
        else:
            child.put(key, value, db=db)


def move_aside(txn: lmdb.Transaction, db, quarantine_db, key: bytes, q: Quarantine,
               commit_seq: int) -> None:
    """A quarantined row moved from `db` to the quarantine table, under commit_seq."""
    row = txn.get(key, db=db)
    if row is None:
        raise quarantine_missing(q.write)
    aside = keys.encode_in(q.prefix, quarantine_key(q.write, commit_seq))
    txn.put(aside, row, db=quarantine_db)
    txn.delete(key, db=db)
