"""Time bounds for recall: ISO 8601 with an explicit UTC offset, as epoch microseconds."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Optional

from morphz.shared.errors import MorphzError
from morphz.shared.mind import records as R

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = timedelta(microseconds=1)


def to_us(dt: datetime) -> int:
    return (dt - _EPOCH) // _US


def from_us(us: int) -> str:
    return (_EPOCH + us * _US).isoformat(timespec="microseconds")


def parse_bound(value: str, field: str) -> Optional[int]:
    """'' -> None; otherwise the instant in epoch microseconds. A time without an
    offset is ambiguous (whose local time?) and rejected."""
    if not value:
        return None
    try:
        dt = datetime.fromisoformat(value.strip())
    except ValueError:
        raise MorphzError("RECALL_TIME_INVALID", f"--{field} {value[:64]!r} is not an ISO 8601 "
                          "time (e.g. 2026-08-04T09:00:00+08:00)", field=field) from None
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise MorphzError("RECALL_TIME_INVALID", f"--{field} {value[:64]!r} has no UTC offset; "
                          "add one (e.g. +08:00 or Z)", field=field)
    return to_us(dt)


def event_time_us(value: str, data: Optional[dict] = None) -> Optional[int]:
    """The time an event is indexed under: when it occurred at its source where its
    `data` says (an append's occurred_at), else `value`, when it was recorded."""
    value = (data or {}).get(R.OCCURRED_AT) or value
    try:
        return to_us(datetime.fromisoformat(value))
    except (ValueError, TypeError):
        return None
