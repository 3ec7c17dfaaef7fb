"""Protobuf <-> domain for the recall service's requests, for its servicer and its
client alike (replies go through shared/protojson.py)."""
from __future__ import annotations

from typing import Optional

from morphz.api.recall.v1 import recall_pb2 as pb
from morphz.shared.grpc_client import build_request


def evaluation_from_proto(ev: pb.Evaluation) -> dict:
    """The evaluation a search, read or traversal is made for."""
    return {"session": ev.session, "activation": ev.activation}


def evaluation_to_proto(evaluation: Optional[dict]) -> Optional[pb.Evaluation]:
    if not evaluation:
        return None
    return build_request(pb.Evaluation, session=evaluation.get("session", ""),
                         activation=evaluation.get("activation", ""))
