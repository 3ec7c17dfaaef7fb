"""Where the contexts' indexes live: one folder per context under one root, a generation
directory per build and a CURRENT file naming the live one (a rebuild's swap replaces it
atomically), the feed positions the follower keeps beside them, and the lock that keeps
one recall process per root."""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import threading
from typing import Callable, Iterable, Optional

from morphz.services.recall.index.tantivy_index import ContextIndex
from morphz.services.recall.index.vector_cache import DIR as VECTOR_CACHE_DIR
from morphz.shared.errors import MorphzError



def lock_root(root: str) -> Callable[[], None]:
    """Hold `<root>/LOCK` for this process (one recall process per index folder: two
    would interleave their generations and feed positions); returns the release."""
    os.makedirs(root, exist_ok=True)
    fd = os.open(os.path.join(root, "LOCK"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise MorphzError("RECALL_INDEX_LOCKED", "another recall process uses this index "
                          "folder; give each replica its own --data") from None
    return lambda: os.close(fd)


class IndexDirectory:
    """Per-context index directories under one root, with atomic replacement for
    rebuilds: `<root>/<name>/<generation>/`, `<root>/<name>/CURRENT` names the live one."""

    def __init__(self, root: str) -> None:
        self.root = root
        os.makedirs(root, exist_ok=True)
        self._open: dict[str, ContextIndex] = {}
        self._lock = threading.Lock()  # held briefly: never while an index is opened
        # context -> held while that context's index is opened (a large one takes
        # seconds: loading its vectors, partitioning them); other contexts go on.
        self._opening: dict[str, threading.Lock] = {}
        self._resets = 0  # an open that a reset overtook is not kept

    def _dir(self, context: str) -> str:
        name = context.encode("utf-8").hex()
        if len(name) > 128:  # stay well inside file-name limits, without collisions
            name = "h" + hashlib.sha256(context.encode("utf-8")).hexdigest()
        return os.path.join(self.root, name)

    def _current(self, context: str) -> Optional[str]:
        try:
            with open(os.path.join(self._dir(context), "CURRENT")) as f:
                return f.read().strip() or None
        except FileNotFoundError:
            return None

    def _set_current(self, context: str, generation: str) -> None:
        pointer = os.path.join(self._dir(context), "CURRENT")
        with open(pointer + ".tmp", "w") as f:
            f.write(generation)
            f.flush()
            os.fsync(f.fileno())
        os.replace(pointer + ".tmp", pointer)

    def get(self, context: str, timeout: Optional[float] = None) -> ContextIndex:
        """The context's live index, opened at its first use in this process. While
        another thread opens it, wait for that (at most `timeout` seconds, then
        TimeoutError; None: as long as it takes)."""
        while True:
            with self._lock:
                idx = self._open.get(context)
                if idx is not None:
                    return idx
                opening = self._opening.setdefault(context, threading.Lock())
                resets = self._resets
            if not opening.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
                raise TimeoutError(f"the index of {context!r} is still being opened")
            try:
                with self._lock:
                    idx = self._open.get(context)
                    if idx is not None:
                        return idx
                idx = self._opened(context)
                with self._lock:
                    if self._resets == resets:  # (a swap meanwhile: its index is live)
                        return self._open.setdefault(context, idx)
            finally:
                opening.release()
            # A reset dropped the indexes meanwhile: open what it left.

    def is_open(self, context: str) -> bool:
        with self._lock:
            return context in self._open

    def contexts(self) -> list[str]:
        """The contexts with an index folder here (those named by a digest excepted)."""
        out = []
        for name in os.listdir(self.root):
            try:
                if os.path.isdir(os.path.join(self.root, name)):
                    out.append(bytes.fromhex(name).decode("utf-8"))
            except ValueError:  # a digest-named folder, or something else
                continue
        return sorted(out)

    # The change-feed position the follower has applied every context's index up to: a
    # lower bound (written after the indexes' own commits), so a restart re-reads at
    # most a page that each index then skips by its own position. With it, the identity
    # of the store whose feed it is ("POSITION STORE"; a file of older versions holds
    # the position alone).
    def _feed_file(self, feed: str) -> str:
        # One per followed feed: the store's, or each storage shard's (names: [\w.-]).
        return os.path.join(self.root, f"FEED_POSITION.{feed}" if feed else "FEED_POSITION")

    def feed_position(self, feed: str = "") -> tuple[int, str]:
        try:
            with open(self._feed_file(feed)) as f:
                position, _, store = f.read().strip().partition(" ")
                return int(position or 0), store
        except (FileNotFoundError, ValueError):
            return 0, ""  # missing or torn: from the start (nothing is indexed twice)

    def save_feed_position(self, position: int, store: str = "", feed: str = "") -> None:
        path = self._feed_file(feed)
        with open(path + ".tmp", "w") as f:
            f.write(f"{position} {store}".strip())
        os.replace(path + ".tmp", path)

    def reset(self, contexts: Optional[Iterable[str]] = None) -> None:
        """Drop every context's index (the store they were built from was replaced, by a
        restore say), or those of `contexts` (one shard's): each starts again, empty,
        at its next use."""
        with self._lock:
            self._resets += 1
            if contexts is None:
                self._open.clear()
                names = os.listdir(self.root)
            else:
                contexts = list(contexts)
                names = [os.path.basename(self._dir(c)) for c in contexts]
                for c in contexts:
                    self._open.pop(c, None)
            for name in names:
                if name == VECTOR_CACHE_DIR:  # vectors of texts: valid whatever the store
                    continue
                if os.path.isdir(os.path.join(self.root, name)):
                    shutil.rmtree(os.path.join(self.root, name), ignore_errors=True)

    def fresh(self, context: str) -> ContextIndex:
        """An empty index in a new generation directory of its own, not yet live."""
        self.get(context)  # first use cleans up before anything new is made
        with self._lock:
            return ContextIndex(self._new_generation_locked(context))

    def _opened(self, context: str) -> ContextIndex:
        """Open the context's live index (its opening lock held, the directory's not)."""
        # First use in this process: no rebuild of it can be running (a rebuild's
        # fresh() opens the live index first), so every other generation is a leftover
        # of a rebuild that died; remove them.
        gen = self._current(context)
        base = self._dir(context)
        for name in os.listdir(base) if os.path.isdir(base) else ():
            if name.startswith("g") and name != gen:
                shutil.rmtree(os.path.join(base, name), ignore_errors=True)
        if gen is None:
            with self._lock:
                idx = ContextIndex(self._new_generation_locked(context))
        else:
            try:
                idx = ContextIndex(os.path.join(base, gen))
            except ValueError:  # written by another schema version: start over
                with self._lock:
                    idx = ContextIndex(self._new_generation_locked(context))  # worker refills
        if os.path.basename(idx.path) != gen:
            self._set_current(context, os.path.basename(idx.path))
        return idx

    def _new_generation_locked(self, context: str) -> str:
        """A directory no other index uses: one past the highest generation on disk."""
        base = self._dir(context)
        os.makedirs(base, exist_ok=True)
        taken = [int(n[1:]) for n in os.listdir(base) if n[:1] == "g" and n[1:].isdigit()]
        path = os.path.join(base, f"g{max(taken, default=0) + 1}")
        os.mkdir(path)
        return path

    def discard(self, context: str, new: ContextIndex) -> None:
        """Remove a generation `fresh` made that will not go live (its rebuild stopped);
        the live index is left as it was."""
        with self._lock:
            if os.path.basename(new.path) == self._current(context):
                return
        shutil.rmtree(new.path, ignore_errors=True)

    def swap(self, context: str, new: ContextIndex) -> None:
        """Make `new` the live index of the context and delete the old generation."""
        with self._lock:
            old = self._current(context)
            self._set_current(context, os.path.basename(new.path))
            self._open[context] = new
        if old and old != os.path.basename(new.path):
            shutil.rmtree(os.path.join(self._dir(context), old), ignore_errors=True)
