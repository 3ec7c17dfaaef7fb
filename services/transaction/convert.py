"""Protobuf <-> domain for the transaction service (the structured context-tx form)."""
from __future__ import annotations

from morphz.api.transaction.v1 import transaction_pb2 as pb
from morphz.services.transaction.core.txlang import (
    EdgeOp, FrameOp, NamedOp, Op, PlaceOp, TargetsOp, Tx, check_tx, parse_body)
from morphz.shared.errors import MorphzError

_TARGET_FIELDS = ("retire", "restore", "protect", "unprotect")
_NAMED_FIELDS = ("checkpoint", "rollback", "drop_checkpoint", "retire_session", "restore_session")


def tx_from_proto(t: pb.Transaction) -> Tx:
    ops: list[Op] = []
    for i, o in enumerate(t.ops):
        kind = o.WhichOneof("op")
        if kind is None:
            raise MorphzError("TX_UNKNOWN_OP", "an op with no operation set", op_index=i)
        v = getattr(o, kind)
        name = kind.replace("_", "-")
        if kind in ("create", "derive", "revise"):
            sources = list(v.sources) if (v.sources or kind == "derive") else None
            ops.append(FrameOp(name, v.frame_id, parse_body(v.body, i), sources))
        elif kind in _TARGET_FIELDS:
            ops.append(TargetsOp(name, list(v.targets)))
        elif kind in ("relate", "unrelate"):
            ops.append(EdgeOp(name, v.subject, v.name, v.object))
        elif kind == "place":
            where = v.WhichOneof("where") or ""
            anchor = getattr(v, where) if where in ("before", "after") else ""
            ops.append(PlaceOp("place", v.frame_id, where, anchor))
        else:
            ops.append(NamedOp(name, v))
    base_tick = t.base_tick if t.HasField("base_tick") else None
    return check_tx(Tx(t.base_version, t.reason, ops, base_tick))


def tx_to_proto(tx: Tx) -> pb.Transaction:
    out = pb.Transaction(base_version=tx.base_version, reason=tx.reason)
    if tx.base_tick is not None:
        out.base_tick = tx.base_tick
    for o in tx.ops:
        field = o.op.replace("-", "_")
        op = out.ops.add()
        if isinstance(o, FrameOp):
            getattr(op, field).CopyFrom(pb.FrameBody(frame_id=o.frame_id, body=o.body,
                                                     sources=o.sources or []))
        elif isinstance(o, TargetsOp):
            getattr(op, field).targets.extend(o.targets)
        elif isinstance(o, EdgeOp):
            getattr(op, field).CopyFrom(pb.Edge(subject=o.subject, name=o.name, object=o.object))
        elif isinstance(o, PlaceOp):
            place = pb.Place(frame_id=o.frame_id)
            if o.where in ("before", "after"):
                setattr(place, o.where, o.anchor)
            else:
                setattr(place, o.where, True)
            op.place.CopyFrom(place)
        else:
            setattr(op, field, o.name)
    return out
