"""The client's replies (morphz.client answers protobuf messages) as the dicts the CLI
prints: each message's fields in declaration order (shared/grpc/protojson.py), the shape
`--format=json` has always printed and the text renderings read."""
from __future__ import annotations

from google.protobuf.message import Message

from morphz.shared.grpc.job_messages import job_reply
from morphz.shared.grpc.protojson import to_plain

LEG_RANKS = ("lexical_rank", "vector_rank")
VECTOR_LEG = ("vector_position", "vector_lag")


def plain(message: Message) -> dict:
    """The one walk of a message into a dict: JSON is the CLI's output format."""
    return to_plain(message)


def job(message: Message) -> dict:
    """A job with its `result` decoded (None until it has one) in place of result_json."""
    return job_reply(plain(message))


def search(reply: Message, mode: str) -> dict:
    """A page of search hits. Each leg's rank (after the hit's other fields) and the vector
    leg's position are shown only where there are legs: not in lexical mode, where they
    would read as zeros."""
    out = plain(reply)
    legs = mode != "lexical"
    for hit in out["results"]:
        ranks = {name: hit.pop(name) for name in LEG_RANKS}
        if legs:
            hit.update(ranks)
    if not legs:
        for name in VECTOR_LEG:
            del out[name]
    return out
