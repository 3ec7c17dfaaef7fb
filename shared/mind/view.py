"""The read model: typed reads of one context's tables at one version (a storage Reader).

Every reader of the projections goes through it: encoding and recall read through a
MindView, the transaction service through MindState (state.py), which lays its
candidate writes over the same reads. Table names, keys and the records' JSON stay
here and in records.py; no reader decodes rows itself.

MindView is its small views in one object (a request reads across them, through one
reader and one set of caches), each in a file of its own:
- view_rows.py: the raw access every read goes through, what is read ahead, the meta;
- view_events.py: the Event History and each input's state (observations, inbox);
- view_frames.py: frames and their versions, relations, the order, checkpoints;
- view_sessions.py: sessions, activations, calls, the policy, idempotency;
- view_snapshots.py: encoding snapshots and their index.
What stays here are the read-aheads named for what a compile reads, which span them.
"""
from __future__ import annotations

from typing import Iterable, Optional

from morphz.shared.mind.view_frames import FrameReads
from morphz.shared.mind.view_sessions import SessionReads
from morphz.shared.mind.view_snapshots import SnapshotReads


class MindView(SessionReads, FrameReads, SnapshotReads):
    # -- what an encoding compile reads (services/encoding) ----------------------------
    # Intent-named read-aheads (one round trip each where the store is remote), and the
    # frames and events keyed by their stored form for a cache that outlives a request
    # (frame_cache_keys, event_cache_key): the encoding service names no table and
    # decodes no row.
    def prefetch_session(self, session: str, *, last: bool = False) -> None:
        """The meta and one session's record (`last`: the view's last read)."""
        self.prefetch_tables({"meta": [()], "sessions": [(session,)]}, last=last)

    def prefetch_activation(self, activation: str) -> None:
        """The meta and one activation's record."""
        self.prefetch_tables({"activations": [(activation,)], "meta": [()]})

    def prefetch_encoding_scans(self, session: str) -> None:
        """Every whole scan a compile for `session` makes (gather.py), in one ScanMany."""
        self.prefetch_scans([("pending", (session,)), ("root_requests", ()), ("inbox", ()),
                             ("frames", ()), ("order", ()), ("relations", ()),
                             ("checkpoints", ()), ("sessions", ()), ("open_calls", (session,))])

    def prefetch_inputs(self, observations: Iterable[int], events: Iterable[int], *,
                        max_bytes: Optional[int] = None) -> None:
        """These observations' states and these events, read ahead together."""
        self.prefetch_tables({"observations": [(seq,) for seq in observations],
                              "events": [(seq,) for seq in events]}, max_bytes=max_bytes)
