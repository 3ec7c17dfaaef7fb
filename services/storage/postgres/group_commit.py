"""The PostgreSQL store's group commit (store.py): commits are group-committed as
LMDB's. One leader applies every queued submission in one SQL transaction (one WAL
flush), each in its own savepoint so a refused one changes nothing and leaves its
neighbours be. The transaction first locks the `_store` row, so writers (of this process
or another pointed at the same database) take turns and feed positions have no gaps; the
fencing token and the version are checked in that same transaction. Nothing is
acknowledged before PostgreSQL's COMMIT returned. What each submission writes is planned
and run by writes.py; the writer's connection and its watchdog are writer_conn.py's.

Bounded waits. A commit carries its caller's deadline (`submit(timeout=)`; without one,
COMMIT_BOUND_SECONDS) and its batch runs under PostgreSQL's statement_timeout of the
latest deadline among its submissions, so a batch stuck on a lock or a slow database is
cancelled there, changing nothing (DEADLINE_EXCEEDED). A database that does not answer
at all is the watchdog's (writer_conn.py): the batch ends STORAGE_UNAVAILABLE (its
outcome unknown). A commit still queued behind a writer past its deadline leaves the
queue unapplied.
"""
from __future__ import annotations

import threading
import time
from contextlib import nullcontext
from typing import Optional

import psycopg
from psycopg import errors as pg_errors

from morphz.services.storage.postgres.errors import unavailable
from morphz.services.storage.postgres.plan import Submission, expected_seq
from morphz.services.storage.postgres import writes as pg_writes
from morphz.services.storage.postgres.writer_conn import SEVER_GRACE_SECONDS, WriterConnection
from morphz.shared.errors import MorphzError
from morphz.shared.process.faults import Faults
from morphz.shared.storage import keys
from morphz.shared.mind.tables import SIDE_TABLES, TABLES
from morphz.shared.storage.api import Ticket, Write
from morphz.shared.storage.feed import change_of
from morphz.shared.storage.rules import check_write

# The most a batch may send in one pipeline (its rows' keys and values); a larger one
# runs statement by statement: its round trips are small beside sending its data.
# (Pipelines of 1 MiB commit 5-7% faster than statement by statement at 200 KB a commit;
# what made large ones hang is writes.py send_all's.)
PIPELINE_MAX_BYTES = 1 << 20
# How long a commit without a deadline of its own may take (statement_timeout).
COMMIT_BOUND_SECONDS = 30.0


class GroupCommit(WriterConnection):
    """The write path of PostgresStore (store.py), which gives it its statements (`_q`),
    its identity (`_id`), its feed's channel and `_heard`, the space alarm and the
    erasure log."""

    def _init_group_commit(self, faults: Faults) -> None:
        self._faults = faults
        self._queue: list[Submission] = []
        self._queue_lock = threading.Lock()
        self._leader = threading.Lock()
        self.stats = {"write_transactions": 0, "commits": 0}

    def commit(self, context: str, expect_commit_seq: int, writes: list[Write], *,
               fence: int = 0) -> int:
        return self.wait(self.submit(context, expect_commit_seq, writes, fence=fence))

    def submit(self, context: str, expect_commit_seq: int, writes: list[Write], *,
               fence: int = 0, timeout: Optional[float] = None) -> Ticket:
        prefix = keys.context_prefix(context)
        for w in writes:  # bad tables and keys fail here, before anything is queued
            if w.table not in TABLES or w.table in SIDE_TABLES:
                keys.check_commit_table(w.table)
            check_write(w)
            keys.encode_in(prefix, w.key)
        bound = COMMIT_BOUND_SECONDS if timeout is None else max(0.0, timeout)
        sub = Submission(context, expect_commit_seq, writes,
                         change_of(0, context, 0, writes), fence,
                         until=time.monotonic() + bound, bounded=timeout is not None)
        with self._queue_lock:
            self._queue.append(sub)
        return sub

    def put_records(self, context: str, records: list[Write]) -> None:
        keys.check_side_records(records)
        prefix = keys.context_prefix(context)
        for w in records:
            keys.encode_in(prefix, w.key)
        sub = Submission(context, None, list(records),
                         until=time.monotonic() + COMMIT_BOUND_SECONDS)
        with self._queue_lock:
            self._queue.append(sub)
        self.wait(sub)

    def wait(self, ticket: Ticket) -> int:
        sub: Submission = ticket  # type: ignore[assignment]
        while not sub.done:  # leader/follower, as LmdbStore.wait
            left = sub.until - time.monotonic()
            if self._leader.acquire(timeout=min(1.0, left) if left > 0.01 else 0.5):
                try:
                    if sub.done:
                        break
                    with self._queue_lock:
                        batch, self._queue = self._queue, []
                    self._apply(batch)
                finally:
                    self._leader.release()
            elif time.monotonic() >= sub.until and self._withdraw(sub):
                break  # still queued behind a writer that outlived this one's bound
        return sub.get()

    def _withdraw(self, sub: Submission) -> bool:
        """Take `sub` out of the queue, unapplied, if no batch took it yet."""
        with self._queue_lock:
            if not any(queued is sub for queued in self._queue):
                return False  # in the batch being written: its writer reports how it ended
            self._queue = [queued for queued in self._queue if queued is not sub]
        sub.error = _bound_passed(sub, "waited for the store's writer")
        sub.done = True
        return True

    def _apply(self, batch: list[Submission]) -> None:
        severed = self._severed
        try:
            self._write_batch(batch)
        except pg_errors.QueryCanceled:  # statement_timeout: rolled back, nothing changed
            self._roll_back_writer()
            for sub in batch:
                if sub.error is None or sub.result is not None:
                    sub.result, sub.error = None, _bound_passed(sub, "ran in PostgreSQL")
        except pg_errors.DiskFull:
            self._drop_writer()
            self._refuse_all(batch, self.space.refuse("disk", 0, 0))
        except MorphzError as e:  # no connection: nothing was written
            self._refuse_all(batch, e)
        except psycopg.Error as e:  # lost, or refused: it may or may not have committed
            self._drop_writer()
            cause: BaseException = e
            if self._severed != severed:
                cause = psycopg.OperationalError(
                    f"no answer within {SEVER_GRACE_SECONDS:g} s past the commit's deadline "
                    "(stopped or unreachable): the connection was closed; the commit may "
                    "or may not have been applied")
            self._refuse_all(batch, unavailable(cause, "commit"))
        except BaseException as e:  # noqa: BLE001 - every waiter must wake up
            self._drop_writer()
            self._refuse_all(batch, e)
        finally:
            self._writer_until = None  # idle: nothing for the watchdog to sever
            for sub in batch:
                sub.done = True

    @staticmethod
    def _refuse_all(batch: list[Submission], err: BaseException) -> None:
        """The batch's transaction did not commit: every submission the store would have
        applied gets `err`; those refused for their own reason keep theirs."""
        for sub in batch:
            if sub.error is None or sub.result is not None:
                sub.result, sub.error = None, err

    def _begin(self, prefixes: list[bytes], appends: dict[str, set[bytes]],
               until: float) -> tuple:
        """Open the batch's transaction in one round trip: lock the feed head (writers take
        turns), then, read after it, the contexts' versions and tokens and which of the
        rows the batch appends exist already. (connection, head, {context: (commit_seq,
        fence)}, {(table, key) that exists}). A connection that died while idle (a
        restarted server) is replaced once: nothing had been applied on it. `until`: the
        batch's latest deadline (its statement_timeout; the watchdog's, a little later)."""
        reused = self._writer is not None and not self._writer.closed
        severed = self._severed
        try:
            return self._read_state(self._writer_conn(), prefixes, appends, until)
        except psycopg.OperationalError:
            self._drop_writer()
            if not reused or self._severed != severed:
                raise
        return self._read_state(self._writer_conn(), prefixes, appends, until)

    def _read_state(self, conn: psycopg.Connection, prefixes: list[bytes],
                    appends: dict[str, set[bytes]], until: float) -> tuple:
        q = self._q
        keyed = sum(map(len, prefixes)) + sum(len(k) for ks in appends.values() for k in ks)
        self._writer_until = until + SEVER_GRACE_SECONDS
        with conn.pipeline() if keyed <= PIPELINE_MAX_BYTES else nullcontext():
            # The batch's statements may take until its latest deadline (ms, local to it).
            conn.execute(q.statement_timeout,
                         (str(max(1, int((until - time.monotonic()) * 1000))),))
            lock = conn.cursor(binary=True).execute(q.lock_head)
            contexts = conn.cursor(binary=True).execute(q.contexts_of, (prefixes,))
            found = [(table, conn.cursor(binary=True).execute(q.existing[table], (list(ks),)))
                     for table, ks in appends.items()]
            pg_writes.send_all(conn)
        head = lock.fetchone()[0]
        state = {keys.decode(bytes(ctx))[0]: (seq, fence)
                 for ctx, seq, fence in contexts.fetchall()}
        existing = {(table, bytes(k)) for table, cur in found for k, in cur.fetchall()}
        return conn, head, state, existing

    def _write_batch(self, batch: list[Submission]) -> None:
        """One SQL transaction for the batch. Where no submission quarantines a row (the
        rule), every refusal is decided here from what _begin read, and the statements go
        in one pipeline (up to PIPELINE_MAX_BYTES): the batch costs about three round
        trips and one WAL flush.
        A quarantine's rows must exist when it runs, which only the database knows: such
        a batch runs statement by statement, each submission in a savepoint (writes.py)."""
        self._faults.hit("before-lmdb-txn")
        q = self._q
        prefixes = {sub.context: keys.context_prefix(sub.context) for sub in batch}
        plans, appends = pg_writes.plan_batch(batch, prefixes)
        careful = any(kind in ("aside", "erase") for plan in plans.values()
                      for kind, _, _ in plan)
        pipelined = not careful and \
            pg_writes.sent_bytes(plans.values()) <= PIPELINE_MAX_BYTES
        conn, head, read, existing = self._begin(list(prefixes.values()), appends,
                                                 max(sub.until for sub in batch))
        state = pg_writes.BatchState(head, {c: seq for c, (seq, _) in read.items()},
                                     {c: fence for c, (_, fence) in read.items()}, existing)
        try:
            with conn.pipeline() if pipelined else nullcontext(), \
                    conn.cursor(binary=True) as cur:
                for sub in sorted(batch, key=expected_seq):  # see LmdbStore._write_batch
                    plan = plans.get(id(sub))
                    if plan is not None:
                        pg_writes.write_submission(cur, q, sub, plan,
                                                   prefixes[sub.context], state, careful)
                pg_writes.record_changes(cur, q, state, prefixes, self._channel)
                logged = [(sub.context, sub.result, sub.erased) for sub in batch
                          if sub.erased and sub.result is not None]
                if logged and self.erasure_log is not None:  # before the commit: never an
                    self.erasure_log.append(self._id, logged)  # erasure the log lacks
                self._faults.hit("after-puts-before-commit")
                # COMMIT may wait for the synchronous standby: that wait is not cancelled
                # by the timeout (a cancelled one commits here alone, visible at once).
                cur.execute(q.statement_timeout, ("0",))
                if pipelined:
                    pg_writes.send_all(conn)
                self._writer_warnings.clear()
                conn.commit()  # acknowledged only once this returned
        except BaseException:
            if not conn.closed:
                try:
                    conn.rollback()
                except psycopg.Error:
                    self._drop_writer()
            raise
        self._committed(batch, state.head)

    def _committed(self, batch: list[Submission], head: int) -> None:
        """After the batch's COMMIT returned: acknowledged, unless PostgreSQL warned."""
        if self._writer_warnings:
            # A COMMIT whose wait for the synchronous standby was cancelled (an operator's
            # pg_cancel_backend, a timeout) returns with a WARNING: committed here, maybe
            # not on the standby, so a promotion could lose it. Not acknowledged: its
            # outcome is unknown, as with a lost connection (a retry finds it or not).
            raise MorphzError("STORAGE_UNAVAILABLE", "PostgreSQL committed without confirming "
                              "replication: " + self._writer_warnings[0][:200])
        self.space.committed(True)
        self._heard(head)  # durable now: followers may read it
        self.stats["write_transactions"] += 1
        self.stats["commits"] += sum(1 for sub in batch if sub.result is not None)


def _bound_passed(sub: Submission, doing: str) -> MorphzError:
    """The error of a submission refused unapplied because its bound passed while it
    `doing`: its caller's deadline (DEADLINE_EXCEEDED), or the store's own bound."""
    if sub.bounded:
        return MorphzError("DEADLINE_EXCEEDED", f"the commit {doing} past the call's "
                           "deadline; nothing was changed")
    return MorphzError("STORAGE_UNAVAILABLE", f"the commit {doing} for more than "
                       f"{COMMIT_BOUND_SECONDS:g} s; nothing was changed")
