"""Checks of the names requests carry (contexts, sessions, activations, request ids) and
of the ids they look things up by, shared by every service."""
from __future__ import annotations

import re

from morphz.shared.errors import MorphzError
from morphz.shared.limits import LOOKUP_CHARS, NAME_CHARS

_NAME = re.compile(r"[^\s\x00-\x1f\x7f]{1,%d}\Z" % NAME_CHARS.max)
MAX_LOOKUP_CHARS = LOOKUP_CHARS.max  # above the longest frame id (200) or @eN ref


def check_name(value: str, what: str) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        over = NAME_CHARS.details(size=len(value)) \
            if isinstance(value, str) and len(value) > NAME_CHARS.max else {}
        raise MorphzError("CONTEXT_INPUT_INVALID", f"{what} must be 1-{NAME_CHARS.max} "
                          "printable characters without spaces", field=what, **over)
    return value


def check_label(value: str, what: str) -> str:
    """A free-form label (an event's actor): any text up to name_chars characters."""
    if len(value) > NAME_CHARS.max:
        raise MorphzError("CONTEXT_INPUT_INVALID", f"{what} must be at most "
                          f"{NAME_CHARS.max} characters", field=what,
                          **NAME_CHARS.details(size=len(value)))
    return value


def check_lookup(value: str, what: str) -> str:
    """An id something is looked up by (a frame id, @eN, an event id): any text of
    bounded length; one that names nothing is then reported as not found."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_LOOKUP_CHARS:
        over = LOOKUP_CHARS.details(size=len(value)) \
            if isinstance(value, str) and len(value) > MAX_LOOKUP_CHARS else {}
        raise MorphzError("CONTEXT_INPUT_INVALID",
                          f"{what} must be 1-{MAX_LOOKUP_CHARS} characters", field=what, **over)
    return value
