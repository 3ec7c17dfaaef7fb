"""Checks of the names requests carry (contexts, sessions, activations, request ids) and
of the ids they look things up by, shared by every service."""
from __future__ import annotations

import re

from morphz.shared.errors import MorphzError

_NAME = re.compile(r"[^\s\x00-\x1f\x7f]{1,128}\Z")
MAX_LOOKUP_CHARS = 256  # above the longest frame id (200) or @eN ref


def check_name(value: str, what: str) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise MorphzError("CONTEXT_INPUT_INVALID",
                          f"{what} must be 1-128 printable characters without spaces",
                          field=what)
    return value


def check_lookup(value: str, what: str) -> str:
    """An id something is looked up by (a frame id, @eN, an event id): any text of
    bounded length; one that names nothing is then reported as not found."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_LOOKUP_CHARS:
        raise MorphzError("CONTEXT_INPUT_INVALID",
                          f"{what} must be 1-{MAX_LOOKUP_CHARS} characters", field=what)
    return value
