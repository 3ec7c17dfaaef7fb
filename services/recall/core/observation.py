"""A recall made for an evaluation is recorded as a new `recall` observation of its session
through the transaction service (never a frame change): what was asked and what came
back, in the reply's plain form, so the session's history says what it was shown. Once
the caller was authorized, it is written as the services (SERVICE_CALLER), as over the
wire."""
from __future__ import annotations

import dataclasses
import json
from typing import Optional, TypeVar

from morphz.services.recall.core.ports import Transactions
from morphz.services.recall.core.request import Evaluation
from morphz.services.recall.core.results import ReadResult, SearchResult, TraverseResult
from morphz.shared.auth import SERVICE_CALLER

MAX_OBSERVATION_BYTES = 1 << 20
Reply = TypeVar("Reply", SearchResult, ReadResult, TraverseResult)


def record(tx: Transactions, context: str, evaluation: Optional[Evaluation], op: str,
           request: dict, reply: Reply) -> Reply:
    """The reply, with the ref of the observation recording it (none without an
    evaluation). Past MAX_OBSERVATION_BYTES the observation keeps the refs only."""
    if evaluation is None:  # (a search's reply is built so: no copy on its hot path)
        return reply if reply.observation_ref == "" else \
            dataclasses.replace(reply, observation_ref="")
    plain = reply.plain()
    text = json.dumps({"recall": op, "activation": evaluation.activation,
                       "request": request, "reply": plain}, ensure_ascii=False)
    if len(text.encode()) > MAX_OBSERVATION_BYTES:
        text = json.dumps({"recall": op, "activation": evaluation.activation,
                           "request": request, "truncated": True,
                           "refs": _refs_of(plain)}, ensure_ascii=False)
    receipt = tx.append_event(context, evaluation.session, "recall", text,
                              actor="recall", caller=SERVICE_CALLER)
    return dataclasses.replace(reply, observation_ref=receipt.ref)


def _refs_of(reply: dict) -> list[str]:
    """The refs (or ids) of a reply's hits or nodes, in its plain form."""
    items = reply.get("results") or reply.get("nodes") or []
    return [i.get("ref") or i.get("id") for i in items]
