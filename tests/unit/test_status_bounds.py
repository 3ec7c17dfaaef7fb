"""SEC-03: an error's status on the wire carries at most a short form of what a request
sent, however much a core put into the error (shared/grpc/errors.py: to_status)."""
from __future__ import annotations

import json

from google.rpc import error_details_pb2

from morphz.shared.errors import MorphzError
from morphz.shared.grpc.errors import (MAX_DETAIL_CHARS, MAX_MESSAGE_CHARS,
                                       MAX_STRUCTURED_CHARS, to_status)


def metadata(status) -> dict:
    info = error_details_pb2.ErrorInfo()
    status.details[0].Unpack(info)
    return dict(info.metadata)


def test_sec_03_a_status_never_carries_a_large_input():
    huge = "t" * 100_000
    err = MorphzError("STORAGE_TABLE_UNKNOWN", f"unknown table {huge}", table=huge,
                      refs=[f"@e{i}" for i in range(10_000)], op_index=3)
    status = to_status(err)
    assert len(status.SerializeToString()) < 8 * 1024  # a client's metadata cap
    assert len(status.message) == MAX_MESSAGE_CHARS
    meta = metadata(status)
    assert len(meta["table"]) == MAX_DETAIL_CHARS and meta["table"].endswith("\u2026")
    assert len(meta["refs"]) <= MAX_STRUCTURED_CHARS
    assert meta["op_index"] == "3"


def test_sec_03_structured_details_of_a_normal_size_stay_whole():
    items = [{"kind": "frame", "key": f"f{i}", "bytes": 1000 + i} for i in range(20)]
    status = to_status(MorphzError("ENCODING_BUDGET_EXCEEDED", "over", items=items,
                                   missing=["@e1", "@e2"]))
    meta = metadata(status)
    assert json.loads(meta["items"]) == items
    assert json.loads(meta["missing"]) == ["@e1", "@e2"]
