"""OnnxEmbedder (services/recall/embedding/onnx_model.py) over a tiny model and
tokenizer this test builds itself: an embedding lookup, one vector per token."""
from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from morphz.services.recall.embedding.onnx_model import OnnxEmbedder

VOCAB = ["[PAD]", "[UNK]", "release", "paused", "legal", "launch", "hold",
         "发", "布", "暂", "停", "上", "线"]
DIM = 8


def _table(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((len(VOCAB), DIM)).astype(np.float32)


def _write_model(folder, seed: int = 1, token_types: bool = True) -> np.ndarray:
    table = _table(seed)
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])]
    if token_types:
        inputs.append(helper.make_tensor_value_info("token_type_ids", TensorProto.INT64,
                                                    ["batch", "seq"]))
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["last_hidden_state"])],
        "lookup", inputs,
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                       ["batch", "seq", DIM])],
        initializer=[numpy_helper.from_array(table, "table")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(folder / "model.onnx"))
    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(VOCAB)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True, handle_chinese_chars=True)
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    return table


def _expected(table: np.ndarray, tokens: list[str]) -> list[float]:
    v = table[[VOCAB.index(t) for t in tokens]].mean(axis=0)
    return list(v / np.linalg.norm(v))


@pytest.fixture
def model(tmp_path):
    return tmp_path, _write_model(tmp_path)


def test_onnx_embedder_mean_pools_token_vectors_and_normalizes(model):
    folder, table = model
    e = OnnxEmbedder(str(folder))
    assert e.identity.name == "onnx" and e.identity.dimension == DIM
    vectors = e.embed(["Release paused", "发布 暂停", "launch on hold 上线"])
    assert vectors[0] == pytest.approx(_expected(table, ["release", "paused"]), abs=1e-6)
    assert vectors[1] == pytest.approx(_expected(table, ["发", "布", "暂", "停"]), abs=1e-6)
    assert vectors[2] == pytest.approx(
        _expected(table, ["launch", "[UNK]", "hold", "上", "线"]), abs=1e-6)
    assert all(math.isclose(np.linalg.norm(v), 1.0, abs_tol=1e-6) for v in vectors)


def test_padding_in_a_batch_does_not_change_a_vector(model):
    folder, _ = model
    e = OnnxEmbedder(str(folder))
    alone = e.embed(["legal"])[0]
    batched = e.embed(["legal", "release paused until legal hold launch 发布暂停上线"])[0]
    assert batched == pytest.approx(alone, abs=1e-6)


def test_empty_text_gives_zeros(model):
    folder, _ = model
    e = OnnxEmbedder(str(folder))
    assert e.embed(["", "   "]) == [[0.0] * DIM, [0.0] * DIM]
    assert e.embed([]) == []


def test_identity_follows_the_model_files(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for folder, seed in ((a, 1), (b, 1), (c, 2)):
        folder.mkdir()
        _write_model(folder, seed)
    ia, ib, ic = (OnnxEmbedder(str(f)).identity for f in (a, b, c))
    assert ia == ib and ia.version != ic.version


def test_model_without_token_types_and_pretrained_state(tmp_path):
    table = _write_model(tmp_path, token_types=False)
    e = OnnxEmbedder(str(tmp_path))
    assert e.fitted(["any", "corpus"]) is e and e.state() == b"" and e.restore(b"") is e
    assert e.embed(["legal"])[0] == pytest.approx(_expected(table, ["legal"]), abs=1e-6)
    with pytest.raises(ValueError):
        e.restore(b"state of another embedder")


def test_missing_model_files_are_refused(tmp_path):
    with pytest.raises(FileNotFoundError):
        OnnxEmbedder(str(tmp_path))


def test_model_that_pools_itself_and_names_no_dimension(tmp_path):
    """A model whose output is one vector per text (here: the mean over all tokens),
    its width symbolic: the embedder asks the model for its dimension."""
    table = _write_model(tmp_path)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["tokens"]),
         helper.make_node("ReduceMean", ["tokens"], ["sentence_embedding"], axes=[1],
                          keepdims=0)],
        "pooled",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT,
                                       ["batch", "width"])],
        initializer=[numpy_helper.from_array(table, "table")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              str(tmp_path / "model.onnx"))
    e = OnnxEmbedder(str(tmp_path))
    assert e.identity.dimension == DIM
    assert e.embed(["release legal"])[0] == pytest.approx(
        _expected(table, ["release", "legal"]), abs=1e-6)


def test_serve_embedder_option_loads_an_onnx_model_or_refuses_it_clearly(model, tmp_path):
    from morphz.services.recall.wiring import embedder_for
    from morphz.shared.errors import MorphzError

    chosen = embedder_for(f"onnx:{model[0]}")
    assert chosen.identity.name == "onnx"
    for spec in (f"onnx:{tmp_path / 'nowhere'}", "onnx:", "bert", "hashing:x", "hashing:0",
                 "hashing:" + "9" * 5000):
        with pytest.raises(MorphzError) as info:
            embedder_for(spec)
        assert (info.value.reason, info.value.details["field"]) == \
            ("CONTEXT_INPUT_INVALID", "embedder"), spec
        assert len(info.value.message) < 500, spec  # a long spec is not echoed whole
