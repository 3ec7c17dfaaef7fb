"""What every service client shares: request construction and the default deadline.
Clients trace nothing themselves: their composition root hands them a channel that
carries the trace (shared/grpc/tracing.py client_tracing)."""
from __future__ import annotations

from morphz.shared.errors import MorphzError

DEFAULT_TIMEOUT = 30.0  # seconds; every client call carries a deadline


def build_request(cls, **fields):
    """Build a request message; a value the wire type cannot hold (an out-of-range
    integer, a wrong type) is a structured input error, not a crash."""
    try:
        return cls(**fields)
    except (ValueError, TypeError) as e:
        raise MorphzError("CONTEXT_INPUT_INVALID", f"invalid request field: {e}") from None
