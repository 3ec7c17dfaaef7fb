"""The read model's bulk reads, for a derived index (recall) that reads a context's events
by the thousand: runs of stored events in seq order, as opaque records (bytes a tokenizing
worker process takes as they are and decodes with `decode_event`), and the read-ahead of
what a page of changes or of search hits reads next. Table names and the rows' encoding
stay in shared/mind (view.py): no reader names the tables these rows come from."""
from __future__ import annotations

from typing import Iterable, Optional

from morphz.shared.mind.view import MindView
from morphz.shared.mind.view_events import event_dict
from morphz.shared.storage.api import Reader

decode_event = event_dict  # a stored event record as a plain dict


def event_run(reader: Reader, start: int, limit: int, max_bytes: int) -> list[bytes]:
    """The stored records of events start, start+1, ... (at most `limit` of them), ended
    after the first that brings their size to `max_bytes` (large events: fewer)."""
    rows: list[bytes] = []
    size = 0
    after = (start - 1,) if start else None
    for _, raw in reader.scan("events", after=after, limit=limit):
        rows.append(raw)
        size += len(raw)
        if size >= max_bytes:
            break
    return rows


def event_records(reader: Reader, seqs: list[int],
                  max_bytes: Optional[int] = None) -> list[Optional[bytes]]:
    """The stored records of these events, in order (None: none at that seq), in one round
    trip where the reader is remote; past `max_bytes`, the rest are left out (the list
    ends early)."""
    return reader.get_tables([("events", [(seq,) for seq in seqs])], max_bytes=max_bytes)[0]


def prefetch_changes(m: MindView, event_seqs: Iterable[int], frame_ids: Iterable[str],
                     max_bytes: Optional[int] = None) -> None:
    """Read ahead the events and frames a run of changes names (an index applying them)."""
    m.prefetch_tables({"events": [(s,) for s in event_seqs],
                       "frames": [(f,) for f in frame_ids]}, max_bytes=max_bytes)


def prefetch_hits(m: MindView, event_seqs: Iterable[int], frame_ids: Iterable[str],
                  shown_seqs: Iterable[int], *, last: bool = False,
                  max_bytes: Optional[int] = None) -> None:
    """Read ahead what a page of search hits checks and shows: the events' lifecycle
    states, the frames, and the events it previews (`shown_seqs`), in one round trip."""
    m.prefetch_tables({"observations": [(s,) for s in event_seqs],
                       "frames": [(f,) for f in frame_ids],
                       "events": [(s,) for s in shown_seqs]}, last=last, max_bytes=max_bytes)
