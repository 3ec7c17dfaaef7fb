"""The typed snapshot record writes the bytes the record of dicts wrote (ASM-03: a
snapshot replays byte-exact, and records stored before read as they did). The records in
tests/fixtures/snapshot_records.json were stored by the server before the typed record
(tests/snapshot_fixture.py, run on that tree) for a history made with fixed clocks and
ids; the same history compiled now stores the same bytes, which read back, replay with a
match and show what they hold. Real LMDB, real transaction and encoding cores."""
from __future__ import annotations

import json
from datetime import datetime, timezone

from morphz.services.encoding.core.engine import EncodingCore
from morphz.services.storage.lmdb import LmdbStore
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.auth import IN_PROCESS_CALLER as ME
from tests.snapshot_fixture import FIXTURE, compile_all


def test_asm_03_a_compile_stores_the_record_bytes_the_server_before_stored(tmp_path):
    with open(FIXTURE) as f:
        before = {k: v.encode() for k, v in json.load(f).items()}
    assert compile_all(str(tmp_path / "store")) == before


def test_asm_04_records_stored_before_read_replay_and_show_as_written(tmp_path):
    """The stored bytes of the fixture, put back under the history they were made of,
    replay with a match; show gives back every field they hold."""
    with open(FIXTURE) as f:
        before = {k: v.encode() for k, v in json.load(f).items()}
    compile_all(str(tmp_path / "store"))  # the same history (and records) again
    store = LmdbStore(str(tmp_path / "store"), map_size=1 << 28, sync=False)
    try:
        enc = EncodingCore(store, TransactionCore(store),
                           clock=lambda: datetime(2026, 12, 1, tzinfo=timezone.utc))
        for sid, raw in before.items():
            head, body = raw.split(b"\n")
            again = json.loads(head)
            again["id"] = sid + "-again"  # the same record under a new id: as stored before
            store.put_record("c", "snapshots", (again["id"],),
                             json.dumps(again).encode() + b"\n" + body)
            replay = enc.replay("c", again["id"], caller=ME)
            assert replay.match and replay.hash == json.loads(head)["hash"]
            shown = enc.show("c", again["id"], caller=ME).plain()
            assert {k: shown[k] for k in json.loads(head)} == again
            assert shown["inputs"] == json.loads(body)["inputs"]
    finally:
        store.close()
