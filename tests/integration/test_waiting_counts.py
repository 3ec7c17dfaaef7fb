"""Waiting inputs are counted by the reducer (issue 58): a context's status and an
encoding's list of sessions read one row per session for how many inputs wait in it
and how many of those are messages, not every waiting input (before: 78-83 ms of server
CPU for a status at 20,000 undelivered inputs, an imported history). The counts follow
appends, messages, late tool results and claims, and replay to the same rows (audit)."""
from __future__ import annotations

from morphz.services.encoding.core.engine import EncodingCore
from morphz.services.storage.lmdb import LmdbStore
from morphz.services.transaction.core.engine import TransactionCore
from morphz.services.transaction.core.requests import AppendItem
from morphz.shared.auth import IN_PROCESS_CALLER as ME
from morphz.shared.storage.api import Reader, Store

INPUTS, MESSAGES = 2_000, 30


class _Reader(Reader):
    """Counts the rows read, by table."""

    def __init__(self, inner: Reader, rows: dict) -> None:
        self._inner, self._rows = inner, rows
        self.commit_seq = inner.commit_seq

    def _note(self, table: str, n: int) -> None:
        self._rows[table] = self._rows.get(table, 0) + n

    def get(self, table, key):
        self._note(table, 1)
        return self._inner.get(table, key)

    def get_many(self, table, keys):
        self._note(table, len(keys))
        return self._inner.get_many(table, keys)

    def scan(self, table, prefix=(), after=None, limit=0, reverse=False):
        rows = list(self._inner.scan(table, prefix, after, limit, reverse))
        self._note(table, len(rows))
        return iter(rows)

    def close(self) -> None:
        self._inner.close()


class _Store(Store):
    def __init__(self, inner: Store) -> None:
        self.inner, self.rows = inner, {}

    def reader(self, context):
        return _Reader(self.inner.reader(context), self.rows)

    def commit(self, *a, **kw):
        return self.inner.commit(*a, **kw)

    def submit(self, *a, **kw):
        return self.inner.submit(*a, **kw)

    def wait(self, ticket):
        return self.inner.wait(ticket)

    def put_records(self, *a, **kw):
        return self.inner.put_records(*a, **kw)

    def contexts(self):
        return self.inner.contexts()

    def changes(self, *a, **kw):
        return self.inner.changes(*a, **kw)

    def wait_changes(self, *a, **kw):
        return self.inner.wait_changes(*a, **kw)

    def feed_head(self):
        return self.inner.feed_head()


def _sessions(status) -> dict:
    return {s.id: (s.pending, s.messages_waiting) for s in status.sessions}


def test_status_and_encoding_read_waiting_counts_not_every_waiting_input(tmp_path):
    lmdb = LmdbStore(str(tmp_path / "store"), map_size=1 << 30, sync=False)
    store = _Store(lmdb)
    tx = TransactionCore(store)
    enc = EncodingCore(store, tx)
    try:
        tx.create_context("c", caller=ME)
        tx.append_event("c", "t", "user-message", "the other session", caller=ME)
        for start in range(0, INPUTS, 500):  # an imported history, never delivered
            tx.append_events("c", [AppendItem("s", "user-message", f"turn {i}")
                                   for i in range(start, start + 500)], caller=ME)
        for i in range(MESSAGES):
            tx.append_event("c", "t", "message", f"note {i}", target_session="s",
                            caller=ME)
        store.rows.clear()
        status = tx.status("c", caller=ME)
        assert _sessions(status) == {"s": (INPUTS + MESSAGES, MESSAGES), "t": (1, 0)}
        read = dict(store.rows)
        assert sum(read.values()) < 40, read  # before: every waiting input and its event
        assert read.get("pending", 0) == 0 and read.get("events", 0) == 0, read

        # An encoding of session t lists s's waiting messages from its count.
        store.rows.clear()
        compiled = enc.compile("c", "t", caller=ME)
        assert f"(messages-waiting {MESSAGES})" in compiled.text
        assert store.rows.get("pending", 0) <= 2, store.rows  # t's own pending input

        # Claims take the counts down; the reducer's counts replay to the same rows.
        tx.activate("c", "s", caller=ME)
        tx.append_event("c", "t", "message", "one more", target_session="s", caller=ME)
        assert _sessions(tx.status("c", caller=ME)) == {"s": (1, 1), "t": (0, 0)}
        assert tx.audit("c", caller=ME).match
    finally:
        lmdb.close()
