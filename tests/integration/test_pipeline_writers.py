"""DIST-05: a transaction core sharing a context with another writer (a remote core beside
the all-in-one server's own, both unfenced) never lands a commit on a version it was not
computed on, however its pipelined commits and the other writer's interleave.

The interleaving that broke it (test_remote_reads saw `revision` one above the frames
under load): commit B computed over commit A still in flight; the other writer takes
A's version, so A is refused as stale; B expects the version after A's, which the
other writer's commit made, and used to land there, its meta counting A's transaction
that never committed. HeldStore makes that interleaving happen every time: a real LMDB
store whose commits from this core reach it only when the test releases them."""
from __future__ import annotations

import threading

from morphz.services.storage.lmdb import LmdbStore
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.auth import IN_PROCESS_CALLER as ME
from morphz.shared.mind import records as R
from morphz.shared.mind.state import MindState
from morphz.shared.storage.api import Store, Ticket


class _Held(Ticket):
    def __init__(self, args: tuple) -> None:
        super().__init__()
        self.args = args
        self.sent = threading.Event()
        self.waits = 0  # callers of HeldStore.wait on it


class HeldStore(Store):
    """The store, with submitted commits held (in order) while `holding`."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.holding = False
        self.held: list[_Held] = []
        self.changed = threading.Condition()

    def reader(self, context):
        return self._store.reader(context)

    def commit(self, context, expect_commit_seq, writes, *, fence=0):
        return self.wait(self.submit(context, expect_commit_seq, writes, fence=fence))

    def submit(self, context, expect_commit_seq, writes, *, fence=0, timeout=None):
        with self.changed:
            if not self.holding:
                return self._store.submit(context, expect_commit_seq, writes, fence=fence,
                                          timeout=timeout)
            ticket = _Held((context, expect_commit_seq, writes, fence))
            self.held.append(ticket)
            self.changed.notify_all()
            return ticket

    def wait(self, ticket):
        if not isinstance(ticket, _Held):
            return self._store.wait(ticket)
        with self.changed:
            ticket.waits += 1
            self.changed.notify_all()
        assert ticket.sent.wait(60), "the test never released its commit"
        return ticket.get()

    def release(self) -> None:
        """Send the held commits in the order they were submitted; hold no more."""
        with self.changed:
            self.holding, held = False, self.held
        for ticket in held:
            context, expect, writes, fence = ticket.args
            try:
                ticket.result = self._store.commit(context, expect, writes, fence=fence)
            except Exception as e:  # noqa: BLE001 - the waiter raises it
                ticket.error = e
            ticket.sent.set()

    def put_records(self, context, records):
        return self._store.put_records(context, records)

    def contexts(self):
        return self._store.contexts()

    def changes(self, after, limit=1000, context=""):
        return self._store.changes(after, limit, context)

    def feed_head(self):
        return self._store.feed_head()

    def wait_changes(self, after, timeout):
        return self._store.wait_changes(after, timeout)


def _create(name: str) -> str:
    return f"(context-tx (base-version 0) (create {name} (n 1)))"


def test_dist_05_a_pipelined_commit_never_lands_on_another_writers_version(tmp_path):
    store = LmdbStore(str(tmp_path / "store"))
    held = HeldStore(store)
    mine, other = TransactionCore(held), TransactionCore(store)  # neither fenced
    other.create_context("c", caller=ME)
    errors: list[BaseException] = []

    def commit(name: str) -> None:
        try:
            mine.commit("c", _create(name), caller=ME)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    held.holding = True
    first = threading.Thread(target=commit, args=("a",))
    second = threading.Thread(target=commit, args=("b",))
    try:
        first.start()
        with held.changed:
            assert held.changed.wait_for(lambda: len(held.held) == 1, timeout=60)
        second.start()
        # B is computed over A in flight (and held), or waits for A to settle.
        with held.changed:
            assert held.changed.wait_for(
                lambda: len(held.held) == 2 or held.held[0].waits == 2, timeout=60)
        # The other writer takes the version A expects to make.
        other.append_event("c", "s1", "user-message", "between", caller=ME)
    finally:
        held.release()
        first.join(60)
        second.join(60)
    try:
        assert errors == []
        with store.reader("c") as r:
            m = MindState(r)
            meta = m.require_meta("c")
            txs = [e for e in m.events() if e.kind == R.CONTEXT_TX]
            frames = sorted(f.id for f in m.frames())
            assert frames == ["a", "b"]
            assert meta.revision == len(txs) == 2  # no transaction counted that never was
            assert [e.seq for e in m.events()] == list(range(meta.next_seq))
        assert mine.audit("c", caller=ME).match
    finally:
        store.close()
