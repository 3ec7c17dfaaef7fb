"""The Deadline (shared/deadline.py) of a gRPC call: its deadline as the client sent it
(time_remaining) and its cancellation (is_active turns false when the client cancels,
its deadline passes or its connection drops), paced if the call is an admitted
expensive one (shared/grpc/admission.py puts its ticket's pace on the context)."""
from __future__ import annotations

import grpc

from morphz.shared.deadline import Deadline


def deadline_of(context: grpc.ServicerContext) -> Deadline:
    remaining = context.time_remaining()
    # gRPC answers a huge number for a call without a deadline
    seconds = remaining if remaining is not None and remaining < 10 ** 8 else None
    pace = getattr(context, "pace", None)
    if pace is None:
        return Deadline.after(seconds, lambda: not context.is_active())
    return Deadline.after(seconds, lambda: not context.is_active(), pace=pace)
