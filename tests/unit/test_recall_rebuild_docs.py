"""RECALL-10 rebuild path: documents made in worker processes from the stored JSON
(as doc_json strings) index exactly like the Docs the incremental path makes."""
from __future__ import annotations

import json
from dataclasses import asdict

from morphz.services.recall.core import tokenpool
from morphz.services.recall.core.documents import event_doc, raw_event_doc
from morphz.services.recall.core.timeparse import event_time_us
from morphz.services.recall.index.tantivy_index import ContextIndex, Query, doc_json
from morphz.shared.mind import records as R
from morphz.shared.text.analyze import query_terms

TEXTS = ["部署到 cn-hangzhou 时沙箱权限配置失败", "regression suite: 120 passed, 0 failed",
         "see @e42 and v1.2.3", "沙箱 ok", "", "Ｆｕｌｌ width ＳＡＮＤＢＯＸ"]


def _events(n: int) -> list[R.Event]:
    return [R.Event(seq, f"id{seq}", "tool-result", f"2026-08-04T09:00:{seq % 60:02d}+08:00",
                    "c", session=f"s{seq % 3}", text=TEXTS[seq % len(TEXTS)] + f" n{seq}")
            for seq in range(1, n + 1)]


def _raw(ev: R.Event) -> bytes:
    return json.dumps(asdict(ev), ensure_ascii=False).encode()


def test_recall_10_raw_event_doc_equals_event_doc():
    for ev in _events(12):
        assert raw_event_doc(_raw(ev)) == event_doc(ev)


def test_recall_10_pool_yields_the_same_documents_in_order(monkeypatch):
    events = _events(50)
    raws = [_raw(ev) for ev in events]
    monkeypatch.setattr(tokenpool, "MIN_PARALLEL", 0)
    monkeypatch.setattr(tokenpool, "BATCH", 7)
    pooled = list(tokenpool.event_docs(iter(raws), len(raws), workers=2))
    assert pooled == [doc_json(event_doc(ev)) for ev in events]
    assert list(tokenpool.event_docs(iter(raws), len(raws), workers=1)) == \
        [event_doc(ev) for ev in events]


def test_recall_10_json_documents_search_like_docs(tmp_path):
    events = _events(40)
    by_doc, by_json = ContextIndex(str(tmp_path / "a")), ContextIndex(str(tmp_path / "b"))
    by_doc.apply([event_doc(ev) for ev in events], {"position": 1}, fresh=True)
    by_json.apply([doc_json(event_doc(ev)) for ev in events], {"position": 1}, fresh=True)
    queries = [Query(terms=query_terms(q)) for q in ("沙箱 权限", "passed", "e42", "sandbox")]
    queries += [Query(terms=query_terms("沙箱"), sessions=["s0"]),
                Query(since_us=_us(events[5]), until_us=_us(events[9])),
                Query(terms=query_terms("n7"), kinds=["event"])]
    for q in queries:
        a = by_doc.search(by_doc.snapshot()[0], q, 0, 20)
        b = by_json.search(by_json.snapshot()[0], q, 0, 20)
        assert a and a == b, q


def _us(ev: R.Event) -> int:
    return event_time_us(ev.time)
