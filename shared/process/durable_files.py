"""Files written so that a crash leaves either the old or the new content: the bytes
fsynced, and the folder fsynced after a create or rename (else the name may be lost)."""
from __future__ import annotations

import os


def sync_dir(folder: str) -> None:
    """Make the folder's entries (files created, renamed or removed in it) durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_synced(path: str, data: bytes) -> None:
    """Write `data` to `path` (replacing it) and fsync the file."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
