"""Tx: a builder for one context-tx in its structured form (transaction.proto's
Transaction), the same transaction the DSL text would say.

    tx = (Tx(base_version=1, reason="tests passed, go on")
          .derive("test-result", "(tests passed)", sources=["@e4"])
          .revise("release", "(goal ship-v1) (stage packaging)")
          .relate("test-result", "supports", "release")
          .retire("@e4"))
    client.commit("demo", tx, session="main")

Bodies are S-expression text (`quote` makes a string literal of any text). Shapes the
server would refuse for certain (derive without sources, create with sources, place
with no anchor) are refused here already, as InvalidInputError; everything else is the
server's to judge. `text()` renders the DSL text form, for logs and prompts.
"""
from __future__ import annotations

import re
from typing import Iterable, Optional

from morphz.api.transaction.v1 import transaction_pb2 as pb
from morphz.client.errors import input_error

_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f\x7f]')
_ESCAPED = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
_U64 = (1 << 64) - 1


def quote(text: str) -> str:
    """`text` as a DSL string literal (escapes as the server's reader reads them)."""
    return '"' + _NEEDS_ESCAPE.sub(
        lambda m: _ESCAPED.get(m.group()) or f"\\u{{{ord(m.group()):x}}}", text) + '"'


class Tx:
    """One transaction: base version, optional reason and base tick, and its ops in
    order. Each op method appends and returns the builder."""

    def __init__(self, base_version: int, reason: str = "", *,
                 base_tick: Optional[int] = None) -> None:
        for name, value in (("base_version", base_version), ("base_tick", base_tick)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                      or not 0 <= value <= _U64):
                raise input_error(f"{name} must be an integer 0..2^64-1", field=name)
        self.base_version, self.reason, self.base_tick = base_version, reason, base_tick
        self._ops: list[pb.Op] = []

    # -- frames ------------------------------------------------------------------------
    def create(self, frame_id: str, body: str) -> "Tx":
        return self._add(create=pb.FrameBody(frame_id=frame_id, body=body))

    def derive(self, frame_id: str, body: str, *, sources: Iterable[str]) -> "Tx":
        sources = list(sources)
        if not sources:
            raise input_error("derive needs sources (its from clause)",
                              op_index=len(self._ops), field="derive.sources")
        return self._add(derive=pb.FrameBody(frame_id=frame_id, body=body, sources=sources))

    def revise(self, frame_id: str, body: str, *, sources: Optional[Iterable[str]] = None) \
            -> "Tx":
        """sources None: keep the frame's sources; a list replaces them ([] clears them,
        the text form's `(from)`)."""
        if sources is None:
            return self._add(revise=pb.FrameBody(frame_id=frame_id, body=body))
        sources = list(sources)
        return self._add(revise=pb.FrameBody(frame_id=frame_id, body=body, sources=sources,
                                             clear_sources=not sources))

    # -- lifecycle ---------------------------------------------------------------------
    def retire(self, *targets: str) -> "Tx":
        return self._targets("retire", targets)

    def restore(self, *targets: str) -> "Tx":
        return self._targets("restore", targets)

    def protect(self, *targets: str) -> "Tx":
        return self._targets("protect", targets)

    def unprotect(self, *targets: str) -> "Tx":
        return self._targets("unprotect", targets)

    # -- relations and order ---------------------------------------------------------------
    def relate(self, subject: str, name: str, object: str) -> "Tx":  # noqa: A002 - DSL's word
        return self._add(relate=pb.Edge(subject=subject, name=name, object=object))

    def unrelate(self, subject: str, name: str, object: str) -> "Tx":  # noqa: A002
        return self._add(unrelate=pb.Edge(subject=subject, name=name, object=object))

    def place(self, frame_id: str, *, before: Optional[str] = None,
              after: Optional[str] = None, first: bool = False, last: bool = False) -> "Tx":
        given = {k: v for k, v in (("before", before), ("after", after), ("first", first),
                                   ("last", last)) if v not in (None, False)}
        if len(given) != 1:
            raise input_error("place needs exactly one of before, after, first, last",
                              op_index=len(self._ops), field="place.where")
        return self._add(place=pb.Place(frame_id=frame_id, **given))

    # -- checkpoints and sessions ------------------------------------------------------------
    def checkpoint(self, name: str) -> "Tx":
        return self._add(checkpoint=name)

    def rollback(self, name: str) -> "Tx":
        return self._add(rollback=name)

    def drop_checkpoint(self, name: str) -> "Tx":
        return self._add(drop_checkpoint=name)

    def retire_session(self, session: str) -> "Tx":
        return self._add(retire_session=session)

    def restore_session(self, session: str) -> "Tx":
        return self._add(restore_session=session)

    # -- output --------------------------------------------------------------------------
    def to_proto(self) -> pb.Transaction:
        out = pb.Transaction(base_version=self.base_version, reason=self.reason,
                             ops=self._ops)
        if self.base_tick is not None:
            out.base_tick = self.base_tick
        return out

    def text(self) -> str:
        """The DSL text of the same transaction."""
        parts = [f"(base-version {self.base_version})"]
        if self.base_tick is not None:
            parts.append(f"(base-tick {self.base_tick})")
        if self.reason:
            parts.append(f"(reason {quote(self.reason)})")
        parts += [_op_text(o) for o in self._ops]
        return "(context-tx\n  " + "\n  ".join(parts) + ")"

    def __repr__(self) -> str:
        return f"Tx({self.text()!r})"

    def _targets(self, op: str, targets: tuple[str, ...]) -> "Tx":
        if not targets:
            raise input_error(f"{op} needs at least one target", op_index=len(self._ops),
                              field=f"{op}.targets")
        return self._add(**{op: pb.Targets(targets=list(targets))})

    def _add(self, **op) -> "Tx":
        self._ops.append(pb.Op(**op))
        return self


def _op_text(o: pb.Op) -> str:
    kind = o.WhichOneof("op")
    name = kind.replace("_", "-")
    v = getattr(o, kind)
    if kind in ("create", "derive", "revise"):
        head = [name, v.frame_id]
        if v.sources or v.clear_sources:
            head.append("(from" + "".join(f" {s}" for s in v.sources) + ")")
        return "(" + " ".join(head + ([v.body] if v.body else [])) + ")"
    if kind in ("retire", "restore", "protect", "unprotect"):
        return f"({name} {' '.join(v.targets)})"
    if kind in ("relate", "unrelate"):
        return f"({name} {v.subject} {v.name} {v.object})"
    if kind == "place":
        where = v.WhichOneof("where")
        return f"(place {v.frame_id} {where})" if where in ("first", "last") \
            else f"(place {v.frame_id} ({where} {getattr(v, where)}))"
    return f"({name} {v})"
