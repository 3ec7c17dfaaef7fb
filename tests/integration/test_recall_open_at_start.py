"""Recall opens each context's index at start, in the background (runtime/opener.py), so
the first search after a restart does not pay the open alone; a search that arrives
while its context is being opened waits for that open only, within its deadline.

- RECALL-10 (the index is kept in the background): a `morphz serve` process restarted
  over an existing store logs each context's index opened, with no request made.
- SEC-07 (work stops at its caller's deadline): a search of a context whose open is
  under way answers DEADLINE_EXCEEDED once its deadline passes, while a search of
  another context is served meanwhile, and answers once the open is done. In-process
  cores over a real LMDB store and real tantivy folders; the open under way is held by
  a gate in the IndexDirectory (a real open of seconds needs a corpus too large for a
  test), so the wait is bounded by the deadline alone, not by how long an open takes."""
from __future__ import annotations

import threading

import pytest

from morphz.services.recall.client import RecallClient
from morphz.services.recall.core.engine import RecallCore
from morphz.services.recall.core.request import SearchRequest
from morphz.services.recall.index.index_directory import IndexDirectory
from morphz.services.recall.runtime.indexer import Indexer
from morphz.services.recall.runtime.pins import SearchPins
from morphz.services.storage.lmdb import LmdbStore
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.auth import IN_PROCESS_CALLER as ME
from morphz.shared.deadline import Deadline
from morphz.shared.errors import MorphzError
from tests.polling import until
from tests.topology import ServerProcess

OPENED = "opened the recall index of "


def test_recall_10_a_restarted_server_opens_its_indexes_without_a_request(tmp_path):
    server = ServerProcess(tmp_path / "data").start()
    try:
        client = server.client(timeout=60)
        for name in ("kept", "other"):
            client.create_context(name)
            client.append_event(name, "s", "user-message", f"release notes of {name}")
        # Indexed (a search opens each index in this process, before the restart).
        channel = server.channel()
        recall = RecallClient(channel, timeout=60)
        for name in ("kept", "other"):
            until(lambda n=name: recall.search(n, "release")["results"], 60,
                  f"{name} indexed")
        channel.close()
    finally:
        server.kill()  # SIGKILL: as a crash would leave it
    before = len(server.stderr())
    server.start()  # the same data folder; nothing is asked of recall from now on
    try:
        def logged() -> str:
            return server.stderr()[before:]
        until(lambda: all(f"{OPENED}{name} (" in logged() for name in ("kept", "other")),
              120, "no open of kept and other logged (the server log: "
              f"{server.log_path})")
        line = next(x for x in logged().splitlines() if f"{OPENED}kept (" in x)
        assert "(2 documents," in line, line  # its creation and the note
        until(lambda: "opened the recall indexes of 2 contexts" in logged(), 120,
              "no summary line")
    finally:
        server.kill()


class GatedDirectory(IndexDirectory):
    """An IndexDirectory whose open of `gated` waits for `gate` (an open under way)."""

    def __init__(self, root: str, gated: str) -> None:
        super().__init__(root)
        self.gated, self.gate, self.entered = gated, threading.Event(), threading.Event()

    def _opened(self, context: str):
        if context == self.gated:
            self.entered.set()
            assert self.gate.wait(120), "the gate was never opened"
        return super()._opened(context)


@pytest.fixture
def store(tmp_path):
    s = LmdbStore(str(tmp_path / "store"), sync=False)
    yield s
    s.close()


def test_sec_07_a_search_waits_for_its_context_open_within_its_deadline(tmp_path, store):
    tx = TransactionCore(store)
    written = {}
    for name in ("slow", "quick"):
        tx.create_context(name, caller=ME)
        written[name] = tx.append_event(name, "s", "user-message", f"release notes of {name}",
                                        caller=ME).commit_seq
    indexes = GatedDirectory(str(tmp_path / "recall"), "slow")
    indexer = Indexer(store, indexes)
    core = RecallCore(store, tx, indexer, pins=SearchPins())
    opener = threading.Thread(target=indexes.get, args=("slow",), daemon=True)
    opener.start()  # an open under way (the opener's at start, or another request's)
    assert indexes.entered.wait(60)
    try:
        with pytest.raises(MorphzError) as e:
            core.search(SearchRequest.parse("slow", "release"),
                        caller=ME, deadline=Deadline.after(0.3))
        assert e.value.reason == "DEADLINE_EXCEEDED", e.value
        assert "open" in e.value.message, e.value.message
        # Another context is not held up by the open under way: its index is opened,
        # and its writes indexed, by this search.
        quick = core.search(SearchRequest.parse("quick", "release",
                                                min_commit_seq=written["quick"]),
                            caller=ME, deadline=Deadline.after(30))
        assert [h.ref for h in quick.results] == ["@e1"] and quick.unclosed_lag == 0
        # A caller that goes away stops waiting too.
        with pytest.raises(MorphzError) as e:
            core.search(SearchRequest.parse("slow", "release"),
                        caller=ME, deadline=Deadline.after(None, cancelled=lambda: True))
        assert e.value.reason == "CANCELLED", e.value
        assert indexer.is_open("slow") is False
    finally:
        indexes.gate.set()
    opener.join(60)
    found = core.search(SearchRequest.parse("slow", "release", min_commit_seq=written["slow"]),
                        caller=ME, deadline=Deadline.after(30))
    assert [h.ref for h in found.results] == ["@e1"]
