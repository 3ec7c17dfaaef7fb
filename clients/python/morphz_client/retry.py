"""Which failures a safe call may be sent again after, and where a refused write goes."""
from __future__ import annotations

from typing import Optional

from morphz.client.calls import TRANSACTION, Call, Safety
from morphz.client.errors import MorphzError

# Transport failures and refusals that come before any effect, each gone on a later try:
# the server unreachable or restarting, a deadline, an owner's lease not yet renewed,
# a busy server's limits, a write race the server itself says to retry.
TRANSIENT = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "OWNERSHIP_LOST",
                       "CONCURRENT_UPDATE", "CONCURRENT_RPC_LIMIT", "BYTES_IN_FLIGHT_LIMIT"})
MAX_REDIRECTS = 2  # an owner can change once more while a redirect is followed


def retryable(call: Call, err: MorphzError) -> bool:
    return call.safety is not Safety.NEVER and err.reason in TRANSIENT


def redirect(call: Call, err: MorphzError) -> Optional[str]:
    """The owner's address a NOT_OWNER refusal names (several transaction instances):
    the write was refused unread, so it may go there whatever its safety."""
    if call.service == TRANSACTION and err.reason == "NOT_OWNER":
        address = err.details.get("owner_address")
        return address if isinstance(address, str) and address else None
    return None
