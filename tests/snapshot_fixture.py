"""A context with the parts a snapshot record holds (observations shown whole and as a
preview, a secret, frames, a relation, a checkpoint, two sessions, a call and its late
result, a narrowed scope), compiled with fixed clocks and ids: the same stored record
bytes on every run. tests/fixtures/snapshot_records.json holds the records a server
before the typed record wrote for it (test_encoding_record_bytes.py compares)."""
from __future__ import annotations

import itertools
import json
import sys
from datetime import datetime, timezone

from morphz.shared.auth import IN_PROCESS_CALLER as ME
from morphz.services.encoding.core.engine import EncodingCore
from morphz.services.encoding.core.scope import Scope
from morphz.services.storage.lmdb import LmdbStore
from morphz.services.transaction.core.engine import TransactionCore

FIXTURE = "tests/fixtures/snapshot_records.json"


def _scope(**fields):
    """A requested scope: a Scope now, the dict a compile took before (the tree that
    wrote the fixture)."""
    return fields if hasattr(Scope, "from_dict") else Scope.make(**fields)


def _clock():
    return datetime(2026, 12, 1, 9, 30, tzinfo=timezone.utc)


def compile_all(path: str) -> dict[str, bytes]:
    """Snapshot id -> the stored record bytes of each compile."""
    ids = itertools.count()
    store = LmdbStore(path, map_size=1 << 28, sync=False)
    tx = TransactionCore(store, clock=_clock, new_id=lambda: f"id-{next(ids):04}")
    enc_ids = itertools.count()
    enc = EncodingCore(store, tx, clock=_clock, new_id=lambda: f"enc-{next(enc_ids):03}")
    try:
        tx.create_context("c", caller=ME)
        a = tx.append_event("c", "s1", "user-message", "ship v1 ✓ once tests pass",
                            caller=ME).ref
        big = tx.append_event("c", "s1", "tool-result", "line é\n" * 2000, caller=ME).ref
        tx.append_event("c", "s1", "tool-result", "token abc", secret=True, caller=ME)
        tx.append_event("c", "s2", "user-message", "other session", caller=ME)
        tx.commit("c", f'(context-tx (base-version 0) (create release (goal "ship ✓") '
                  f'(from {a})) (create notes (n 1)) (relate release refines notes) '
                  f'(protect {big}) (checkpoint cp1))', caller=ME)
        out = {}
        for kw in ({}, {"preview_bytes": 64, "must_read": [a]},
                   {"scope": _scope(kinds=["user-message", "tool-result"], frames=["release"],
                                    reveal_secrets=True), "capabilities": True, "model": "m1",
                    "bindings": {"tz": "+08:00"}}):
            e = enc.compile("c", "s1", caller=ME, **kw)
            sid = e["snapshot"] if isinstance(e, dict) else e.snapshot  # before, after
            with store.reader("c") as r:
                out[sid] = bytes(r.get("snapshots", (sid,)))
        return out
    finally:
        store.close()


if __name__ == "__main__":  # writes the fixture: run once, by a server of the old format
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        records = compile_all(d)
    with open(sys.argv[1] if len(sys.argv) > 1 else FIXTURE, "w") as f:
        json.dump({k: v.decode() for k, v in records.items()}, f, ensure_ascii=False, indent=0)
