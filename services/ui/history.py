"""What the event history says about revisions: which `context-tx` event committed each
revision, its reason and operations. The gRPC API has no "transactions" listing, so
this composes it client-side from GetEvent reads (the N-th committed context-tx event
is revision N), scanned once per context and extended as the history grows."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from typing import Optional

from morphz.client import Client
from morphz.client.errors import NotFoundError
from morphz.shared.errors import MorphzError as ParseError
from morphz.services.transaction.core.txlang import EdgeOp, FrameOp, NamedOp, TargetsOp, \
    parse_text

SCAN_BATCH = 64  # events read in parallel per round of the scan
READERS = 8


@dataclass(frozen=True)
class TxOp:
    op: str
    target: str
    name: str = ""    # relate/unrelate: the relation's name
    object: str = ""  # relate/unrelate: the relation's object


@dataclass(frozen=True)
class Commit:
    """Revision `revision`'s commit event; its operations are parsed when first asked for
    (a bulk transaction's text takes a while to parse, and most views need none)."""
    revision: int
    ref: str
    seq: int
    time: str
    session: str
    activation: str
    text: str

    @cached_property
    def _parsed(self) -> tuple[str, tuple["TxOp", ...], bool]:
        return ops_of(self.text)

    @property
    def reason(self) -> str:
        return self._parsed[0]

    @property
    def ops(self) -> tuple["TxOp", ...]:
        return self._parsed[1]

    @property
    def parsed(self) -> bool:
        """False: the text did not parse here (e.g. redacted); its ops are unknown."""
        return self._parsed[2]


def ops_of(text: str) -> tuple[str, tuple[TxOp, ...], bool]:
    try:
        tx = parse_text(text)
    except ParseError:  # the parser's own error class (the server's error table)
        return "", (), False
    ops = []
    for op in tx.ops:
        if isinstance(op, FrameOp):
            ops.append(TxOp(op.op, op.frame_id))
        elif isinstance(op, EdgeOp):
            ops.append(TxOp(op.op, op.subject, op.name, op.object))
        elif isinstance(op, TargetsOp):
            ops.extend(TxOp(op.op, t) for t in op.targets)
        elif isinstance(op, NamedOp):
            ops.append(TxOp(op.op, op.name))
        else:  # place
            ops.append(TxOp(op.op, getattr(op, "frame_id", "")))
    return tx.reason, tuple(ops), True


def read_events(mz: Client, context: str, seqs: list[int], *,
                reveal: bool = False) -> list[Optional[object]]:
    """Events by seq, read in parallel (None where there is none)."""
    def one(seq: int):
        try:
            return mz.event(context, f"@e{seq}", reveal_secrets=reveal)
        except NotFoundError:
            return None
    with ThreadPoolExecutor(max_workers=min(READERS, max(1, len(seqs)))) as pool:
        return list(pool.map(one, seqs))


class Commits:
    """One context's commits as seen by one principal, extended on each use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next_seq = 1
        self._commits: list[Commit] = []
        self._activations = 0

    def refresh(self, mz: Client, context: str) -> "Commits":
        with self._lock:
            while True:
                seqs = list(range(self._next_seq, self._next_seq + SCAN_BATCH))
                events = read_events(mz, context, seqs)
                for event in events:
                    if event is None:
                        return self
                    self._next_seq = event.seq + 1
                    if event.kind == "activation":
                        self._activations += 1
                    if event.kind != "context-tx":
                        continue
                    self._commits.append(Commit(
                        len(self._commits) + 1, event.ref, event.seq, event.time,
                        event.session, event.activation if event.HasField("activation") else "",
                        event.text))

    @property
    def all(self) -> list[Commit]:
        return list(self._commits)

    @property
    def activations(self) -> int:
        return self._activations

    def at(self, revision: int) -> Optional[Commit]:
        return self._commits[revision - 1] if 0 < revision <= len(self._commits) else None

    def by_seq(self) -> dict[int, Commit]:
        return {c.seq: c for c in self._commits}
