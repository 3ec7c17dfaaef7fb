"""An event's time at its source (`occurred_at`): ISO 8601 with an explicit UTC offset."""
from __future__ import annotations

from datetime import datetime

from morphz.shared.errors import MorphzError


def check_occurred_at(value: str) -> str:
    """'' or the time normalized to ISO 8601 with microseconds and its own offset; a time
    without an offset is refused (whose local time would it be?)."""
    if not value:
        return ""
    if not isinstance(value, str):
        raise MorphzError("CONTEXT_INPUT_INVALID", "occurred_at must be a string",
                          field="occurred_at")
    try:
        dt = datetime.fromisoformat(value.strip())
    except ValueError:
        raise MorphzError("CONTEXT_INPUT_INVALID", f"occurred_at {value[:64]!r} is not an "
                          "ISO 8601 time (e.g. 2026-08-04T09:00:00+08:00)",
                          field="occurred_at") from None
    if dt.utcoffset() is None:
        raise MorphzError("CONTEXT_INPUT_INVALID", f"occurred_at {value[:64]!r} has no UTC "
                          "offset; add one (e.g. +08:00 or Z)", field="occurred_at")
    return dt.isoformat(timespec="microseconds")
