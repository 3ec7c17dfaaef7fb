"""The PostgreSQL store's writes (store.py): a batch's submissions planned, each checked
against the versions and tokens the batch's transaction read (or refused), and their
statements run, pipelined or one by one in a savepoint; then the contexts' versions and
the change feed's rows of what applied. The transaction itself, its connection and its
bounds are the store's."""
from __future__ import annotations

import hashlib
import select
from dataclasses import dataclass, field, replace
from typing import Iterable, Optional

import psycopg
from psycopg import errors as pg_errors

from morphz.services.storage.postgres.errors import no_context
from morphz.services.storage.postgres.plan import Refused, Submission, plan_writes
from morphz.services.storage.postgres.schema import Statements
from morphz.shared.errors import MorphzError
from morphz.shared.storage import keys
from morphz.shared.storage.api import StaleCommit, Write
from morphz.shared.storage.feed import pack_change
from morphz.shared.storage.rules import erase_missing, fenced, quarantine_missing


def send_all(conn: psycopg.Connection) -> None:
    """Hand all of libpq's output to the kernel, waiting while the socket is full: done
    before a pipeline's last command. psycopg (3.3) sends a pipeline's commands as the
    socket takes them, and once the last is queued it stops sending whether or not
    PQflush sent everything (pipeline_communicate ignores PQflush's 1), then waits for
    results. If part of a statement is still in libpq's buffer, the server waits for it
    and psycopg for the server, for ever: seen with commits of 1 MiB over a Unix socket
    (its send queue is about 200 KiB), about one run in two of 200 commits, and before
    with a batch of 18 MiB. After this, what is left to send (COMMIT, Sync: a few bytes)
    fits a socket that reports room."""
    pgconn = conn.pgconn
    while pgconn.flush():  # 1: some is still to send (a lost connection raises)
        try:
            select.select([], [pgconn.socket], [], 1.0)
        except (OSError, ValueError) as e:  # the socket went away: a lost connection
            raise psycopg.OperationalError(f"sending to PostgreSQL failed: {e}") from None


def sent_bytes(plans: Iterable[list]) -> int:
    """What the planned statements send: their rows' keys and values (no aside rows:
    a batch with those is not pipelined)."""
    return sum(len(k) + len(v or b"") for plan in plans for _, _, rows in plan
               for k, v in rows)


def plan_batch(batch: list[Submission],
               prefixes: dict[str, bytes]) -> tuple[dict[int, list], dict[str, set[bytes]]]:
    """({id(submission): its plan}, {table: keys the batch appends}); a submission whose
    writes are refused at sight (a delete from an append-only table) gets its error."""
    plans: dict[int, list] = {}
    appends: dict[str, set[bytes]] = {}
    for sub in batch:
        try:
            plan = plans[id(sub)] = plan_writes(sub.writes, prefixes[sub.context], side=(
                sub.expect is None))
        except Refused as refused:  # a delete from an append-only table
            sub.error = refused.error
            continue
        for kind, table, rows in plan:
            if kind == "insert":
                appends.setdefault(table, set()).update(k for k, _ in rows)
    return plans, appends


@dataclass
class BatchState:
    """What a batch's transaction read (the feed head, each context's commit_seq and
    fencing token, the appended rows that exist) and what it changed so far."""
    head: int
    seqs: dict[str, int]
    fences: dict[str, int]
    existing: set
    inserted: set = field(default_factory=set)  # (table, key) appended by this batch so far
    changed: set = field(default_factory=set)
    feed: list = field(default_factory=list)  # (position, prefix, commit_seq, change)


def write_submission(cur: psycopg.Cursor, q: Statements, sub: Submission, plan: list,
                     prefix: bytes, state: BatchState, careful: bool) -> None:
    """Check `sub` against what the batch read and queue its statements, or give it the
    error that refuses it (the rest of the batch goes on)."""
    if sub.expect is None:  # rows outside the Mind: no version, only an existing context
        if not state.seqs.get(sub.context):
            sub.error = no_context(sub.context)
            return
        try:
            append(cur, q, plan, state.existing, state.inserted, 0, b"")
        except Refused as refused:
            sub.error = refused.error
        return
    highest = state.fences.get(sub.context, 0)
    if sub.fence < highest:  # before the version: retrying cannot help it
        sub.error = fenced(sub.context, sub.fence, highest)
        return
    current = state.seqs.get(sub.context, 0)
    if current != sub.expect:
        sub.error = StaleCommit(sub.expect, current)
        return
    try:
        if careful:
            write_one(cur, q, plan, prefix, current + 1, sub.erased)
        else:
            append(cur, q, plan, state.existing, state.inserted, current + 1, prefix)
    except Refused as refused:
        sub.error = refused.error
        sub.erased = []
        return
    state.seqs[sub.context] = sub.result = current + 1
    state.fences[sub.context] = max(highest, sub.fence)
    state.changed.add(sub.context)
    state.head += 1
    change = replace(sub.change, position=state.head, commit_seq=current + 1)
    state.feed.append((state.head, prefix, current + 1, pack_change(change)))


def record_changes(cur: psycopg.Cursor, q: Statements, state: BatchState,
                   prefixes: dict[str, bytes], channel: str) -> None:
    """The changed contexts' versions and tokens, the feed's new rows and head, and the
    notification other processes' followers wake at (delivered at COMMIT only)."""
    if not state.changed:
        return
    ordered = sorted(state.changed)
    cur.execute(q.put_contexts, ([prefixes[c] for c in ordered],
                                 [state.seqs[c] for c in ordered],
                                 [state.fences[c] for c in ordered]))
    cur.execute(q.put_feed, tuple(map(list, zip(*state.feed))))
    cur.execute(q.set_head, (state.head,))
    cur.execute(q.notify, (channel, str(state.head)))  # notify.py


def append(cur: psycopg.Cursor, q: Statements, plan: list, existing: set, inserted: set,
           commit_seq: int, prefix: bytes) -> None:
    """Queue a submission's statements, or refuse it (Refused) if it appends a row
    that exists (in the database, or appended by this batch or by itself)."""
    mine: set[tuple[str, bytes]] = set()
    for kind, table, rows in plan:
        if kind != "insert":
            continue
        for k, _ in rows:
            row = (table, k)
            if row in existing or row in inserted or row in mine:
                raise Refused(MorphzError("STORAGE_APPEND_ONLY",
                                           f"table {table} is append-only", table=table))
            mine.add(row)
    inserted |= mine
    for step in plan:
        run_step(cur, q, step, prefix, commit_seq)


def write_one(cur: psycopg.Cursor, q: Statements, plan: list, prefix: bytes,
              commit_seq: int, erased: Optional[list] = None) -> None:
    """One submission's writes, statement by statement, in a savepoint where any of
    them may be refused by the database (a row an append-only table has, a row to
    quarantine missing)."""
    risky = any(kind in ("insert", "aside", "erase") for kind, _, _ in plan)
    if not risky:
        for step in plan:
            run_step(cur, q, step, prefix, commit_seq)
        return
    cur.execute("SAVEPOINT sub")
    try:
        for step in plan:
            run_step(cur, q, step, prefix, commit_seq, erased)
    except Refused:
        cur.execute("ROLLBACK TO SAVEPOINT sub")
        raise
    except pg_errors.UniqueViolation as e:
        cur.execute("ROLLBACK TO SAVEPOINT sub")
        table = getattr(e.diag, "table_name", None) or "?"
        raise Refused(MorphzError("STORAGE_APPEND_ONLY", f"table {table} is append-only",
                                   table=table)) from None
    cur.execute("RELEASE SAVEPOINT sub")


def run_step(cur: psycopg.Cursor, q: Statements, step: tuple, prefix: bytes,
             commit_seq: int, erased: Optional[list] = None) -> None:
    kind, table, rows = step
    if kind == "upsert":
        cur.execute(q.upsert[table], ([k for k, _ in rows], [v for _, v in rows]))
    elif kind == "insert":
        cur.execute(q.insert[table], ([k for k, _ in rows], [v for _, v in rows]))
    elif kind == "delete":
        cur.execute(q.delete[table], ([k for k, _ in rows],))
    elif kind == "erase":  # the DELETE let through the append-only trigger, as aside's
        ks = [k for k, _ in rows]
        cur.execute("SELECT set_config('morphz.quarantine', 'on', true)")
        cur.execute(q.erase_delete[table], (ks,))
        gone = cur.fetchall()
        cur.execute("SELECT set_config('morphz.quarantine', 'off', true)")
        if len(gone) != len(set(ks)):
            raise Refused(erase_missing(Write(table, (), None)))
        if table == "events" and erased is not None:  # for the erasure log
            erased += [(keys.decode(bytes(k), len(prefix))[0],
                        hashlib.sha256(bytes(v)).hexdigest()) for k, v in gone]
        cur.execute(q.insert[table], (ks, [v for _, v in rows]))
    else:  # aside: the quarantine's DELETE is let through the append-only trigger
        ks = [k for k, _ in rows]
        cur.execute("SELECT set_config('morphz.quarantine', 'on', true)")
        aside = keys.encode_in(prefix, (commit_seq, table))
        cur.execute(q.move_aside[table], (ks, aside, len(prefix) + 1))
        moved = cur.rowcount
        cur.execute("SELECT set_config('morphz.quarantine', 'off', true)")
        if moved != len(ks):
            raise Refused(quarantine_missing(rows[0][1]))
