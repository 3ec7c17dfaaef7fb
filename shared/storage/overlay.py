"""Reading through writes not yet in the store: a Reader's rows with an overlay of
(table, key) -> value (None: deleted) applied, in the store's key order."""
from __future__ import annotations

from typing import Iterator, Mapping, Optional

from morphz.shared.storage import keys as keycodec
from morphz.shared.storage.api import Key, Reader


def overlay_scan(base: Reader, overlay: Mapping[tuple[str, Key], Optional[bytes]],
                 table: str, prefix: Key = (), after: Optional[Key] = None, limit: int = 0,
                 reverse: bool = False) -> Iterator[tuple[Key, bytes]]:
    """base.scan(table, prefix, after, limit, reverse) as if the overlay were written."""
    mine = [(k, v) for (t, k), v in overlay.items()
            if t == table and k[:len(prefix)] == prefix]
    if not mine:  # nothing written here: the store's own scan is already right
        yield from base.scan(table, prefix, after, limit, reverse)
        return
    rows = dict(base.scan(table, prefix))
    for k, v in mine:
        if v is None:
            rows.pop(k, None)
        else:
            rows[k] = v
    # Each key encoded once; encodings are unique, so the key itself is never compared.
    ordered = sorted(((keycodec.encode(k), k) for k in rows), reverse=reverse)
    if after is not None:
        bound = keycodec.encode(after)
        ordered = [e for e in ordered if (e[0] < bound if reverse else e[0] > bound)]
    for n, (_, k) in enumerate(ordered):
        if limit and n >= limit:
            return
        yield k, rows[k]
