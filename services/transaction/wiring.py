"""Wires the transaction service (built by services/server/node.py): where it runs in
the process, its core over the store it is given (in-process or a storage client) and
its servicer; where it runs elsewhere, its client."""
from __future__ import annotations

import logging
from typing import Callable, Optional

import grpc

from morphz.api.transaction.v1 import transaction_pb2, transaction_pb2_grpc
from morphz.services.transaction.remote import RemoteTransactions
from morphz.services.transaction.core.engine import TransactionCore
from morphz.services.transaction.core.ownership import SOLE_OWNER, Ownership
from morphz.services.transaction.core.retention import Schedule
from morphz.services.transaction.jobs import transaction_jobs
from morphz.services.transaction.retention_timer import RetentionTimer, owned_here
from morphz.services.transaction.servicer import TransactionServicer
from morphz.shared.process.faults import NO_FAULTS, Faults
from morphz.shared.storage.owner_cache import OwnerCache
from morphz.shared.process.telemetry import core_tracer
from morphz.shared.wired import Host, Wired

TRANSACTION = transaction_pb2.DESCRIPTOR.services_by_name["TransactionService"].full_name
_log = logging.getLogger("morphz.server")


def register(host: Host, *, faults: Faults = NO_FAULTS, owners: Ownership = SOLE_OWNER,
             shard_of: Callable[[str], str] = lambda context: "",
             on_store_change: Optional[Callable[[Callable[[], None]], None]] = None) -> Wired:
    """Add the transaction servicer to host.server, with its server-side jobs (audits,
    rebuilds, retention: transaction/jobs.py) under host.admission and the retention
    timer (every host.config.retention_every seconds); Wired.core is its TransactionCore.

    `owners`: the contexts this instance may write (with etcd, under its lease);
    `shard_of`: a context's storage shard; `on_store_change(forget)`: where the store is
    remote, registers what to run when another store may answer behind its address."""
    # The write path keeps the rows it reads and writes (owner_cache.py): over a remote
    # store a commit is then one round trip, not one per row read; in-process it saves
    # LMDB calls, each of which lets go of the interpreter's lock (at 64 commits in
    # flight, half the thread switches a commit).
    cache = OwnerCache(host.store)
    if on_store_change is not None:
        on_store_change(cache.forget)
    schedule = Schedule(host.config.retention_every)
    core = TransactionCore(host.store, faults=faults, rules_version=host.config.rules_version,
                           tracer=core_tracer(host.tracer, "morphz.transaction"),
                           owners=owners, shard_of=shard_of, cache=cache,
                           retention_schedule=schedule)
    jobs = transaction_jobs(core, host.admission)
    transaction_pb2_grpc.add_TransactionServiceServicer_to_server(
        TransactionServicer(core, jobs), host.server)
    timer = RetentionTimer(core, jobs, schedule, here=owned_here(owners)).start()
    # the timer stops first; jobs are cancelled and awaited when the server stops,
    # before the store closes
    return Wired([TRANSACTION], core, [timer.stop, jobs.close])


def startup_check(core: TransactionCore) -> list[str]:
    """The problems found at the projections' ends, logged (LMDB itself recovers by
    design, copy-on-write)."""
    problems = core.startup_check()
    for problem in problems:
        _log.error("startup check: %s (run `morphz context audit`)", problem)
    return problems


def connect(channel: grpc.Channel,
            reach: Callable[[str], grpc.Channel]) -> RemoteTransactions:
    """The transaction service at the other end of `channel`, answering as the core
    does; writes follow NOT_OWNER redirects to the context's owner, reached through
    `reach(address)`."""
    return RemoteTransactions(channel, connect=reach)
