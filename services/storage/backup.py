"""Online backups of a storage shard, and their offline restore.

A backup is LMDB's compacting copy of the whole environment (LmdbStore.copy_compacted):
one read transaction, so it holds exactly the commits durable when it began, while
commits go on. The server writes it to a scratch folder in its data directory (the
copy is quick; sending it is at the caller's pace, and a read transaction held that
long would pin pages and hold off a map resize), hashes it, streams it to the caller
and deletes it. The caller (`morphz backup`) keeps it as an uncompressed tar file:

    MANIFEST.json   {"format": "morphz-backup", "version": 1, "feed_head", "contexts",
                     "taken_at", "size", "sha256", "store"}
    store/data.mdb  the copy: what `<data>/store/data.mdb` of a server holds

`restore` unpacks one into an empty data directory, checks the copy against its
manifest (size, hash, feed head, contexts) and gives the store a new identity.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Callable, Iterable, Iterator, Optional

import lmdb

from morphz.services.storage.lmdb import LmdbStore
from morphz.shared.process.durable_files import sync_dir
from morphz.shared.errors import MorphzError

FORMAT, VERSION = "morphz-backup", 1
MANIFEST_MEMBER, DATA_MEMBER = "MANIFEST.json", "store/data.mdb"
MAX_MANIFEST_BYTES = 64 << 10
CHUNK_BYTES = 1 << 20
MAX_CHUNK_BYTES = 4 << 20  # well under the 64 MiB message limit of every channel
SCRATCH = "backup.tmp"  # in the server's data directory, beside the store
STORE = "store"  # the store's folder in a data directory (app.py, roles.py)
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Manifest:
    feed_head: int
    contexts: int
    taken_at: str
    size: int
    sha256: str
    store: str
    version: int = VERSION

    def to_dict(self) -> dict:
        return {"format": FORMAT, **asdict(self)}

    @classmethod
    def from_dict(cls, d: object) -> "Manifest":
        """A manifest read from a file: anything else is BACKUP_INVALID."""
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise _invalid("its manifest is not a morphz backup's")
        if d.get("version") != VERSION:
            raise MorphzError("BACKUP_INVALID", f"backup format version {d.get('version')!r}; "
                              f"this morphz reads version {VERSION}",
                              version=str(d.get("version"))[:20], supported=VERSION)
        try:
            m = cls(**{k: d[k] for k in ("feed_head", "contexts", "taken_at", "size",
                                         "sha256", "store", "version")})
            ok = all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                     for n in (m.feed_head, m.contexts, m.size))
            ok = ok and isinstance(m.store, str) and bool(_SHA256.fullmatch(str(m.sha256)))
            datetime.fromisoformat(m.taken_at)
        except (KeyError, TypeError, ValueError):
            ok = False
        if not ok:
            raise _invalid("its manifest lacks a field or holds a malformed one")
        return m


def _invalid(why: str, **details: object) -> MorphzError:
    return MorphzError("BACKUP_INVALID", f"not a morphz backup: {why}", **details)


def _corrupt(why: str, **details: object) -> MorphzError:
    return MorphzError("BACKUP_CORRUPT", f"the backup is damaged: {why}", **details)


# -- the server side -------------------------------------------------------------------
@dataclass(frozen=True)
class Copy:
    """A backup made and waiting to be sent: its manifest and its file."""
    manifest: Manifest
    path: str

    def chunks(self, size: int) -> Iterator[bytes]:
        with open(self.path, "rb") as f:
            while chunk := f.read(size):
                yield chunk


class Backups:
    """One backup at a time per store, made in a scratch folder of its data directory
    and deleted once sent (or abandoned)."""

    def __init__(self, store: LmdbStore, data_dir: str) -> None:
        self._store = store
        self._scratch = os.path.join(data_dir, SCRATCH)
        self._slot = threading.Lock()
        self._copying = threading.Lock()  # held while LMDB copies: close() waits for it
        self._closed = False
        shutil.rmtree(self._scratch, ignore_errors=True)  # left by a server that died

    def close(self) -> None:
        """Refuse new backups and wait for a copy being made (before the store closes)."""
        with self._copying:
            self._closed = True

    @contextmanager
    def take(self) -> Iterator[Copy]:
        if not self._slot.acquire(blocking=False):
            raise MorphzError("BACKUP_RUNNING", "a backup of this store is being made or "
                              "sent; one at a time: retry once it is done")
        try:
            shutil.rmtree(self._scratch, ignore_errors=True)
            try:
                os.makedirs(self._scratch)
                with self._copying:
                    if self._closed:
                        raise MorphzError("BACKUP_FAILED", "the server is stopping")
                    info = self._store.copy_compacted(self._scratch)
                path = os.path.join(self._scratch, "data.mdb")
                size, digest = _digest(path)
            except (OSError, lmdb.Error) as e:  # a full disk, say
                raise MorphzError("BACKUP_FAILED", f"the server could not write its copy: {e}",
                                  error=type(e).__name__) from None
            yield Copy(Manifest(size=size, sha256=digest, **info), path)
        finally:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._slot.release()


def _digest(path: str) -> tuple[int, str]:
    h, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK_BYTES):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


# -- the caller's file -------------------------------------------------------------------
class _Checked(io.RawIOBase):
    """The streamed copy as a file tarfile reads from, counting and hashing it."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = iter(chunks)
        self._buf, self._off = b"", 0
        self.size = 0
        self.hash = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        parts = []
        while n:
            if self._off >= len(self._buf):
                chunk = next(self._chunks, None)
                if chunk is None:
                    break
                self._buf, self._off = chunk, 0
            left = len(self._buf) - self._off
            take = left if n < 0 else min(n, left)
            parts.append(self._buf[self._off:self._off + take])  # copies `take` bytes only
            self._off += take
            n = n - take if n > 0 else n
        out = b"".join(parts)
        self.size += len(out)
        self.hash.update(out)
        return out

    def exhausted(self) -> bool:
        return self._off >= len(self._buf) and next(self._chunks, None) is None


def write_backup(path: str,
                 source: Callable[[], tuple[Manifest, Iterable[bytes]]]) -> Manifest:
    """Write the backup `source()` gives at `path`, which must not exist
    (BACKUP_FILE_EXISTS): into a temporary file beside it, checked against the manifest,
    synced, then linked to `path` (so a failed or interrupted backup never leaves a file
    that looks whole). `source` is called once the file can be written."""
    if os.path.lexists(path):
        raise _exists(path)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".morphz-backup-", dir=folder)  # mode 0600
    except OSError as e:
        raise MorphzError("CONTEXT_INPUT_INVALID", f"cannot write in {folder}: "
                          f"{e.strerror or e}", field="to", path=path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            manifest, chunks = source()
            mtime = datetime.fromisoformat(manifest.taken_at).timestamp()
            with tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT) as tar:
                head = json.dumps(manifest.to_dict(), indent=2).encode() + b"\n"
                tar.addfile(_member(MANIFEST_MEMBER, len(head), mtime), io.BytesIO(head))
                data = _Checked(chunks)
                try:
                    tar.addfile(_member(DATA_MEMBER, manifest.size, mtime), data)
                except OSError:  # tarfile's "unexpected end of data"
                    if data.size < manifest.size:
                        raise _corrupt(f"the server sent {data.size} of {manifest.size} "
                                       "bytes") from None
                    raise
                if not data.exhausted() or data.hash.hexdigest() != manifest.sha256:
                    raise _corrupt("the bytes received are not the copy the server made")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)  # fails rather than replace a file made meanwhile
        except FileExistsError:
            raise _exists(path) from None
        sync_dir(folder)
    finally:
        os.unlink(tmp)
    return manifest


def _member(name: str, size: int, mtime: float) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, int(mtime), 0o600
    return info


def _exists(path: str) -> MorphzError:
    return MorphzError("BACKUP_FILE_EXISTS", f"{path} exists; a backup never overwrites a "
                       "file", path=path)


# -- restore ----------------------------------------------------------------------------
def restore(path: str, data_dir: str, dsn: str = "") -> dict:
    """Unpack the backup at `path` into `data_dir` (missing or empty), as the store a
    server on that data directory serves; or, given `dsn`, load it into the empty
    PostgreSQL store there (PostgresStore.load), `data_dir` left empty for the server's
    derived data. Returns its manifest and where it went."""
    data_dir = os.path.abspath(data_dir)
    created = _claim_target(data_dir)
    partial = os.path.join(data_dir, STORE + ".partial")
    try:
        manifest = _unpack(path, partial)
        _verify(partial, manifest)
        if dsn:
            return {**manifest.to_dict(), "data": data_dir, "store_dir": "postgres",
                    **_load_postgres(partial, dsn)}
        os.rename(partial, os.path.join(data_dir, STORE))
        sync_dir(data_dir)
    except BaseException:
        shutil.rmtree(data_dir if created else partial, ignore_errors=True)
        raise
    finally:
        if dsn:
            shutil.rmtree(partial, ignore_errors=True)
    return {**manifest.to_dict(), "data": data_dir, "store_dir": os.path.join(data_dir, STORE)}


def _load_postgres(partial: str, dsn: str) -> dict:
    """The verified copy loaded into the PostgreSQL store at `dsn` (with the copy's new
    identity): {"store": its identity}."""
    from morphz.services.storage.postgres import PostgresStore  # only here: psycopg
    store = PostgresStore(dsn)
    try:
        return {"store": store.load(partial)["store"]}
    finally:
        store.close()


def _claim_target(data_dir: str) -> bool:
    """Check the target is an empty folder (making it if missing); True if made here."""
    try:
        os.makedirs(data_dir)
        return True
    except FileExistsError:
        pass
    except OSError as e:
        raise MorphzError("CONTEXT_INPUT_INVALID", f"cannot make {data_dir}: "
                          f"{e.strerror or e}", field="data", path=data_dir) from None
    if not os.path.isdir(data_dir):
        raise MorphzError("CONTEXT_INPUT_INVALID", f"{data_dir} is not a folder",
                          field="data", path=data_dir)
    entries = sorted(os.listdir(data_dir))
    if entries:
        raise MorphzError("RESTORE_TARGET_NOT_EMPTY", f"{data_dir} is not empty; restore only "
                          "into an empty data folder (never over a store)", path=data_dir,
                          entries=entries[:5])
    return False


def _unpack(path: str, partial: str) -> Manifest:
    try:
        tar = tarfile.open(path, mode="r:")  # never extractall: only the two named members
    except tarfile.TarError:
        raise _invalid("it is not a tar file", path=path) from None
    except OSError as e:
        raise MorphzError("CONTEXT_INPUT_INVALID", f"cannot read {path}: {e.strerror or e}",
                          field="from", path=path) from None
    with tar:
        try:
            head = tar.next()
            if head is None or head.name != MANIFEST_MEMBER or not head.isfile() \
                    or head.size > MAX_MANIFEST_BYTES:
                raise _invalid(f"it does not begin with {MANIFEST_MEMBER}", path=path)
            try:
                manifest = Manifest.from_dict(json.loads(tar.extractfile(head).read()))
            except ValueError:
                raise _invalid(f"{MANIFEST_MEMBER} is not JSON", path=path) from None
            data = tar.next()
            if data is None or data.name != DATA_MEMBER or not data.isfile():
                raise _corrupt(f"{DATA_MEMBER} is missing", path=path)
            if data.size != manifest.size:
                raise _corrupt(f"{DATA_MEMBER} holds {data.size} bytes, its manifest says "
                               f"{manifest.size}", path=path)
            os.mkdir(partial)
            h = hashlib.sha256()
            src = tar.extractfile(data)
            with open(os.path.join(partial, "data.mdb"), "wb") as out:
                while chunk := src.read(CHUNK_BYTES):
                    h.update(chunk)
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
        except (tarfile.TarError, EOFError):  # cut short
            raise _corrupt("the file ends early", path=path) from None
    if h.hexdigest() != manifest.sha256:
        raise _corrupt(f"the sha256 of {DATA_MEMBER} is not its manifest's", path=path)
    return manifest


def _verify(partial: str, manifest: Manifest) -> None:
    """Open the copy as the server will: it must hold the manifest's feed head and
    contexts. It then gets a new identity: its feed will go on from the backup's head
    with other commits than the original's past it."""
    store: Optional[LmdbStore] = None
    try:
        store = LmdbStore(partial)
        head, contexts = store.feed_head(), len(store.contexts())
        if (head, contexts) != (manifest.feed_head, manifest.contexts):
            raise _corrupt(f"the store holds feed head {head} and {contexts} contexts, its "
                           f"manifest says {manifest.feed_head} and {manifest.contexts}")
        store.renew_identity()
    except lmdb.Error as e:
        raise _corrupt(f"{DATA_MEMBER} is not an LMDB store ({e})") from None
    finally:
        if store is not None:
            store.close()
