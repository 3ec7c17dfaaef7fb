"""The vector leg of one context's recall index: a vector per event and frame, cosine
search in numpy.

Where it lives: `<generation dir>/vectors/`, beside the tantivy files of the same
index generation, so a rebuild's swap replaces both legs at once. The vectors are an
append-only log (`log.<n>`, vector_log.py); the fitted embedder's state sits beside it
(`state.<n>`). Each session's turns are chained (turn_chain.py) and each row says what
its vector was made from (passage_marks.py), both rebuilt as the log is read. The leg follows the
lexical leg on its own (core/vectorfollow.py) and keeps its own position: `commit`
writes `HEAD` (atomically: written, fsynced, renamed) naming the log, its committed
length, its digest and the context version the leg covers, after the records it names
were fsynced. After a crash the log is cut back to what HEAD names, and the leg goes on
from HEAD's position (an index written before HEAD existed names its leg in the tantivy
`__meta__` document, at the lexical position). The digest chains every committed record
and the embedder state: with the embedder identity and the text version it is the
leg's fingerprint.

Compact: each vector is kept as int8 with a float32 scale (388 bytes a 384-dimension
vector instead of 1,536); scoring dequantizes the rows it looks at, a slice at a time.

Search: below IVF_MIN live rows, exact: one matrix-vector product over the rows and a
partial sort. At 200k rows of 256 dimensions that product alone took about 50 ms on
the shared two-core machines, so larger legs are searched through a coarse partition
(coarse.py): the rows of the nearest centroids, plus the rows added or changed since it
was built (scored exactly). The partition is rebuilt when the leg is loaded, after a
(re)fill, and when the rows outside it pass a quarter of those in it (IVF_MIN / 2 at
least; the vector follower partitions only once it has caught up: scoring them is the
cost it bounds, and building it is off the hot paths); deterministic for the same vectors.
Building it lays the matrix out list after list (a row's place in the matrix, its
position, is no longer its row number): gathering scattered rows cost more than scoring.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass
from typing import Iterable, Optional

import numpy as np

from morphz.services.recall.index import vector_log
from morphz.services.recall.index.coarse import Partition
from morphz.services.recall.index.passage_marks import PassageMarks
from morphz.services.recall.index.turn_chain import TurnChain
from morphz.services.recall.index.vector_log import (FORMAT, Dequantized, VecDoc,  # noqa: F401
                                                    quantized)
from morphz.shared.durable_files import sync_dir, write_synced
from morphz.shared.values import HitKey

DIR = "vectors"
IVF_MIN = 50000
HEAD = "HEAD"
# Rows converted to float32 at once when scoring: 1,024 x 384 floats (1.5 MB) stay in
# the CPU cache between the conversion and the product. 20k rows of 384 dimensions
# scored in 2.8 ms so, against 21 ms converted whole and 5.4 ms as float32 rows.
SCORE_SLICE = 1024


@dataclass
class VecHit:
    key: str
    score: float
    time_us: Optional[int] = None


def key_order(key: str) -> tuple:
    """How both legs break ties: events by seq, then frames by id."""
    kind, _, ident = key.partition(":")  # (a sort key: any text orders, as the leg's tests')
    return (0, int(ident), "") if kind == "e" else (1, 0, ident)


class VectorLeg:
    """One generation's vectors, loaded in memory; writes append to its log."""

    def __init__(self, gen_dir: str, meta: Optional[dict], position: int = 0) -> None:
        """The leg HEAD names; else `meta`, what an older index's tantivy `__meta__`
        holds for it, at `position` (None: no leg yet)."""
        self.dir = os.path.join(gen_dir, DIR)
        self._lock = threading.Lock()
        try:
            with open(os.path.join(self.dir, HEAD), "rb") as f:
                meta = json.loads(f.read())
        except FileNotFoundError:
            if meta:
                meta = dict(meta, position=position)
        self.meta: dict = dict(meta or {})
        self.dimension = int(self.meta.get("dimension", 0))
        self._rows: dict[str, int] = {}
        self._keys: list[str] = []
        self._sessions: dict[str, int] = {}
        self._reset()
        if self.meta:
            self._load()

    @property
    def exists(self) -> bool:
        return bool(self.meta)

    @property
    def position(self) -> int:
        """The context version (commit_seq) the committed leg covers."""
        return int(self.meta.get("position", 0))

    def has_head(self) -> bool:
        return os.path.exists(os.path.join(self.dir, HEAD))

    @property
    def committed(self) -> bool:
        """Whether HEAD (or an older index's tantivy meta) names this leg."""
        return bool(self.meta) and "position" in self.meta

    @property
    def count(self) -> int:
        return len(self._rows)

    def live_keys(self) -> list[str]:
        with self._lock:
            return list(self._rows)

    def searchable(self) -> int:
        """Live rows with anything embedded (an empty text's vector is all zeros)."""
        with self._lock:
            n = len(self._keys)
            return int(np.count_nonzero(self._live[:n] & self._nonzero[:n]))

    def state(self) -> bytes:
        if not self.meta.get("state_file"):
            return b""
        with open(os.path.join(self.dir, self.meta["state_file"]), "rb") as f:
            return f.read()

    # -- writing ---------------------------------------------------------------------
    def start(self, embedder_label: str, dimension: int, text_version: int, state: bytes,
              fit_count: int, passage_version: int = 0) -> None:
        """Begin a new log (a rebuild, a refit, a first use): nothing is live until the
        tantivy commit names it. Older logs of this generation are removed then."""
        os.makedirs(self.dir, exist_ok=True)
        n = self._next_number()
        log, state_file = f"log.{n}", (f"state.{n}" if state else "")
        if state:
            write_synced(os.path.join(self.dir, state_file), state)
        write_synced(os.path.join(self.dir, log), b"")
        self.meta = {"format": FORMAT, "embedder": embedder_label, "dimension": dimension,
                     "text_version": text_version, "passage_version": passage_version,
                     "log": log, "bytes": 0, "state_file": state_file, "fit_count": fit_count,
                     "fitted_at": fit_count, "digest": hashlib.sha256(state).hexdigest()}
        # (no position: uncommitted)
        self.dimension = dimension
        self._reset()

    def append(self, docs: list[VecDoc], vectors: np.ndarray,
               deletes: Iterable[str] = (), *, partition: bool = True) -> dict:
        """Append one record (fsynced) and apply it in memory; returns the leg's meta
        (durable once `commit` names it). `partition=False`: a fill that calls
        `repartition` once at its end."""
        deletes = list(deletes)
        if not docs and not deletes:
            return dict(self.meta)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(docs),
                                                                         self.dimension)
        q, scale = quantized(vectors)
        record = vector_log.encode(docs, q, scale, deletes)
        path = os.path.join(self.dir, self.meta["log"])
        with open(path, "r+b") as f:
            f.seek(self.meta["bytes"])  # past a torn tail a crash may have left
            f.write(record)
            f.truncate()
            f.flush()
            os.fsync(f.fileno())
        with self._lock:
            self._apply(docs, q, scale, deletes)
        if partition and self._outside() > max(IVF_MIN // 2, self._ivf_n // 4):
            self.repartition()
        self.meta = dict(self.meta, bytes=self.meta["bytes"] + len(record),
                         digest=hashlib.sha256(bytes.fromhex(self.meta["digest"]) +
                                               record).hexdigest())
        return dict(self.meta)

    def commit(self, position: int) -> dict:
        """Make what was appended durable, as covering context version `position`: HEAD
        names the log's end (the records are fsynced already); then logs HEAD no longer
        names go. Returns the committed meta."""
        self.meta = dict(self.meta, position=position)
        write_synced(os.path.join(self.dir, HEAD + ".tmp"),
                      json.dumps(self.meta, sort_keys=True).encode())
        os.replace(os.path.join(self.dir, HEAD + ".tmp"), os.path.join(self.dir, HEAD))
        sync_dir(self.dir)
        self.drop_other_logs()
        return dict(self.meta)

    def drop_other_logs(self) -> None:
        """After the commit naming the current log: earlier logs and states go."""
        keep = {self.meta.get("log"), self.meta.get("state_file"), HEAD}
        for name in os.listdir(self.dir) if os.path.isdir(self.dir) else ():
            if name not in keep:
                os.remove(os.path.join(self.dir, name))

    def repartition(self) -> None:
        """(Re)build the coarse partition over the live rows and lay the matrix out by
        it, or drop it when the leg is small enough for exact search."""
        with self._lock:
            n = len(self._keys)
            live = np.flatnonzero(self._live[:n] & self._nonzero[:n])
            if len(live) < IVF_MIN:
                self._ivf, self._ivf_n, self._moved = None, 0, set()
                return
            matrix, scale, pos, row_at = self._matrix, self._scale, self._pos, self._row_at
        # Outside the lock, so searches go on; appends come from the same thread as
        # this (the vector leg's, one per context), so no row below n changes meanwhile.
        built, listed = Partition.build(Dequantized(matrix, scale), pos[live])
        rest = np.ones(n, dtype=bool)
        rest[listed] = False
        order = np.concatenate([listed, np.flatnonzero(rest)])  # new position -> old
        laid, laid_scale = np.empty_like(matrix), np.empty_like(scale)
        laid[:n], laid_scale[:n] = matrix[order], scale[order]
        new_row_at = row_at.copy()
        new_row_at[:n] = row_at[order]
        new_pos = pos.copy()
        new_pos[new_row_at[:n]] = np.arange(n)
        with self._lock:
            self._matrix, self._scale = laid, laid_scale
            self._pos, self._row_at = new_pos, new_row_at
            self._ivf, self._ivf_n, self._moved = built, n, set()

    def _outside(self) -> int:
        """Rows a partition does not cover (all of them when there is none)."""
        return len(self._keys) - self._ivf_n + len(self._moved)

    # -- reading ---------------------------------------------------------------------
    def search(self, query: np.ndarray, count: int, *, kinds=(), sessions=(),
               since_us: Optional[int] = None, until_us: Optional[int] = None,
               min_score: float = 0.0) -> list[VecHit]:
        """The `count` nearest rows by cosine (all vectors are unit length), best first,
        ties by key; rows at or below `min_score` are no match."""
        query = np.asarray(query, dtype=np.float32)
        with self._lock:
            n = len(self._keys)
            if not n or count <= 0:
                return []
            scores, rows = self._candidates(query, n)
            ok = self._live[rows] & (scores > min_score)
            event = self._event[rows]
            if kinds and len(kinds) == 1:
                ok &= event if kinds[0] == "event" else ~event
            if sessions:
                codes = [self._sessions[s] for s in sessions if s in self._sessions]
                ok &= np.isin(self._session[rows], codes) & event
            if since_us is not None or until_us is not None:
                t = self._time[rows]
                has = t != np.iinfo(np.int64).min
                ok &= has & (t >= (since_us if since_us is not None else -(1 << 62)))
                if until_us is not None:
                    ok &= t < until_us
            sel = np.flatnonzero(ok)
            if len(sel) > count:
                # Past the cut, ties with the last kept score are kept (ordered by key).
                part = scores[sel]
                cut = np.partition(part, len(part) - count)[len(part) - count]
                sel = sel[part >= cut]
            none = np.iinfo(np.int64).min
            picked = [(float(scores[i]), self._keys[r], int(self._time[r]))
                      for i, r in zip(sel, rows[sel])]
        picked.sort(key=lambda p: (-p[0], key_order(p[1])))
        return [VecHit(k, s, None if t == none else t) for s, k, t in picked[:count]]

    def last_turn(self, session: str) -> Optional[str]:
        """The key of the session's last live turn (None: none)."""
        with self._lock:
            code = self._sessions.get(session)
            row = self._turns.last(code, self._is_live) if code is not None else None
            return self._keys[row] if row is not None else None

    def neighbours(self, keys: Iterable[str]) -> dict[str, tuple[Optional[str], Optional[str]]]:
        """{key: (the turn before it in its session, the turn after it)} for the keys
        that are turns here (None where there is none)."""
        out = {}
        with self._lock:
            for key in keys:
                row = self._rows.get(key)
                if row is not None:
                    pair = self._turns.neighbours(row, self._is_live)
                    out[key] = tuple(None if r is None else self._keys[r] for r in pair)
        return out

    def _is_live(self, row: int) -> bool:
        return bool(self._live[row])

    def _candidates(self, query: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, rows) of the rows a search looks at: all of them, or the probed
        lists' (contiguous slices), those added since the partition and those changed
        since outside the probed lists. The lock is held."""
        if self._ivf is None:
            return self._scores(0, n, query), self._row_at[:n]
        ranges = self._ivf.probe(query) + [(self._ivf_n, n)]
        moved = self._pos[np.fromiter(self._moved, dtype=np.int64, count=len(self._moved))]
        for a, b in ranges[:-1]:  # already scored with its list
            moved = moved[(moved < a) | (moved >= b)]
        scores = np.concatenate([self._scores(a, b, query) for a, b in ranges] +
                                [(self._matrix[moved].astype(np.float32) @ query)
                                 * self._scale[moved]])
        positions = np.concatenate([np.arange(a, b) for a, b in ranges] + [moved])
        return scores, self._row_at[positions]

    def _scores(self, a: int, b: int, query: np.ndarray) -> np.ndarray:
        """Cosines of matrix positions a..b-1 (the lock is held), SCORE_SLICE rows at a
        time through one float32 buffer."""
        out = np.empty(b - a, dtype=np.float32)
        buf = np.empty((min(SCORE_SLICE, b - a), self.dimension), dtype=np.float32)
        for at in range(a, b, SCORE_SLICE):
            end = min(b, at + SCORE_SLICE)
            rows = buf[:end - at]
            np.copyto(rows, self._matrix[at:end], casting="unsafe")
            np.dot(rows, query, out=out[at - a:end - a])
        return out * self._scale[a:b]

    # -- internals -------------------------------------------------------------------
    def _reset(self) -> None:
        with self._lock:
            self._ivf, self._ivf_n, self._moved = None, 0, set()
            self._rows, self._keys, self._sessions = {}, [], {}
            self._matrix = np.zeros((0, self.dimension), dtype=np.int8)  # by position
            self._scale = np.zeros(0, dtype=np.float32)  # by position
            self._pos = np.zeros(0, dtype=np.int64)  # row -> its position in the matrix
            self._row_at = np.zeros(0, dtype=np.int64)  # position -> row
            self._live = np.zeros(0, dtype=bool)
            self._nonzero = np.zeros(0, dtype=bool)
            self._event = np.zeros(0, dtype=bool)
            self._time = np.zeros(0, dtype=np.int64)
            self._session = np.zeros(0, dtype=np.int32)
            self._turns = TurnChain()
            self._marks = PassageMarks()

    def _grow(self, need: int) -> None:
        cap = len(self._live)
        if need <= cap:
            return
        cap = max(need, cap * 2, 1024)
        def grown(a: np.ndarray) -> np.ndarray:
            out = np.zeros((cap,) + a.shape[1:], dtype=a.dtype)
            out[:len(a)] = a
            return out
        self._matrix, self._live, self._event = (grown(self._matrix), grown(self._live),
                                                 grown(self._event))
        self._scale = grown(self._scale)
        self._nonzero = grown(self._nonzero)
        self._pos, self._row_at = grown(self._pos), grown(self._row_at)
        self._time, self._session = grown(self._time), grown(self._session)
        self._turns.grow(cap)
        self._marks.grow(cap)

    def _apply(self, docs: list[VecDoc], vectors: np.ndarray, scale: np.ndarray,
               deletes: list[str]) -> None:
        for key in deletes:
            row = self._rows.pop(key, None)
            if row is not None:
                self._live[row] = False
        new = [d.key for d in docs if d.key not in self._rows]
        self._grow(len(self._keys) + len(new))
        for d, v, sc in zip(docs, vectors, scale):
            row = self._rows.get(d.key)
            if row is None:  # placed at the end: past the layout, position = row
                row = self._rows[d.key] = len(self._keys)
                self._keys.append(d.key)
                self._pos[row] = self._row_at[row] = row
            elif row < self._ivf_n:  # its new vector may belong under another centroid
                self._moved.add(row)
            self._matrix[self._pos[row]] = v
            self._scale[self._pos[row]] = sc
            self._live[row] = True
            self._nonzero[row] = bool(v.any()) and sc > 0
            self._event[row] = HitKey.parse(d.key).is_event
            self._time[row] = d.time_us if d.time_us is not None else np.iinfo(np.int64).min
            self._session[row] = self._sessions.setdefault(d.session, len(self._sessions))
            if d.prev is not None:
                self._turns.add(row, int(self._session[row]), self._rows.get(d.prev))
            self._marks.mark(row, d.digests, self._rows.get(d.source) if d.source else None)

    def _load(self) -> None:
        """Replay the committed part of the log; cut off a tail no commit names."""
        self._reset()
        for docs, deletes, q, scale in self._records(truncate=True):
            with self._lock:
                self._apply(docs, q, scale, deletes)
        self.repartition()

    def _records(self, truncate: bool = False):
        """The committed log's records (vector_log.records); `truncate`: cut off a tail
        no commit names."""
        path = os.path.join(self.dir, self.meta["log"])
        end = self.meta["bytes"]
        with open(path, "r+b" if truncate else "rb") as f:
            data = f.read(end)
            if len(data) < end:
                raise ValueError(f"vector log {path} is shorter than its commit")
            if truncate:
                f.truncate(end)
        yield from vector_log.records(data, self.dimension, path)

    # -- erasure (docs/privacy.md) ---------------------------------------------------
    def erase(self, keys: Iterable[str]) -> list[bytes]:
        """Drop `keys` from the leg and from its files, and return the vector cache's keys
        of every text their content was embedded in (PassageMarks.taken). The log is
        written again holding only the other keys' live rows (a new log HEAD names, at
        the same position; the old one, which held the erased rows, is removed). The
        caller holds the leg's writer (the vector follower's lock)."""
        keys = set(keys)
        if not self.committed or not keys:
            return []
        with self._lock:
            erased = [self._rows[k] for k in keys if k in self._rows]
            taken = self._marks.taken(erased)
            for key in keys:
                row = self._rows.pop(key, None)
                if row is not None:
                    self._live[row] = False
            live = sorted(self._rows.values())  # as they came: a turn after the one before
            names = {code: name for name, code in self._sessions.items()}
            none = np.iinfo(np.int64).min
            docs = [VecDoc(self._keys[r], names[int(self._session[r])],
                           None if self._time[r] == none else int(self._time[r]),
                           self._turns.before_key(r, self._is_live, self._keys),
                           self._marks.source_key(r, self._keys), self._marks.digests(r))
                    for r in live]
            q = self._matrix[self._pos[live]] if live else np.zeros((0, self.dimension), np.int8)
            scale = self._scale[self._pos[live]] if live else np.zeros(0, np.float32)
        self._rewrite(docs, q, scale)
        return taken

    def _rewrite(self, docs: list[VecDoc], q: np.ndarray, scale: np.ndarray) -> None:
        """A new log of one record (these rows, as stored), committed at the leg's
        position in place of the old one."""
        record = vector_log.encode(docs, q, scale, [])
        log = f"log.{self._next_number()}"
        write_synced(os.path.join(self.dir, log), record)
        state = hashlib.sha256(self.state()).hexdigest()
        self.meta = dict(self.meta, log=log, bytes=len(record), digest=hashlib.sha256(
            bytes.fromhex(state) + record).hexdigest())
        self.commit(self.position)

    def _next_number(self) -> int:
        return 1 + max([int(x.split(".")[1]) for x in os.listdir(self.dir)
                        if x.split(".")[-1].isdigit()], default=0)
