"""Protobuf <-> domain for the recall service: its requests, for its servicer and its
client alike, and the core's typed replies (core/results.py) as messages; a reply read
field by field (a search's, the hot path) or through its plain form (shared/protojson)."""
from __future__ import annotations

from typing import Optional

from msgspec.structs import asdict

from morphz.api.recall.v1 import recall_pb2 as pb
from morphz.services.recall.core.request import Evaluation
from morphz.services.recall.core.results import Hit, IndexStatus
from morphz.shared.grpc.client import build_request
from morphz.shared.grpc.protojson import from_plain


def evaluation_from_proto(ev: pb.Evaluation) -> Evaluation:
    """The evaluation a search, read or traversal is made for."""
    return Evaluation(ev.session, ev.activation)


def evaluation_to_proto(evaluation: Optional[dict]) -> Optional[pb.Evaluation]:
    if not evaluation:
        return None
    return build_request(pb.Evaluation, session=evaluation.get("session", ""),
                         activation=evaluation.get("activation", ""))


def hits_to_proto(hits: tuple[Hit, ...]) -> list[dict]:
    """A page's hits as the dicts protobuf builds its `Hit` messages from: built in C, a
    third cheaper than a `pb.Hit(...)` per hit (the hot path). `Hit`'s fields are
    `pb.Hit`'s, by name; a rank that is None is a field not set (0)."""
    return [asdict(h) for h in hits]


def status_to_proto(status: IndexStatus) -> pb.IndexStatus:
    return from_plain(status.plain(), pb.IndexStatus)
