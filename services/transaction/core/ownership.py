"""Context ownership as the transaction core sees it: may this instance commit to a
context, and with which fencing token. A single instance owns every context
(SoleOwner, no token); with a coordinator, the lease runtime answers
(services/transaction/runtime/lease.py: LeaseOwnership, its keeper thread and keys).
"""
from __future__ import annotations

import abc


class Ownership(abc.ABC):
    @abc.abstractmethod
    def token(self, context: str) -> int:
        """The fencing token to commit to `context` with (0: none), taking the context
        if nobody owns it. Raises MorphzError NOT_OWNER or OWNERSHIP_LOST."""

    def describe(self, context: str) -> dict:
        """Who owns `context` now, for its status: owner, owner_address, fencing_token
        (empty: no owner, or no coordinator)."""
        return {}

    def fenced(self, context: str, token: int) -> None:  # noqa: B027 - a sole owner is never fenced
        """Storage refused `token` for `context`: a newer owner has committed."""

    def trouble(self) -> str:
        """Why this instance refuses every commit now ("" when it does not): its health
        says NOT_SERVING meanwhile, so clients and probes go to another instance."""
        return ""

    def start(self) -> None:  # noqa: B027 - optional: a sole owner keeps nothing alive
        pass

    def close(self) -> None:  # noqa: B027 - optional, as start
        pass


class SoleOwner(Ownership):
    """A single transaction instance: it owns every context and needs no token."""

    def token(self, context: str) -> int:
        return 0


SOLE_OWNER = SoleOwner()
