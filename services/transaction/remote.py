"""The transaction service reached over gRPC, answering as TransactionCore answers.

Recall and encoding are handed TransactionCore in one process and this across
processes; both read the typed results (AppendResult, ActivationResult) by attribute,
so the two writes they make answer here with those types, built from the reply."""
from __future__ import annotations

from dataclasses import fields
from typing import Any, TypeVar

from morphz.services.transaction.client import TransactionClient
from morphz.services.transaction.core.results import ActivationResult, AppendResult, Result

T = TypeVar("T", bound=Result)


def result_from_reply(cls: type[T], reply: dict) -> T:
    """A flat result (scalar and string-list fields) from the reply's plain form; an
    optional field the reply leaves unset keeps its default (None)."""
    return cls(**{f.name: tuple(v) if isinstance(v, list) else v
                  for f in fields(cls) if (v := reply.get(f.name)) is not None})


class RemoteTransactions(TransactionClient):
    def append_event(self, *args: Any, **kwargs: Any) -> AppendResult:
        return result_from_reply(AppendResult, super().append_event(*args, **kwargs))

    def activate(self, *args: Any, **kwargs: Any) -> ActivationResult:
        return result_from_reply(ActivationResult, super().activate(*args, **kwargs))
