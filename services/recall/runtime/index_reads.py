"""What the recall index's two legs share (indexer.py's lexical leg, vector_upkeep.py's
vector leg): a context's changes cut into runs, the frames each run changed, the stored
events read in short read transactions, and the bounds on what one read holds."""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterable, Iterator, Optional

from morphz.services.recall.core.documents import TEXT_VERSION
from morphz.shared.deadline import NEVER, Deadline
from morphz.shared.mind.bulk import event_run
from morphz.shared.storage.api import Store
from morphz.shared.storage.feed import Change

_log = logging.getLogger("morphz.recall.indexer")
REBUILD_READ_CHUNK = 8000  # events per read transaction of a rebuild
# An application's bounds on what it holds: rows read ahead per chunk, and the text of
# the documents gathered before they are written (a commit's rows may pass each once).
READ_AHEAD_BYTES = 16 << 20
APPLY_BYTES = 32 << 20


def texts_current(meta: dict) -> bool:
    """Whether an index's documents hold today's texts (an empty index holds none)."""
    return not meta or meta.get("text_version") == TEXT_VERSION


def frame_changers(changes: Iterable[Change]) -> dict[str, Optional[int]]:
    """Frame id -> the event of the last commit that wrote it (its time is the frame's
    time in the index); None when that commit wrote no event."""
    out: dict[str, Optional[int]] = {}
    for c in changes:
        for fid in c.frames:
            out[fid] = c.events[-1] if c.events else None
    return out


def frame_changers_upto(store: Store, context: str, head: int) -> dict[str, Optional[int]]:
    """frame_changers over the context's feed up to version `head`."""
    out: dict[str, Optional[int]] = {}
    after = 0
    while after < head:
        page = store.changes(after, context=context)
        mine = [c for c in page.changes if c.commit_seq <= head]
        out.update(frame_changers(mine))
        if len(mine) < len(page.changes) or not page.changes:
            break
        after = page.changes[-1].commit_seq
    return out


def event_records(store: Store, context: str, events: int, chunk: int, read_ahead: int,
                  deadline: Deadline = NEVER) -> Iterator[bytes]:
    """The stored bytes of events 0..events-1, a chunk per read transaction (of `chunk`
    events or `read_ahead` bytes, whichever comes first), `deadline` looked at before
    each."""
    seq = 0
    while seq < events:
        deadline.check("the rebuild")  # SEC-07; raised through the tokenizing workers
        with store.reader(context) as reader:  # large events: fewer per transaction
            rows = event_run(reader, seq, min(chunk, events - seq), read_ahead)
        if not rows:
            return
        yield from rows
        seq += len(rows)


def change_chunks(changes: list[Change], items: int) -> Iterable[list[Change]]:
    """Runs of whole changes of about `items` events and frames (a larger change alone)."""
    chunk: list[Change] = []
    size = 0
    for c in changes:
        n = len(c.events) + len(c.frames)
        if chunk and size + n > items:
            yield chunk
            chunk, size = [], 0
        chunk.append(c)
        size += n
    if chunk:
        yield chunk


@contextmanager
def skipping_damaged(context: str, key: str):
    """A record that does not decode is left out of the index (audit reports the damage)
    rather than holding back every later change of every context."""
    try:
        yield
    except (ValueError, TypeError, KeyError, AttributeError):
        _log.warning("%s: %s does not decode; not indexed", context, key, exc_info=True)
