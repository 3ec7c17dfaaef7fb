"""The vector leg's storage (HYB-02: its fingerprint and consistency with the lexical
commit) and the hashing embedder, on real index directories."""
from __future__ import annotations

import subprocess
import sys

import numpy as np

from morphz.services.recall.embedding.hashing import HashingEmbedder
from morphz.services.recall.index.tantivy_docs import Doc
from morphz.services.recall.index.tantivy_index import ContextIndex
from morphz.services.recall.index.vector_index import VecDoc, VectorLeg, quantized


def test_hashing_embedder_is_unit_length_deterministic_and_pretrained():
    e = HashingEmbedder(128)
    v = e.embed_array(["the launch is on hold", "launching soon", "", "沙箱权限"])
    assert v.shape == (4, 128) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v[[0, 1, 3]], axis=1), 1.0) and not v[2].any()
    assert float(v[0] @ v[1]) > float(v[0] @ v[3])  # shared trigrams count
    assert e.fitted(["anything"]) is e and e.state() == b"" and e.restore(b"") is e
    assert e.identity.label() == "hashing@1/128"
    # Another process (another hash salt for str) gives the very same vector.
    code = ("from morphz.services.recall.embedding.hashing import HashingEmbedder;"
            "import sys; sys.stdout.write(HashingEmbedder(128).embed_array("
            "['the launch is on hold'])[0].tobytes().hex())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert bytes.fromhex(out) == v[0].tobytes()


def _leg_docs(e: HashingEmbedder, texts: list[str], start: int = 0):
    docs = [VecDoc(f"e:{start + i}", "s1", 1000 + i) for i in range(len(texts))]
    return docs, e.embed_array(texts)


def test_hyb_02_vectors_past_the_last_lexical_commit_are_cut_off_on_restart(tmp_path):
    e = HashingEmbedder(64)
    idx = ContextIndex(str(tmp_path / "g1"))
    leg = idx.vectors
    leg.start(e.identity.label(), 64, 1, b"", 0)
    docs, vecs = _leg_docs(e, ["launch on hold", "weather report"])
    leg.append(docs, vecs)
    idx.apply([Doc(d.key, "event", "x", d.time_us) for d in docs], {"position": 1})
    committed = leg.commit(1)["digest"]
    # A crash after the vectors of the next step were written, before the leg's commit.
    more, more_vecs = _leg_docs(e, ["launching tomorrow"], start=2)
    leg.append(more, more_vecs, deletes=["e:0"])
    again = ContextIndex(str(tmp_path / "g1"))
    assert again.vectors.meta["digest"] == committed and again.vectors.count == 2
    assert again.vectors.position == 1
    hits = again.vectors.search(e.embed_array(["launch"])[0], 10)
    assert [h.key for h in hits][0] == "e:0"  # the uncommitted delete never happened
    assert "e:2" not in [h.key for h in hits]


def test_hyb_02_fingerprint_follows_the_content_and_search_filters(tmp_path):
    e = HashingEmbedder(64)

    def built(path) -> VectorLeg:
        leg = VectorLeg(str(path), None)
        leg.start(e.identity.label(), 64, 1, b"", 0)
        docs, vecs = _leg_docs(e, ["launch on hold", "hold the door", "launch pad"])
        leg.append(docs, vecs)
        return leg
    a, b = built(tmp_path / "a"), built(tmp_path / "b")
    assert a.meta["digest"] == b.meta["digest"]
    docs, vecs = _leg_docs(e, ["something else"], start=3)
    b.append(docs, vecs)
    assert a.meta["digest"] != b.meta["digest"]
    q = e.embed_array(["launch"])[0]
    assert sorted(h.key for h in a.search(q, 10)[:2]) == ["e:0", "e:2"]
    assert [h.key for h in a.search(q, 10, since_us=1002)] == ["e:2"]
    assert a.search(q, 10, sessions=["s2"]) == [] and a.search(q, 10, kinds=["frame"]) == []


class _Learning(HashingEmbedder):
    """A stand-in for an embedder learned from the context's text: its state names the
    corpus it was fitted on, so a refit shows."""

    def __init__(self, seen: int = -1) -> None:
        super().__init__(64)
        self.seen = seen

    def fitted(self, corpus):
        return _Learning(len(corpus))

    def state(self) -> bytes:
        return str(self.seen).encode()

    def restore(self, state: bytes):
        return _Learning(int(state))


def test_hyb_02_a_learned_leg_is_refitted_when_it_has_doubled(tmp_path, monkeypatch):
    from morphz.services.recall.runtime import vector_upkeep
    from morphz.services.recall.runtime.indexer import Indexer
    from morphz.services.recall.index.index_directory import IndexDirectory
    from morphz.services.storage.lmdb import LmdbStore
    from morphz.services.transaction.core.engine import TransactionCore
    from morphz.shared.auth import IN_PROCESS_CALLER as ME

    monkeypatch.setattr(vector_upkeep, "REFIT_MIN", 8)
    monkeypatch.setattr(vector_upkeep, "FIT_SAMPLE", 4)  # a fit sees a sample only
    store = LmdbStore(str(tmp_path / "store"), sync=False)
    try:
        core = TransactionCore(store)
        core.create_context("c", caller=ME)
        indexer = Indexer(store, IndexDirectory(str(tmp_path / "recall")), embedder=_Learning())
        indexer.catch_up("c")
        fits = []
        for i in range(40):
            core.append_event("c", "s1", "tool-result", f"launch note {i}", caller=ME)
            before = indexer.index("c").vectors
            count_before, fitted_before = before.count, before.meta.get("fitted_at")
            indexer.catch_up("c")
            leg = indexer.index("c").vectors
            if fitted_before is not None and leg.meta["fitted_at"] != fitted_before:
                # A refit fills a leg of its own: the one searches used was never emptied.
                assert leg is not before and before.count == count_before
            fits.append(leg.meta["fitted_at"])
            assert leg.meta["fit_count"] <= 8  # what the fit saw: a sample (4 and a rest)
            assert leg.count == i + 2  # every event, the refits' included, exactly once
        # Fitted on the first commit's text, then again at 8, 16, 32 documents: the leg's
        # size at its fit sets the next one, not the sample's.
        assert sorted(set(fits)) == [1, 8, 16, 32]
        seen = indexer.leg_embedder("c", leg).seen
        assert seen == leg.meta["fit_count"] < 32
        # A restart embeds queries with the fit stored beside the vectors.
        again = Indexer(store, IndexDirectory(str(tmp_path / "recall")), embedder=_Learning())
        assert again.leg_embedder("c", again.index("c").vectors).seen == seen
    finally:
        store.close()


def test_hyb_02_a_large_leg_is_searched_through_a_deterministic_partition(tmp_path,
                                                                          monkeypatch):
    from morphz.services.recall.index import coarse, vector_index
    monkeypatch.setattr(vector_index, "IVF_MIN", 400)
    monkeypatch.setattr(coarse, "NLIST", 16)
    monkeypatch.setattr(coarse, "NPROBE", 4)
    e = HashingEmbedder(64)
    texts = [f"note {i} about {['launch', 'weather', 'build', 'payment'][i % 4]} {i * 7}"
             for i in range(600)]

    def built(path) -> VectorLeg:
        leg = VectorLeg(str(path), None)
        leg.start(e.identity.label(), 64, 1, b"", 0)
        docs, vecs = _leg_docs(e, texts)
        leg.append(docs[:300], vecs[:300])
        leg.append(docs[300:], vecs[300:])  # past IVF_MIN: partitioned
        return leg
    a, b = built(tmp_path / "a"), built(tmp_path / "b")
    assert a._ivf is not None and len(a._ivf.bounds) == 16 + 1
    _, vecs = _leg_docs(e, texts)  # laid out list by list, each row keeps its vector
    assert not np.array_equal(a._pos[:600], np.arange(600))
    q, scale = quantized(vecs)  # kept as int8 with a scale per vector
    assert np.array_equal(a._matrix[a._pos[:600]], q)
    assert np.array_equal(a._scale[a._pos[:600]], scale)
    q = e.embed_array(["note 123 about launch"])[0]
    assert a.search(q, 20) == b.search(q, 20)  # the same vectors, the same answer
    for i in (5, 123, 444):  # a row's own vector finds it first
        assert a.search(e.embed_array([texts[i]])[0], 1)[0].key == f"e:{i}"
    # Rows added or changed after the partition are scored exactly.
    late, late_vecs = _leg_docs(e, ["a completely new launch note"], start=600)
    a.append(late, late_vecs)
    assert a.search(late_vecs[0], 1)[0].key == "e:600"
    moved, moved_vecs = _leg_docs(e, ["payment refused twice"], start=7)
    a.append(moved, moved_vecs)
    assert a.search(moved_vecs[0], 1)[0].key == "e:7"
    # A restart rebuilds the same partition from the log.
    again = VectorLeg(str(tmp_path / "b"), b.meta)
    assert again.search(q, 20) == b.search(q, 20)


def test_hyb_06_an_older_index_whose_lexical_commit_names_the_leg_gets_its_own_head(tmp_path):
    """Indexes written before the leg kept its own position name it in the tantivy
    commit: opened, the leg stays at that position and gets a HEAD of its own."""
    e = HashingEmbedder(64)
    idx = ContextIndex(str(tmp_path / "g1"))
    leg = idx.vectors
    leg.start(e.identity.label(), 64, 1, b"", 0)
    docs, vecs = _leg_docs(e, ["launch on hold", "weather report"])
    meta = leg.append(docs, vecs)
    idx.apply([Doc(d.key, "event", "x", d.time_us) for d in docs],
              {"position": 3, "vectors": meta})  # as the older indexer wrote it
    assert not leg.has_head()
    again = ContextIndex(str(tmp_path / "g1"))
    assert again.vectors.has_head() and again.vectors.position == 3
    assert again.vectors.count == 2 and again.vectors.meta["digest"] == meta["digest"]
