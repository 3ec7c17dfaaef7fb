"""Context ownership under a lease: the runtime of core/ownership.py's Ownership when a
coordinator decides who may commit to a context, and with which fencing token.

Without a coordinator (the default) the instance is the only writer: SoleOwner
(core/ownership.py), no token. With one (etcd: `morphz serve transaction --etcd ADDR`),
LeaseOwnership holds
one lease per instance, renewed by a keeper thread, and takes a key per context it
writes (`/morphz/owners/<context>`) under that lease, created only if absent. The
key's create_revision is the fencing token every commit to that context carries:
storage refuses a token below the highest it accepted (FENCED), so whoever held the
context before can no longer write once the new owner has. The lease id is no token:
a context given up and taken again under the same lease must get a higher one.

Fail closed: once a renewal fails, or the lease may have expired by the local clock,
every commit is refused at once (OWNERSHIP_LOST) until a renewal succeeds (the lease
and its keys are intact) or, the lease being gone, a new one is granted and the
context taken again.

One process per instance id: each lease it is granted is recorded under
`/morphz/instances/<id>` (bound to that lease). A process starting under an id whose
record names another live lease is that instance restarted (its former process was
killed, and its lease would otherwise keep its contexts for a TTL): it revokes that
lease, so the contexts are free at once, and takes them with higher tokens. A process
that finds its id taken by a newer process's lease later (its own lease having ended)
was superseded: it refuses every commit for good (a duplicate id fails closed; fencing
keeps either from writing over the other).
"""
from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

from morphz.shared.coord.api import CoordinationUnavailable, Coordinator, Holder
from morphz.services.transaction.core.ownership import Ownership
from morphz.shared.errors import MorphzError

OWNERS_PREFIX = "/morphz/owners/"
INSTANCES_PREFIX = "/morphz/instances/"
DEFAULT_TTL = 10  # seconds
_log = logging.getLogger("morphz.ownership")


@dataclass(frozen=True)
class Instance:
    """Who this transaction instance is: named in its ownership keys, and so in the
    NOT_OWNER errors of the others (with the address its clients should use)."""
    id: str
    address: str

    def encode(self) -> bytes:
        return json.dumps({"instance": self.id, "address": self.address}).encode()

    @staticmethod
    def decode(raw: bytes) -> "Instance":
        try:
            d = json.loads(raw)
            return Instance(str(d["instance"]), str(d.get("address", "")))
        except (ValueError, KeyError, TypeError):
            return Instance(raw[:200].decode("utf-8", "replace"), "")


class LeaseOwnership(Ownership):
    def __init__(self, coordinator: Coordinator, instance: Instance, *,
                 ttl: int = DEFAULT_TTL, prefix: str = OWNERS_PREFIX,
                 instances: str = INSTANCES_PREFIX,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if ttl < 2:
            raise ValueError("the lease TTL must be at least 2 seconds")
        self._coord, self.instance, self._ttl = coordinator, instance, ttl
        self._prefix, self._clock = prefix, clock
        self._record = instances + instance.id  # which lease this instance id runs under
        self._recorded = 0  # the lease named there by this process (0: not yet)
        self._superseded = ""  # why a newer process with this id took over ("" if none)
        self._renew_every = ttl / 3
        # Commits stop this long before the lease could expire (measured from when its
        # last renewal was sent), leaving time for one already checked to reach storage.
        self._margin = ttl / 4
        self._lock = threading.Lock()  # guards the lease state below
        self._lease = 0                # 0: none (etcd never grants lease 0)
        self._valid_until = 0.0        # by self._clock
        self._trouble = "no lease granted yet"  # why commits are refused now ("" if not)
        self._tokens: dict[str, int] = {}        # context -> token, under self._lease
        self._taking = threading.Lock()  # one ownership transaction at a time
        self._stop = threading.Event()
        self._keeper = threading.Thread(target=self._keep, name="ownership-lease",
                                        daemon=True)

    def start(self) -> None:
        """Ask for the first lease now (so a started instance can commit at once), then
        keep it in the background; an etcd that does not answer yet is retried there.
        A former process of this instance that still holds a lease loses it now."""
        self._grant()
        self._keeper.start()

    def close(self) -> None:
        """Stop renewing and revoke the lease: the others may take its contexts now
        rather than after the TTL. Call once no commit is in flight."""
        self._stop.set()
        if self._keeper.is_alive():
            self._keeper.join()
        with self._lock:
            lease, self._lease, self._tokens = self._lease, 0, {}
            self._trouble = "the instance is stopping"
        if lease:
            try:
                self._coord.revoke(lease)
            except CoordinationUnavailable as e:  # it expires by itself
                _log.warning("could not revoke lease %x on stop: %s", lease, e)

    # -- commits ---------------------------------------------------------------------
    def token(self, context: str) -> int:
        with self._lock:
            self._check_live(context)
            token = self._tokens.get(context)
        if token:
            return token
        with self._taking:
            return self._take(context)

    def describe(self, context: str) -> dict:
        with self._lock:  # held here on a live lease: no need to ask etcd
            token = self._tokens.get(context)
            if token is not None and not self._trouble and self._clock() < self._valid_until:
                return {"owner": self.instance.id, "owner_address": self.instance.address,
                        "fencing_token": token}
        try:
            holder = self._coord.get(self._prefix + context)
        except CoordinationUnavailable as e:  # a status still answers; says why not
            return {"owner": f"unknown: etcd did not answer ({e})"[:200]}
        if holder is None:
            return {}
        owner = Instance.decode(holder.value)
        return {"owner": owner.id, "owner_address": owner.address,
                "fencing_token": holder.create_revision}

    def fenced(self, context: str, token: int) -> None:
        with self._lock:
            if self._tokens.get(context) == token:
                del self._tokens[context]  # ask etcd again: NOT_OWNER names the new owner

    def trouble(self) -> str:
        with self._lock:
            return self._lease_trouble()

    def _lease_trouble(self) -> str:
        """Under self._lock: why the lease is not surely alive ("" if it is)."""
        trouble = self._trouble
        if not trouble and self._clock() >= self._valid_until:
            trouble = f"lease not renewed within {self._ttl - self._margin:g} s"
        return trouble

    def _check_live(self, context: str) -> None:
        """Under self._lock: refuse unless the lease is surely alive."""
        trouble = self._lease_trouble()
        if trouble:
            raise MorphzError("OWNERSHIP_LOST", f"instance {self.instance.id} cannot commit "
                              f"to context {context}: {trouble}; it resumes once it holds "
                              "a live lease and owns the context again", context=context,
                              instance=self.instance.id, cause=trouble)

    def _take(self, context: str) -> int:
        with self._lock:
            self._check_live(context)
            lease = self._lease
            token = self._tokens.get(context)
        if token:  # taken by another thread while this one waited
            return token
        try:
            created, holder = self._coord.create(self._prefix + context,
                                                 self.instance.encode(), lease)
        except CoordinationUnavailable as e:
            raise MorphzError("OWNERSHIP_LOST", f"instance {self.instance.id} cannot take "
                              f"context {context}: etcd did not answer ({e})",
                              context=context, instance=self.instance.id,
                              cause=str(e)[:200]) from None
        if created or holder.lease == lease:
            return self._keep_token(context, lease, holder)
        # Held under another lease, even one naming this instance's id (its previous
        # process, or a duplicate id): never taken from a live lease, only once it ends.
        owner = Instance.decode(holder.value)
        raise MorphzError("NOT_OWNER", f"context {context} is owned by instance {owner.id}"
                          + (f" at {owner.address}" if owner.address else ""),
                          context=context, owner=owner.id,
                          owner_address=owner.address or None)

    def _keep_token(self, context: str, lease: int, holder: Holder) -> int:
        with self._lock:
            if self._lease != lease:  # lost while etcd answered: the key dies with it
                self._check_live(context)
                raise MorphzError("OWNERSHIP_LOST", f"the lease changed while taking "
                                  f"context {context}; try again", context=context,
                                  instance=self.instance.id)
            self._tokens[context] = holder.create_revision
        _log.info("instance %s owns context %s (fencing token %d)", self.instance.id,
                  context, holder.create_revision)
        return holder.create_revision

    # -- the lease keeper ------------------------------------------------------------
    def _keep(self) -> None:
        while not self._stop.wait(self._renew_every):
            with self._lock:
                lease = self._lease
            if self._superseded:
                continue
            if lease and self._recorded != lease:
                self._record_lease(lease)
            elif lease:
                self._renew(lease)
            else:
                self._grant()

    def _grant(self) -> None:
        sent = self._clock()
        try:
            lease = self._coord.grant(self._ttl)
        except CoordinationUnavailable as e:
            with self._lock:
                self._trouble = f"no lease: etcd did not answer ({e})"
            return
        with self._lock:
            self._lease, self._tokens = lease, {}
            self._valid_until = sent + self._ttl - self._margin
            self._trouble = "the lease is not recorded for this instance yet"
        _log.info("instance %s holds lease %x (TTL %d s)", self.instance.id, lease, self._ttl)
        self._record_lease(lease)

    def _record_lease(self, lease: int) -> None:
        """Name `lease` as this instance's in etcd, before any context is taken under it.
        At the first lease, another lease named there is this instance's former process
        (restarted): revoked, its contexts free now. Later, one is a newer process with
        this id: this one was superseded and stops for good."""
        first = not self._recorded
        try:
            created, holder = self._coord.create(self._record, self.instance.encode(), lease)
            if not created and holder.lease != lease and first:
                _log.warning("instance %s: revoking lease %x of its former process",
                             self.instance.id, holder.lease)
                self._coord.revoke(holder.lease)
                created, holder = self._coord.create(self._record, self.instance.encode(),
                                                     lease)
        except CoordinationUnavailable as e:
            with self._lock:
                if self._lease == lease:
                    self._trouble = f"lease not recorded: etcd did not answer ({e})"
            return
        with self._lock:
            if holder.lease != lease:
                self._superseded = (f"another process runs as instance {self.instance.id} "
                                    f"(lease {holder.lease:x}): this one stopped")
                self._trouble = self._superseded
                self._lease, self._tokens = 0, {}
            elif self._lease == lease:
                self._recorded, self._trouble = lease, ""
        if self._superseded:
            _log.error("instance %s: %s", self.instance.id, self._superseded)

    def _renew(self, lease: int) -> None:
        sent = self._clock()  # the lease lives at least TTL from here if this succeeds
        try:
            left = self._coord.keep_alive(lease)
        except CoordinationUnavailable as e:
            with self._lock:
                if self._lease == lease and not self._trouble:
                    _log.error("lease %x not renewed (%s): refusing commits", lease, e)
                if self._lease == lease:
                    self._trouble = f"lease not renewed: etcd did not answer ({e})"
            return
        with self._lock:
            if self._lease != lease:
                return
            if left > 0:
                if self._trouble:
                    _log.info("lease %x renewed again: commits resume", lease)
                self._valid_until = sent + min(left, self._ttl) - self._margin
                self._trouble = ""
                return
            # Expired: its keys are gone and others may own the contexts by now.
            self._lease, self._tokens = 0, {}
            self._trouble = "the lease expired"
        _log.error("lease %x expired: refusing commits until a new lease is granted", lease)
        if not self._superseded:
            self._grant()
