"""Per-context commit pipeline: compute serially, make durable in groups.

Writes of one context are computed one at a time (under the pipeline's lock), each on
the durable state plus the writes already submitted but not yet durable, and handed to
the store in that order. The store may then make many of them durable with a single
fsync (group commit). Nobody is answered before their own commit is durable.

A commit computed on a predecessor that failed must fail too. Its expected physical
version only proves that when the writer is fenced (storage then refuses every other
writer of the context): unfenced, another writer's commit can take the predecessor's
version, and the successor would land on a state it was not computed on (its meta
counting a transaction that never committed). So only a fenced writer computes over
commits in flight; an unfenced one waits until they settle (Writer.write, writes/writer.py).
"""
from __future__ import annotations

import threading
from typing import Iterator, Optional

from morphz.shared.storage.overlay import Overlay, overlay_scan
from morphz.shared.storage.api import Key, Reader, Ticket, Write


_BASE = object()  # not in a layer: read from the durable snapshot


class LayeredReader(Reader):
    """A durable snapshot with not-yet-durable writes (an Overlay, commit_seq the last
    of them made) laid over it."""

    def __init__(self, base: Reader, over: Optional[Overlay] = None,
                 commit_seq: Optional[int] = None) -> None:
        self._base = base
        self._over = over if over is not None else Overlay()
        self.commit_seq = base.commit_seq if commit_seq is None else commit_seq

    def get(self, table: str, key: Key) -> Optional[bytes]:
        pending = self._over.get(table, key, _BASE)
        return self._base.get(table, key) if pending is _BASE else pending

    def get_many(self, table: str, keys: list[Key]) -> list[Optional[bytes]]:
        out = [self._over.get(table, k, _BASE) for k in keys]
        below = [k for k, v in zip(keys, out) if v is _BASE]
        found = iter(self._base.get_many(table, below) if below else [])
        return [next(found) if v is _BASE else v for v in out]

    def scan(self, table: str, prefix: Key = (), after: Optional[Key] = None,
             limit: int = 0, reverse: bool = False) -> Iterator[tuple[Key, bytes]]:
        return overlay_scan(self._base, self._over, table, prefix, after, limit, reverse)


class ContextPipeline:
    """A context's commits submitted and not yet finished. All of it is used under
    `lock`, held while a write computes and submits."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.settled = threading.Condition(self.lock)  # notified as each commit finishes
        self._pending: list[tuple[int, list[Write], Ticket]] = []  # (commit_seq after, ...)
        # The pending writes over durable version `_over_base`, merged, up to version
        # `_over_top`: while none of them has become durable, each new commit adds its
        # own writes instead of every write merging all the pending ones again.
        self._over: Optional[Overlay] = None
        self._over_base = self._over_top = -1

    def layers(self, durable_seq: int) -> list[tuple[int, list[Write]]]:
        """Submitted writes the durable snapshot does not show yet, oldest first."""
        return [(seq, w) for seq, w, _ in self._pending if seq > durable_seq]

    def reader(self, durable: Reader) -> LayeredReader:
        """`durable` with the pending writes it does not show yet laid over it."""
        base = durable.commit_seq
        if self._over is None or self._over_base != base:
            layers = self.layers(base)
            if not layers:
                self._over = None
                return LayeredReader(durable)
            self._over = Overlay(w for _, writes in layers for w in writes)
            self._over_base, self._over_top = base, layers[-1][0]
        return LayeredReader(durable, self._over, self._over_top)

    def push(self, seq_after: int, writes: list[Write], ticket: Ticket) -> None:
        self._pending.append((seq_after, writes, ticket))
        if self._over is not None:
            if seq_after == self._over_top + 1:  # computed on the merged writes: extend
                for w in writes:
                    self._over.put(w.table, w.key, w.value)
                self._over_top = seq_after
            else:
                self._over = None

    def last_ticket(self) -> Optional[Ticket]:
        return self._pending[-1][2] if self._pending else None

    def done(self, ticket: Ticket, failed: bool) -> None:
        """Forget a finished commit; after a failure forget everything built on it."""
        if failed:
            self._pending.clear()
        else:
            self._pending = [p for p in self._pending if p[2] is not ticket]
        if failed or not self._pending:
            self._over = None
        self.settled.notify_all()
