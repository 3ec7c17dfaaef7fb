"""The Mind's table catalogue: every table a context keeps, its key layout and whether it
is append-only, beside the read model (view.py) that reads them.

The stores (shared/storage, services/storage) keep these tables of opaque records
under per-context keys and enforce only what is listed here: append-only tables are
never overwritten, side tables are written beside the versioned state, and an erasure
rewrites rows of its tables only. What a row holds is records.py's.
"""
from __future__ import annotations

# table -> append-only? Events are never rewritten.
TABLES: dict[str, bool] = {
    "meta": False,            # () -> context meta (revision, tick, sequences, window)
    "events": True,           # (seq,) -> event record
    "event_ids": True,        # (event id,) -> seq
    "observations": False,    # (seq,) -> observation state (retired, protected)
    "inbox": False,           # (seq,) -> b""  active observations, for encodings
    "frames": False,          # (frame id,) -> frame record
    "frame_versions": False,  # (frame id, context revision) -> frame record as of then
    "relations": False,       # (subject, name, object) -> b""
    "relations_in": False,    # (object, name, subject) -> b""  (reverse index)
    "order": False,           # (rank,) -> frame id: frame projection order
    "order_rank": False,      # (frame id,) -> rank
    "checkpoints": False,     # (name,) -> Mind snapshot
    "sessions": False,        # (session id,) -> session record
    "pending": False,         # (session id, seq) -> b""  inputs not yet claimed
    "activations": False,     # (activation id,) -> activation record
    "root_requests": False,   # (seq,) -> activation id: roots of undelivered activations
    "calls": False,           # (action seq,) -> call: activation, session, result seq or none
    "open_calls": False,      # (session, action seq) -> activation id: calls with no result yet
    "promoted": False,        # (seq,) -> revision that first cited the event as a frame source
    "retire_due": False,      # (due tick, frame id) -> retire request generation
    "idempotency": False,     # (request id,) -> payload hash + original reply
    "boundaries": False,      # (boundary,) -> revision that last changed it
    "policy": False,          # (principal, right, session) -> b"": who may do what (policy.py)
    "snapshots": True,        # (snapshot id,) -> what one evaluation saw (encoding)
    # (index, *ordering key, snapshot id) -> the snapshot's summary: a context's snapshots
    # listed newest first by session, activation or the whole context (shared/mind/
    # snapshots.py), written with each snapshot record (put_records)
    "snapshot_index": True,
    "quarantine": True,       # (commit_seq, table, *key) -> a row a repair moved aside then
}

# Append-only records kept beside a context's versioned state, written by put_record:
# no transaction reads them, so writing one must not make a concurrent commit stale.
SIDE_TABLES: frozenset[str] = frozenset({"snapshots", "snapshot_index"})

# The tables an erasure rewrites rows of: events, and frames with their versions and
# the checkpoints that copied them.
ERASABLE_TABLES = frozenset({"events", "frames", "frame_versions", "checkpoints"})
