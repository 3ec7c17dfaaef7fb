"""The erasure log (docs/privacy.md, PRIV-03): what each commit that erased events took,
kept beside the store and outside it, so a backup taken before an erasure and restored
after it can have the erasure applied again (`morphz restore --erasures LOG`).

One JSON line per such commit, written and fsynced before the commit itself (a crash in
between leaves a line for an erasure that did not commit: re-applied at a restore, it
erases what was asked to be erased; the other order could lose one):

    {"store": ID, "context": NAME, "commit_seq": N, "at": TIME,
     "events": [[SEQ, SHA-256 of the event's record before the erasure rewrote it], ...]}

The digests name the records, not their content: a restore erases an event again only
when the restored store holds exactly that record. A store opens its log (LMDB:
<data>/store/erasures.jsonl; PostgreSQL: <data>/erasures.jsonl) at start, empty if it
had none, so a store that never erased has one to show."""
from __future__ import annotations

import json
import os
import threading
from datetime import datetime, timezone

from morphz.shared.errors import MorphzError

NAME = "erasures.jsonl"
MAX_LINE_BYTES = 64 << 20


class ErasureLog:
    def __init__(self, folder: str) -> None:
        self.path = os.path.join(folder, NAME)
        self._lock = threading.Lock()
        os.makedirs(folder, exist_ok=True)
        with open(self.path, "ab"):
            pass

    def append(self, store: str, entries: list[tuple[str, int, list[tuple[int, str]]]]) -> None:
        """A line per (context, commit_seq, [(seq, digest)]), durable when this returns."""
        at = datetime.now(timezone.utc).isoformat(timespec="microseconds")
        lines = b"".join(json.dumps(
            {"store": store, "context": context, "commit_seq": commit_seq, "at": at,
             "events": [list(e) for e in events]}, ensure_ascii=False,
            separators=(",", ":")).encode() + b"\n" for context, commit_seq, events in entries)
        with self._lock, open(self.path, "ab") as f:
            f.write(lines)
            f.flush()
            os.fsync(f.fileno())


def read(path: str) -> list[dict]:
    """The lines of an erasure log, checked; ERASURE_LOG_INVALID for a file that is not
    one (a missing file included: every store since erasures keeps one)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise MorphzError("ERASURE_LOG_INVALID", f"cannot read the erasure log {path}: "
                          f"{e.strerror or e}", path=path) from None
    out = []
    for n, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            ok = (isinstance(d, dict) and isinstance(d.get("context"), str)
                  and isinstance(d.get("commit_seq"), int) and isinstance(d.get("at"), str)
                  and all(isinstance(s, int) and isinstance(h, str) and len(h) == 64
                          for s, h in d.get("events")))
        except (ValueError, TypeError):
            ok = False
        if not ok:
            raise MorphzError("ERASURE_LOG_INVALID", f"{path} line {n} is not an erasure "
                              "log's line", path=path, line=n)
        out.append(d)
    return out
