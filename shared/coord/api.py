"""What context ownership needs from a coordination service: leases that expire unless
kept alive, and keys created only if absent under a lease, whose create_revision is a
fencing token. The etcd adapter is shared/coord/etcd.py; cores see only this interface.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass


class CoordinationUnavailable(Exception):
    """The coordination service did not answer in time, or refused the request."""


@dataclass(frozen=True)
class Holder:
    """Who holds a key: its value, its create_revision (the same for as long as the key
    lives; a key created again gets a higher one) and the lease it is bound to."""
    value: bytes
    create_revision: int
    lease: int


class Coordinator(abc.ABC):
    @abc.abstractmethod
    def grant(self, ttl: int) -> int:
        """A new lease of `ttl` seconds; its id."""

    @abc.abstractmethod
    def keep_alive(self, lease: int) -> int:
        """Renew the lease; its remaining TTL in seconds, <= 0 if it no longer exists."""

    @abc.abstractmethod
    def revoke(self, lease: int) -> None:
        """End the lease now (its keys go with it); an unknown lease is no error."""

    @abc.abstractmethod
    def create(self, key: str, value: bytes, lease: int) -> tuple[bool, Holder]:
        """Create `key` under `lease` (0: none, it lives until deleted) only if absent,
        atomically; (created, its holder now: this call's key if created, else the one
        already there)."""

    @abc.abstractmethod
    def get(self, key: str) -> Holder | None:
        """The key's holder, None if absent."""

    @abc.abstractmethod
    def put(self, key: str, value: bytes) -> None:
        """Set `key` (no lease), whether or not it exists."""

    @abc.abstractmethod
    def list(self, prefix: str) -> dict[str, bytes]:
        """Every key under `prefix` with its value (the prefix stripped from the keys)."""

    def close(self) -> None:  # noqa: B027 - optional: an adapter may hold nothing
        pass
