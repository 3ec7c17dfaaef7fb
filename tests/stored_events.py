"""Committed events as the store holds them, for tests comparing two ways of writing the
same thing (tests/integration/test_structured_tx.py, tests/client/)."""
from __future__ import annotations

import json


def event_bytes(storage, context: str, event_ref: str) -> bytes:
    """The stored event record with the fields that must differ (id, time, context, and
    the hash of the previous event, which holds them too) set to placeholders; everything
    else byte for byte as stored."""
    seq = int(event_ref[2:])
    with storage.reader(context) as r:
        raw = r.get("events", (seq,))
    record = json.loads(raw)
    fields = [(key, record[key]) for key in ("id", "time", "context")]
    fields.append(("link", record["data"]["link"]))
    for key, value in fields:
        token = f'"{key}":{json.dumps(value, ensure_ascii=False)}'.encode()
        assert raw.count(token) == 1, (key, raw)
        raw = raw.replace(token, f'"{key}":"-"'.encode())
    return raw
