"""An LMDB environment rewritten compacted, in place: LMDB never shrinks its data file,
and the pages a commit freed keep their bytes until they are reused, so bytes deleted
or overwritten (an erasure's: docs/privacy.md) stay on disk until the environment's live
pages are copied into a new file that replaces the old one. The caller keeps every
other user of the environment out meanwhile and opens it again afterwards."""
from __future__ import annotations

import os
import shutil
from typing import Callable

import lmdb

from morphz.shared.process.durable_files import sync_dir

SCRATCH = "compact.tmp"  # the copy's folder, beside data.mdb


def rewrite_compacted(env: lmdb.Environment,
                      closed: Callable[[], None] = lambda: None) -> tuple[int, int]:
    """Copy `env` compacted, close it and put the copy in place of its data file (an
    atomic rename: a crash leaves the old file or the new one, whole). (bytes before,
    bytes after.) `closed()` is called once the environment is closed: from then on the
    caller opens it again, whether this ends well or raises."""
    path = env.path()
    data = os.path.join(path, "data.mdb")
    scratch = os.path.join(path, SCRATCH)
    before = os.path.getsize(data)
    shutil.rmtree(scratch, ignore_errors=True)
    os.mkdir(scratch)
    try:
        env.copy(scratch, compact=True)
        env.close()
        closed()
        os.replace(os.path.join(scratch, "data.mdb"), data)
        sync_dir(path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return before, os.path.getsize(data)
