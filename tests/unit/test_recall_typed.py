"""RecallCore speaks in typed values (issue 41): its entry points return frozen results and
take no bare dict; recall/core holds no thread, process or file of its own; a search is
checked once (SearchRequest); the fusion reads any Leg; and a recall observation records
a reply exactly as the dict replies did (its JSON text is stored). The cores run
in-process on real LMDB and a real tantivy index."""
from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import pathlib
import typing

import pytest

from morphz.services.recall.core import hybrid
from morphz.services.recall.core.engine import RecallCore
from morphz.services.recall.runtime.pins import SearchPins
from morphz.services.recall.core.request import Evaluation, SearchRequest
from morphz.services.recall.core.results import RebuildProgress
from morphz.services.recall.index.index_directory import IndexDirectory
from morphz.services.recall.index.tantivy_index import ContextIndex
from morphz.services.recall.index.vector_cache import CacheStats
from morphz.services.recall.runtime.indexer import Indexer
from morphz.services.storage.lmdb import LmdbStore
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.auth import IN_PROCESS_CALLER as ME
from morphz.shared.errors import MorphzError

CORE = pathlib.Path(__file__).resolve().parents[2] / "services" / "recall" / "core"
ENTRY_POINTS = ("search", "read", "traverse", "inspect", "rebuild")  # each with a reply
CHECKS = ("may_rebuild",)  # raises or returns None
# What a module of recall/core may not import: it holds no thread, process or file.
RUNTIME_MODULES = {"threading", "multiprocessing", "subprocess", "concurrent", "os",
                   "shutil", "tempfile", "fcntl", "mmap", "pickle", "socket"}


def test_recall_core_entry_points_return_frozen_values_and_take_no_dict():
    public = [n for n, f in inspect.getmembers(RecallCore, inspect.isfunction)
              if not n.startswith("_")]
    assert sorted(public) == sorted(ENTRY_POINTS + CHECKS)
    for name in ENTRY_POINTS + CHECKS:
        hints = typing.get_type_hints(getattr(RecallCore, name))
        result = hints.pop("return")
        assert result is type(None) if name in CHECKS else \
            dataclasses.is_dataclass(result) and result.__dataclass_params__.frozen, name
        for param, hint in hints.items():
            assert dict not in (hint, typing.get_origin(hint), *typing.get_args(hint)), \
                f"{name}({param}) takes a dict"


def test_recall_core_modules_hold_no_threads_processes_or_files():
    for path in sorted(CORE.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "open":
                raise AssertionError(f"{path.name} opens a file")
            else:
                continue
            for name in names:
                assert name.split(".")[0] not in RUNTIME_MODULES, f"{path.name}: {name}"


@pytest.mark.parametrize("kwargs, reason", [
    ({"mode": "fuzzy"}, "RECALL_MODE_INVALID"),
    ({"query": "x" * 5000}, "RECALL_QUERY_INVALID"),
    ({"query": ""}, "RECALL_QUERY_INVALID"),
    ({"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"},
     "RECALL_TIME_INVALID"),
    ({"limit": 101}, "RECALL_LIMIT_INVALID"),
    ({"kinds": ["note"]}, "RECALL_FILTER_INVALID"),
])
def test_recall_03_a_search_request_is_checked_once_with_the_tables_reasons(kwargs, reason):
    args = {"query": "lantern", **kwargs}
    with pytest.raises(MorphzError) as info:
        SearchRequest.parse("c", args.pop("query"), **args)
    assert info.value.reason == reason


def test_recall_03_a_search_requests_cursor_binds_what_the_dict_params_bound():
    req = SearchRequest.parse("c", "Lantern shed", limit=5, kinds=["frame", "event"],
                              sessions=["s2", "s1", "s2"])
    assert req.mode == "hybrid" and req.asked_mode == "" and req.limit == 5
    assert req.cursor_params("s1") == {
        "op": "search", "context": "c", "terms": ["lantern", "shed"], "since": None,
        "until": None, "limit": 5, "kinds": ["event", "frame"], "states": [],
        "sessions": ["s1", "s2"], "viewer": "s1", "mode": "hybrid"}
    assert "mode" not in SearchRequest.parse("c", "x", mode="lexical").cursor_params(None)


class _Listed:
    """A leg over a fixed list (the fusion reads legs through the Leg protocol only)."""

    def __init__(self, keys: list[str]) -> None:
        self._hits = [hybrid.RankedHit(k, 10.0 - i) for i, k in enumerate(keys)]

    def hits(self, offset: int, count: int) -> list:
        return self._hits[offset:offset + count]

    def empty_reason(self) -> str:
        return "no_match" if self._hits else "empty_index"


def test_hyb_01_the_fusion_reads_any_leg_and_says_each_hits_rank_in_each():
    ranking = hybrid.fused_ranking(_Listed(["e:1", "e:2"]), _Listed(["e:2", "f:x"]),
                                   idf_total=0.0)
    ranks = {h.key: (h.lexical_rank, h.vector_rank) for h in ranking.ranked}
    assert ranks == {"e:1": (1, 0), "e:2": (2, 1), "f:x": (0, 2)}
    assert ranking.ranked[0].key == "e:2" and not ranking.lexical_continues
    assert [h.vector_rank for h in hybrid.vector_ranking(_Listed(["f:x"])).ranked] == [1]


@pytest.fixture
def cores(tmp_path):
    store = LmdbStore(str(tmp_path / "store"), sync=False)
    tx = TransactionCore(store)
    indexer = Indexer(store, IndexDirectory(str(tmp_path / "recall")))
    yield tx, indexer, RecallCore(store, tx, indexer, pins=SearchPins())
    store.close()


def _recorded(tx, ref: str) -> dict:
    return json.loads(tx.get_event("c", ref, caller=ME).text)


def test_recall_09_an_observation_records_each_reply_as_the_dict_replies_did(cores):
    tx, indexer, recall = cores
    tx.create_context("c", caller=ME)
    note = tx.append_event("c", "s1", "user-message", "lantern in the shed", caller=ME)
    tx.commit("c", "(context-tx (base-version 0) (create a (goal \"a\")) "
              f"(derive b (from a {note.ref}) (goal \"b\")))", caller=ME)
    while indexer.catch_up("c"):
        pass

    def evaluation() -> Evaluation:
        return Evaluation("s1", tx.activate("c", "s1", caller=ME).id)
    read = recall.read("c", note.ref, evaluation=evaluation(), caller=ME)
    assert read.observation_ref
    assert list(_recorded(tx, read.observation_ref)["reply"]) == [
        "kind", "ref", "id", "state", "time", "session", "event_kind", "revision",
        "occurred_at", "offset", "text", "total_chars", "next_offset", "has_more"]
    frame = recall.read("c", "a", evaluation=evaluation(), caller=ME)
    assert "occurred_at" not in _recorded(tx, frame.observation_ref)["reply"]  # an event's
    found = recall.search(SearchRequest.parse("c", "lantern", mode="lexical",
                                              evaluation=evaluation()), caller=ME)
    reply = _recorded(tx, found.observation_ref)["reply"]
    assert list(reply) == ["results", "next_cursor", "index_position", "lag",
                           "unclosed_lag", "empty"]  # no vector leg in a lexical search
    assert reply["results"][0]["ref"] == note.ref and "vector_rank" not in \
        reply["results"][0]
    walk = recall.traverse("c", "b", evaluation=evaluation(), caller=ME)
    reply = _recorded(tx, walk.observation_ref)["reply"]
    assert reply["edges"][0] == {"kind": "source", "from": "b", "to": "a", "name": "sources"}
    assert reply["nodes"][0]["sources"] == ["a", note.ref]
    assert recall.read("c", note.ref, caller=ME).observation_ref == ""  # none recorded


# Port -> what RecallCore reads of the index upkeep: each a frozen value (issue 56), no dict.
PORT_RESULTS = ("vector_status", "progress", "cache_stats", "rebuild")


def test_recall_index_port_results_are_frozen_values_and_the_indexer_gives_them():
    from morphz.services.recall.core.ports import Indexes

    for name in PORT_RESULTS:
        declared = typing.get_type_hints(getattr(Indexes, name))["return"]
        assert dataclasses.is_dataclass(declared) and declared.__dataclass_params__.frozen, name
        assert typing.get_type_hints(getattr(Indexer, name))["return"] is declared, name


def test_recall_index_port_results_as_the_indexer_answers(tmp_path):
    store = LmdbStore(str(tmp_path / "store"), sync=False)
    try:
        tx = TransactionCore(store)
        tx.create_context("c", caller=ME)
        tx.append_event("c", "s1", "user-message", "lantern", caller=ME)
        indexer = Indexer(store, IndexDirectory(str(tmp_path / "recall")))
        indexer.catch_up("c")
        head = store.changes(0, context="c").changes[-1].commit_seq
        assert indexer.vector_status("c", head + 2).lag == 2  # (the leg is at head)
        assert indexer.vector_status("c", head).position == head
        assert indexer.progress("c") == RebuildProgress(False, 0, 0)
        counts = ContextIndex.counts(indexer.index("c").snapshot()[0])
        info = indexer.rebuild("c")  # the documents the feed's application wrote, again
        assert info.documents == counts["events"] + counts["frames"] >= 1
        assert info.duration_ms >= 0 and info.at
        assert not indexer.progress("c").running
        assert indexer.cache_stats() == CacheStats()  # (this indexer keeps no cache)
    finally:
        store.close()
