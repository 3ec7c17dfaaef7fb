"""Analyzing a whole context's events for a rebuild, spread over worker processes.

Parsing and ICU segmentation are CPU-bound Python; a rebuild of a large context runs
them in a spawned process pool (spawn, not fork: the server has gRPC threads) while
this process reads the store and feeds the index. Batches go out as the raw stored
bytes and come back as the JSON documents the index adds directly (doc_json):
cheap to pickle, cheap to add.
Small contexts stay in-process.
"""
from __future__ import annotations

import multiprocessing
import os
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Iterable, Iterator, Optional, Union

from morphz.services.recall.core.documents import raw_event_doc
from morphz.services.recall.index.tantivy_index import Doc, doc_json

BATCH = 2000
MIN_PARALLEL = 20000  # below this, starting processes costs more than it saves


def _docs_batch(raws: list[bytes]) -> list[str]:
    return [doc_json(raw_event_doc(raw)) for raw in raws]


def event_docs(raws: Iterable[bytes], total: int,
               workers: Optional[int] = None) -> Iterator[Union[Doc, str]]:
    """The Doc (or its doc_json) of each stored event (its JSON bytes), in order."""
    workers = workers if workers is not None else min(4, os.cpu_count() or 1)
    if total < MIN_PARALLEL or workers < 2:
        yield from map(raw_event_doc, raws)
        return
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        pending: deque[Future] = deque()
        batch: list[bytes] = []
        for raw in raws:
            batch.append(raw)
            if len(batch) == BATCH:
                pending.append(pool.submit(_docs_batch, batch))
                batch = []
                while len(pending) > 2 * workers:  # bounded memory: drain the oldest
                    yield from pending.popleft().result()
        if batch:
            pending.append(pool.submit(_docs_batch, batch))
        while pending:
            yield from pending.popleft().result()
