"""HYB-06: embedding never delays a commit, an append or a lexical search; the vector leg
reports its own lag; a rebuild with an unchanged embedder reuses the stored vectors.

The recall stack is put together as services/recall/wiring.py does (real LMDB store,
real tantivy index folder, the real feed follower, vector follower, vector cache and
embedding worker process), with an embedder of this test's own in place of the
server's: the hashing embedder, whose passages embedded in the worker process wait
until the test opens a gate (a file), and which writes how many texts each call took to
a counter file, so the test counts embedding across the process boundary. Queries are
embedded in this process, never gated. A crash case kills a real process (SIGKILL)
while it steps the vector leg.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager

import numpy as np
import pytest

from morphz.services.recall.core.passages import TYPICAL
from morphz.services.recall.core.engine import RecallCore
from morphz.services.recall.core.request import SearchRequest
from morphz.services.recall.runtime.pins import SearchPins
from morphz.services.recall.core.results import SearchResult
from morphz.services.recall.runtime.embedworkers import EmbedWorkers
from morphz.services.recall.runtime.follower import FeedFollower
from morphz.services.recall.runtime.indexer import Indexer
from morphz.services.recall.runtime.vectorfollow import VectorFollower
from morphz.services.recall.embedding.hashing import HashingEmbedder
from morphz.services.recall.index.index_directory import IndexDirectory
from morphz.services.recall.index.vector_cache import VectorCache
from morphz.services.storage.lmdb import LmdbStore
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.auth import IN_PROCESS_CALLER as ME

from tests.polling import until


class GatedEmbedder(HashingEmbedder):
    """Hashing vectors; in any process but the one that made it (the embedding worker),
    each call is counted in `<gate>/calls` and waits for `<gate>/open` to exist."""

    def __init__(self, gate: str) -> None:
        super().__init__(64)
        self.gate, self.home = gate, os.getpid()

    def embed_array(self, texts, **role):  # (a role, where the embedder API has one)
        if os.getpid() != self.home:
            with open(os.path.join(self.gate, "calls"), "a") as f:
                f.write(f"{len(texts)}\n")
            while not os.path.exists(os.path.join(self.gate, "open")):
                time.sleep(0.01)
        return super().embed_array(texts, **role)

    def fitted(self, corpus):
        return self


def embedded(gate: str) -> int:
    """Texts the worker was asked to embed so far."""
    try:
        with open(os.path.join(gate, "calls")) as f:
            return sum(int(n) for n in f.read().split())
    except FileNotFoundError:
        return 0


@contextmanager
def recall_stack(data, embedder):
    """(tx, indexer, core) wired as the server wires them."""
    store = LmdbStore(str(data / "store"), sync=False)
    tx = TransactionCore(store)
    root = str(data / "recall")
    indexes = IndexDirectory(root)
    cache = VectorCache(root)
    workers = EmbedWorkers(1)
    vectors = VectorFollower(indexes.contexts)
    indexer = Indexer(store, indexes, embedder=embedder, cache=cache, embed_workers=workers,
                      vectors_due=vectors.due)
    vectors.start(indexer.apply_vectors)
    follower = FeedFollower(store, indexer, indexes).start()
    core = RecallCore(store, tx, indexer, pins=SearchPins(), feed_status=follower.status,
                      catch_up=follower.catch_up)
    try:
        yield tx, indexer, core
    finally:
        follower.stop()
        workers.close()
        vectors.stop()
        cache.close()
        store.close()


def refs(reply: SearchResult) -> set[str]:
    return {h.ref for h in reply.results}


def test_hyb_06_commits_and_lexical_searches_go_on_while_the_vector_leg_waits(tmp_path):
    gate = str(tmp_path / "gate")
    os.makedirs(gate)
    with recall_stack(tmp_path, GatedEmbedder(gate)) as (tx, indexer, core):
        tx.create_context("c", caller=ME)
        first = [tx.append_event("c", "s1", "user-message", f"lantern note {i}",
                                 caller=ME).ref for i in range(5)]
        # The lexical leg catches up while the embedder is blocked in the worker.
        until(lambda: embedded(gate) > 0, what="the worker never began embedding")
        until(lambda: core.inspect("c", caller=ME).lag == 0)
        assert refs(core.search(SearchRequest.parse("c", "lantern"), caller=ME)) == set(first)
        # Appends (commits) and lexical searches complete while the embedder waits.
        started = time.monotonic()
        more = [tx.append_event("c", "s1", "user-message", "lantern moved to the shed",
                                caller=ME).ref for _ in range(3)]  # one text, thrice
        until(lambda: core.inspect("c", caller=ME).lag == 0)
        assert refs(core.search(SearchRequest.parse("c", "shed"), caller=ME)) == set(more)
        # The gate stays shut (it opens below): had anything waited for it, this would
        # have hung until `until` gave up; the bound is only a generous guard.
        assert time.monotonic() - started < 120
        st = core.inspect("c", caller=ME)
        assert st.lag == 0 and st.vectors.lag > 0
        assert st.vectors.position < st.position == st.head
        # A hybrid search answers (its lexical leg) and says the vector leg lags.
        reply = core.search(SearchRequest.parse("c", "lantern shed", mode="hybrid"), caller=ME)
        assert reply.vector_lag > 0 and reply.vector_position < reply.index_position
        assert set(more) <= refs(reply)
        assert core.search(SearchRequest.parse("c", "lantern", mode="lexical"),
                           caller=ME).vector_lag is None
        # Released, the vector leg catches up and reports no lag.
        open(os.path.join(gate, "open"), "w").close()
        until(lambda: core.inspect("c", caller=ME).vectors.lag == 0)
        st = core.inspect("c", caller=ME)
        assert st.vectors.count == st.documents == 5 + 3 + 1  # with the context's
        # (which says nothing: its row is zero, found by no search)
        reply = core.search(SearchRequest.parse("c", "lantern shed", mode="vector"), caller=ME)
        assert reply.vector_lag == 0 and set(more) <= refs(reply)
        # Each distinct text embedded once (core/passages.py): a turn's row mixes in the
        # vector of the turn before it, already embedded as that turn's own; the three
        # appends of one text are one; the context's creation has an empty text; the
        # typical texts once, for the first turn's row.
        assert embedded(gate) == 5 + 1 + 1 + len(TYPICAL)
        # A row of nothing said is found by no search (not the typical vector alone).
        assert "@e0" not in refs(core.search(SearchRequest.parse("c", "lantern shed",
                                                                 mode="vector"), caller=ME))


def test_hyb_06_a_rebuild_with_the_same_embedder_embeds_nothing_again(tmp_path):
    gate = str(tmp_path / "gate")
    os.makedirs(gate)
    open(os.path.join(gate, "open"), "w").close()
    with recall_stack(tmp_path, GatedEmbedder(gate)) as (tx, indexer, core):
        tx.create_context("c", caller=ME)
        for i in range(40):
            tx.append_event("c", "s1", "user-message", f"lantern note {i}", caller=ME)
        tx.commit("c", "(context-tx (base-version 0) (create f1 (note lantern frame)))",
                  caller=ME)
        until(lambda: core.inspect("c", caller=ME).vectors.lag == 0)
        before = core.inspect("c", caller=ME)
        calls = embedded(gate)
        # Distinct texts, each embedded once: every document's own (the context's
        # creation's empty one too), and the typical texts (core/passages.py).
        assert calls == before.documents + len(TYPICAL)
        ranked = core.search(SearchRequest.parse("c", "lantern note 7", mode="vector"),
                             caller=ME).results
        core.rebuild("c", caller=ME)
        until(lambda: core.inspect("c", caller=ME).vectors.lag == 0)
        after = core.inspect("c", caller=ME)
        assert embedded(gate) == calls  # the worker embedded no text again
        assert after.vectors.count == before.vectors.count
        assert after.vectors.cache_hits >= before.documents
        assert after.path != before.path  # a new generation, the cache outside it
        again = core.search(SearchRequest.parse("c", "lantern note 7", mode="vector"),
                            caller=ME).results
        assert [h.ref for h in again] == [h.ref for h in ranked]


_CRASH_CHILD = r"""
import sys
from morphz.services.recall.runtime.indexer import Indexer
from morphz.services.recall.embedding.hashing import HashingEmbedder
from morphz.services.recall.index.index_directory import IndexDirectory
from morphz.services.recall.index.vector_cache import VectorCache
from morphz.services.storage.lmdb import LmdbStore
store = LmdbStore(sys.argv[1], sync=False)
root = sys.argv[2]
indexer = Indexer(store, IndexDirectory(root), embedder=HashingEmbedder(64),
                  cache=VectorCache(root), vectors_due=lambda c: None)
while indexer.catch_up("c"):
    pass
print("lexical", flush=True)
while indexer.apply_vectors("c", step=7):
    pass
print("done", flush=True)
"""


def test_hyb_06_a_vector_leg_killed_mid_step_resumes_from_its_own_position(tmp_path):
    store_dir, root = str(tmp_path / "store"), str(tmp_path / "recall")
    store = LmdbStore(store_dir, sync=False)
    tx = TransactionCore(store)
    tx.create_context("c", caller=ME)
    for i in range(600):
        tx.append_event("c", "s1", "user-message", f"lantern note {i} of the shed",
                        caller=ME)
    store.close()
    child = subprocess.Popen([sys.executable, "-c", _CRASH_CHILD, store_dir, root],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "lexical"
        head_file = None
        # Killed once the leg has committed some steps (HEAD past version 0).
        def stepped() -> bool:
            nonlocal head_file
            for dirpath, _, files in os.walk(root):
                if "HEAD" in files and dirpath.endswith("vectors"):
                    head_file = os.path.join(dirpath, "HEAD")
                    with open(head_file) as f:
                        return '"position": 0' not in f.read()
            return False
        until(stepped, what="the vector leg never committed a step")
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait()
    store = LmdbStore(store_dir, sync=False)
    try:
        indexer = Indexer(store, IndexDirectory(root), embedder=HashingEmbedder(64),
                          cache=VectorCache(root))
        leg = indexer.index("c").vectors
        position = leg.position
        assert 0 < position <= indexer.position("c")
        # The leg holds exactly the events of the versions it names (the context's
        # creation is version 1 with event 0; each append one version, one event).
        assert leg.count == position
        assert sorted(int(k[2:]) for k in leg._rows) == list(range(position))
        while indexer.apply_vectors("c"):  # it goes on from there
            pass
        leg = indexer.index("c").vectors
        assert leg.position == indexer.position("c") and leg.count == 601
        hits = leg.search(HashingEmbedder(64).embed_array(["lantern note 599 of the shed"])[0],
                          1)
        assert hits[0].key == "e:600"
        assert np.isfinite(hits[0].score)
    finally:
        store.close()


def test_hyb_08_the_vector_leg_reports_its_pace_and_the_time_to_go_and_a_write_is_found(
        tmp_path):
    """HYB-08 in the same stack: the leg embeds in its worker processes (as many as the
    stack gave it), says how many documents a second its steps covered and, while it
    lags, the seconds the rest takes at that pace; a write is then found by meaning by a
    search that names it, within the search's bound. The gate makes the lag certain: a
    first burst is embedded (a pace), a second waits at the shut gate (a lag)."""
    gate = str(tmp_path / "gate")
    os.makedirs(gate)
    open(os.path.join(gate, "open"), "w").close()
    with recall_stack(tmp_path, GatedEmbedder(gate)) as (tx, indexer, core):
        tx.create_context("c", caller=ME)
        for i in range(30):
            tx.append_event("c", "s1", "user-message", f"crate {i} left the dock", caller=ME)
        until(lambda: core.inspect("c", caller=ME).vectors.lag == 0)
        caught = core.inspect("c", caller=ME).vectors
        assert caught.embed_workers == 1 and caught.documents_per_second > 0
        assert caught.eta_seconds == 0  # nothing to go
        os.remove(os.path.join(gate, "open"))
        calls = embedded(gate)
        for i in range(40):
            tx.append_event("c", "s2", "user-message", f"pallet {i} reached the yard", caller=ME)
        until(lambda: embedded(gate) > calls, what="the worker never took the second burst")
        until(lambda: core.inspect("c", caller=ME).lag == 0)
        lagging = core.inspect("c", caller=ME).vectors
        assert lagging.lag > 0 and lagging.documents_per_second > 0
        # The documents still to embed (the second burst) at the pace of the first.
        expected = 40 / lagging.documents_per_second
        assert lagging.eta_seconds == pytest.approx(max(expected, 0.1), rel=0.05, abs=0.1)
        open(os.path.join(gate, "open"), "w").close()
        written = tx.append_event("c", "s3", "user-message", "the ferry to the island leaves at six",
                                  caller=ME)
        reply = core.search(SearchRequest.parse("c", "ferry island", mode="hybrid",
                                                min_commit_seq=written.commit_seq), caller=ME)
        assert reply.vector_lag == 0  # the search reached the write in both legs
        hit = next(h for h in reply.results if h.ref == written.ref)
        assert hit.vector_rank >= 1
        assert core.inspect("c", caller=ME).vectors.eta_seconds == 0


def test_priv_03_an_erased_turn_leaves_no_vector_of_its_text_in_the_cache(tmp_path):
    """A turn's text is embedded once, as said (core/passages.py), and its vector mixed
    into the next turn's row. Erasing it takes that text's vector from the vector cache
    (the leg keeps each row's text digests: index/passage_marks.py) and keeps the others';
    the rebuild after the erasure makes the next turn's row again without it."""
    from morphz.services.recall.core.passages import said
    from morphz.services.recall.index.vector_cache import identity_key, text_key
    from morphz.services.transaction.core.erase_select import Selector
    gate = str(tmp_path / "gate")
    os.makedirs(gate)
    open(os.path.join(gate, "open"), "w").close()
    embedder = GatedEmbedder(gate)
    with recall_stack(tmp_path, embedder) as (tx, indexer, core):
        tx.create_context("c", caller=ME)
        texts = ["the crates left the dock", "my card number is 4111-PLANTED", "the van waits"]
        refs = [tx.append_event("c", "s1", "user-message", t, actor="mara", caller=ME).ref
                for t in texts]
        until(lambda: core.inspect("c", caller=ME).vectors.lag == 0)
        own = [said(t, "mara") for t in texts]
        held = [own[1]]  # the planted text
        kept = [own[0], own[2]]
        prefix = identity_key(embedder.identity.label())
        cache = indexer._vectors._cache

        def cached(text: str) -> bool:
            return cache.get_many(prefix, [text_key(text)])[0] is not None
        assert all(cached(t) for t in held + kept)
        before = embedded(gate)
        tx.erase("c", Selector(refs=(refs[1],)), "the user asked", caller=ME)
        until(lambda: core.inspect("c", caller=ME).erasure_pending == 0
              and core.inspect("c", caller=ME).vectors.lag == 0)
        assert not any(cached(t) for t in held), [t for t in held if cached(t)]
        assert all(cached(t) for t in kept)
        # The third turn's row was made again without it: the erased turn before it has
        # no text left to give it context.
        assert "PLANTED" not in core.read("c", refs[1], caller=ME).text
        # Nothing more was embedded: the third turn's text was in the cache, and the
        # erased turn and the erasure event have no text (its vector, zeros, was too).
        assert embedded(gate) == before
        found = core.search(SearchRequest.parse("c", "card number", mode="vector"),
                            caller=ME).results
        assert refs[1] not in {h.ref for h in found}
