"""Tokenizing a whole context for a rebuild, spread over worker processes.

ICU segmentation is CPU-bound Python; a rebuild of a large context runs it in a
spawned process pool (spawn, not fork: the server has gRPC threads) while this
process reads the store and feeds the index. Small contexts stay in-process.
"""
from __future__ import annotations

import multiprocessing
import os
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Iterable, Iterator, Optional, TypeVar

from morphz.shared.text.analyze import terms

T = TypeVar("T")
BATCH = 2000
MIN_PARALLEL = 20000  # below this, starting processes costs more than it saves


def _terms_batch(texts: list[str]) -> list[list[str]]:
    return [terms(t) for t in texts]


def tokenized(items: Iterable[tuple[T, str]], total: int,
              workers: Optional[int] = None) -> Iterator[tuple[T, list[str]]]:
    """(item, terms of its text) in input order."""
    workers = workers if workers is not None else min(4, os.cpu_count() or 1)
    if total < MIN_PARALLEL or workers < 2:
        for item, text in items:
            yield item, terms(text)
        return
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        pending: deque[tuple[list[T], Future]] = deque()
        batch_items: list[T] = []
        batch_texts: list[str] = []
        for item, text in items:
            batch_items.append(item)
            batch_texts.append(text)
            if len(batch_texts) == BATCH:
                pending.append((batch_items, pool.submit(_terms_batch, batch_texts)))
                batch_items, batch_texts = [], []
                while len(pending) > 2 * workers:  # bounded memory: drain the oldest
                    done_items, fut = pending.popleft()
                    yield from zip(done_items, fut.result())
        if batch_texts:
            pending.append((batch_items, pool.submit(_terms_batch, batch_texts)))
        while pending:
            done_items, fut = pending.popleft()
            yield from zip(done_items, fut.result())
