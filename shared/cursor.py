"""Opaque continuation cursors, bound to the request that issued them.

A cursor carries the hash of the request's parameters and the version of the data
it paged (index position for search, mind version for traversal and frame listings),
and where the next page starts: an offset, and a key to read after where the data is
read in key order. Reusing it with other parameters, tampering with it, or continuing
after the data moved is rejected with a stable reason (`<service>_CURSOR_INVALID`,
`<service>_CURSOR_STALE`) instead of silently mixing two result sets.
"""
from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from morphz.shared.errors import MorphzError

MAX_CURSOR_CHARS = 2048  # a key after (a frame id: 200 characters) fits


def params_hash(params: dict[str, Any]) -> str:
    # repr of the sorted items: canonical for these values (str, int, None, lists of
    # str) and several times cheaper than json.dumps on every search.
    raw = repr(sorted(params.items()))
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def _check(body: bytes) -> str:
    return hashlib.sha256(b"morphz-recall-cursor:" + body).hexdigest()[:16]


def encode(kind: str, params: dict[str, Any], version: str, offset: int,
           after: str = "") -> str:
    fields = {"k": kind, "h": params_hash(params), "v": version, "o": offset}
    if after:
        fields["a"] = after
    body = json.dumps(fields, separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(body).decode().rstrip("=") + "." + _check(body)


def version_of(cursor: str) -> str:
    """The data version a cursor names ('' when it is not a readable cursor; decode
    then says why)."""
    try:
        data = cursor[:MAX_CURSOR_CHARS].rsplit(".", 1)[0]
        version = json.loads(base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)))["v"]
        return version if isinstance(version, str) else ""
    except (ValueError, KeyError, TypeError):
        return ""


def invalid(service: str) -> MorphzError:
    """One answer for a made-up cursor and for one issued to other parameters (another
    context's, SEC-02): neither says anything about what it was issued for."""
    return MorphzError(f"{service}_CURSOR_INVALID", "the cursor is not one issued for these "
                       "parameters: pass next_cursor back unchanged with the request that "
                       "returned it, or start over without it")


def decode(cursor: str, kind: str, params: dict[str, Any], version: str, *,
           service: str = "RECALL") -> int:
    """The offset to continue from, or a MorphzError saying why not."""
    return decode_position(cursor, kind, params, version, service=service)[0]


def decode_position(cursor: str, kind: str, params: dict[str, Any], version: str, *,
                    service: str = "RECALL") -> tuple[int, str]:
    """(offset, key after) to continue from, or a MorphzError saying why not."""
    try:
        if len(cursor) > MAX_CURSOR_CHARS:
            raise ValueError("too long")
        data, check = cursor.rsplit(".", 1)
        body = base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))
        if _check(body) != check:
            raise ValueError("checksum")
        c = json.loads(body)
        offset, after = c["o"], c.get("a", "")
        if c["k"] != kind or not isinstance(offset, int) or offset < 0 \
                or not isinstance(after, str):
            raise ValueError("shape")
    except (ValueError, KeyError, TypeError):
        raise invalid(service) from None
    if c["h"] != params_hash(params):  # another context's or query's: as a made-up one
        raise invalid(service)
    if c["v"] != version:
        raise MorphzError(f"{service}_CURSOR_STALE", f"the data changed since the first page "
                          f"(version {c['v']} -> {version}); restart without the cursor",
                          issued=c["v"], current=version)
    return offset, after
