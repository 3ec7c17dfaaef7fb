"""The derived index of one context: a tantivy index directory fed with our own ICU
terms (joined by spaces, split again by tantivy's whitespace tokenizer), BM25 ranked.

This is the storage adapter of the recall core: the only module that imports
tantivy. Documents are keyed (`e:<seq>`, `f:<frame id>`) so indexing a change is an
upsert and re-applying it changes nothing. The context version the index holds lives
in a `__meta__` document written in the same tantivy commit as the documents it
covers, so a restart resumes exactly where the last commit ended. The vector leg
(vector_index.py) lives in the same generation directory and keeps its own position
(its HEAD file); indexes written before that name it in `__meta__` (key "vectors").
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional, Union

import numpy as np
import tantivy

from morphz.services.recall.index.vector_cache import DIR as VECTOR_CACHE_DIR
from morphz.services.recall.index.vector_index import VectorLeg
from morphz.shared.errors import MorphzError
from morphz.shared.values import HitKey

META_KEY = "__meta__"
_TOKENIZER = "morphz_terms"
WRITER_HEAP = 32 << 20
TIE_MARGIN = 16  # hits fetched past a page, to see a tie at its end through
# tantivy's writer lock is a flock on a file in the index directory, and a process this
# one starts (a worker, spawned: fork then exec) holds a copy of that file until its exec
# closes it; a writer opened in that moment, after the last one was dropped, is refused
# (LockBusy). So a refused writer is asked for again, backing off, this long at most.
WRITER_WAIT_SECONDS = 5.0
WRITER_RETRY_FIRST, WRITER_RETRY_MOST = 0.001, 0.05


def _schema() -> tantivy.Schema:
    b = tantivy.SchemaBuilder()
    b.add_text_field("key", stored=True, tokenizer_name="raw", index_option="basic")
    b.add_text_field("kind", tokenizer_name="raw", index_option="basic")
    b.add_text_field("session", tokenizer_name="raw", index_option="basic")
    b.add_text_field("terms", tokenizer_name=_TOKENIZER, index_option="freq")
    b.add_integer_field("time", indexed=True, fast=True)
    # Events' seq (-1 for frames): hits of events need no stored-document fetch.
    b.add_integer_field("seq", fast=True)
    b.add_text_field("meta", stored=True, tokenizer_name="raw", index_option="basic")
    return b.build()


SCHEMA = _schema()


@dataclass
class Doc:
    key: str
    kind: str          # "event" | "frame"
    terms: Union[str, list[str]]  # a list, or already joined by spaces
    time_us: Optional[int]
    session: str = ""


@dataclass
class Hit:
    key: str
    score: float
    time_us: Optional[int] = None


@dataclass
class Query:
    terms: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    since_us: Optional[int] = None
    until_us: Optional[int] = None
    keys: list[str] = field(default_factory=list)  # only these documents


def _open(path: str, create: bool) -> tantivy.Index:
    if create:
        os.makedirs(path, exist_ok=True)
    index = tantivy.Index(SCHEMA, path=path, reuse=True)
    index.register_tokenizer(
        _TOKENIZER, tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build())
    index.config_reader(reload_policy="manual")
    return index


def _document(d: Doc) -> tantivy.Document:
    doc = tantivy.Document(
        key=d.key, kind=d.kind, session=d.session,
        terms=d.terms if isinstance(d.terms, str) else " ".join(d.terms),
        seq=HitKey.parse(d.key).seq)
    if d.time_us is not None:
        doc.add_integer("time", d.time_us)
    return doc


_STR = json.encoder.encode_basestring  # a JSON string literal (non-ASCII kept as is)


def doc_json(d: Doc) -> str:
    """`d` as the JSON document tantivy's add_json takes: built where the Doc is made
    (a rebuild's worker processes), it makes adding it the cheapest call there is.
    Assembled by hand: json.dumps of the dict cost as much as parsing the event."""
    terms = d.terms if isinstance(d.terms, str) else " ".join(d.terms)
    seq = HitKey.parse(d.key).seq
    time = "" if d.time_us is None else f',"time":{int(d.time_us)}'
    return (f'{{"key":{_STR(d.key)},"kind":{_STR(d.kind)},"session":{_STR(d.session)},'
            f'"terms":{_STR(terms)},"seq":{seq}{time}}}')


class ContextIndex:
    """One context's index: upserts with the position in one commit; snapshot reads."""

    def __init__(self, path: str, writer_wait: float = WRITER_WAIT_SECONDS) -> None:
        self.path = path
        self._index = _open(path, create=True)
        self._write_lock = threading.Lock()
        self._writer_wait = writer_wait
        self.writer_refusals = 0  # writers tantivy refused as busy (see WRITER_WAIT_SECONDS)
        self._snapshot = self._take_snapshot()
        meta = self._snapshot[1]
        self.vectors = VectorLeg(path, meta.get("vectors"), meta.get("position", 0))
        if self.vectors.exists:  # a log begun but never committed (a crash) goes
            if not self.vectors.has_head():  # an older index's: its own HEAD from now on
                self.vectors.commit(self.vectors.position)
            self.vectors.drop_other_logs()

    def _take_snapshot(self) -> tuple[tantivy.Searcher, dict]:
        searcher = self._index.searcher()
        return searcher, self.meta(searcher)

    def snapshot(self) -> tuple[tantivy.Searcher, dict]:
        """The latest committed searcher and its meta (position...), consistent."""
        return self._snapshot

    # -- writing ----------------------------------------------------------------------
    def apply(self, docs: Iterable[Union[Doc, str]], meta: dict, *,
              deletes: Iterable[str] = (), heap: int = WRITER_HEAP, threads: int = 1,
              fresh: bool = False) -> int:
        """Upsert docs, delete keys and replace the meta document in one commit;
        returns the number of documents written. `fresh`: the index is new and keys
        are unique, so nothing needs deleting first (a rebuild); only then may docs
        come as doc_json strings. The vector leg commits on its own (VectorLeg.commit)."""
        n = 0
        with self._write_lock:
            writer = self._writer(heap, threads)
            try:
                for key in deletes:
                    writer.delete_documents_by_term("key", key)
                for d in docs:
                    if type(d) is str:
                        assert fresh, "doc_json strings only for a fresh index"
                        writer.add_json(d)
                    else:
                        if not fresh:
                            writer.delete_documents_by_term("key", d.key)
                        writer.add_document(_document(d))
                    n += 1
                writer.delete_documents_by_term("key", META_KEY)
                writer.add_document(tantivy.Document(
                    key=META_KEY, meta=json.dumps(meta, sort_keys=True)))
                writer.commit()
                writer.wait_merging_threads()
            except BaseException:
                writer.rollback()
                raise
            finally:
                del writer
            self._index.reload()
            self._snapshot = self._take_snapshot()
        return n

    def _writer(self, heap: int, threads: int) -> tantivy.IndexWriter:
        """A writer, asked for again while tantivy finds its lock busy (a process being
        started holds a copy of it for a moment: WRITER_WAIT_SECONDS); RECALL_INDEX_BUSY
        once that lasts longer than the wait."""
        give_up = time.monotonic() + self._writer_wait
        pause = WRITER_RETRY_FIRST
        while True:
            try:
                return self._index.writer(heap_size=heap, num_threads=threads)
            except ValueError as e:
                if "LockBusy" not in str(e):
                    raise
                self.writer_refusals += 1
                left = give_up - time.monotonic()
                if left <= 0:
                    raise MorphzError(
                        "RECALL_INDEX_BUSY", "the recall index's writer lock stayed held "
                        f"for {self._writer_wait:g} s (another process holds "
                        f"{os.path.join(os.path.basename(self.path), '.tantivy-writer.lock')})"
                        "; retry", retry_after_seconds=1) from None
                time.sleep(min(pause, left))
                pause = min(2 * pause, WRITER_RETRY_MOST)

    # -- reading ------------------------------------------------------------------------
    def searcher(self) -> tantivy.Searcher:
        return self._index.searcher()

    @staticmethod
    def meta(searcher: tantivy.Searcher) -> dict:
        hits = searcher.search(tantivy.Query.term_query(SCHEMA, "key", META_KEY), 1).hits
        if not hits:
            return {}
        return json.loads(searcher.doc(hits[0][1]).get_first("meta"))

    @staticmethod
    def counts(searcher: tantivy.Searcher) -> dict:
        def count(kind: str) -> int:
            return searcher.search(tantivy.Query.term_query(SCHEMA, "kind", kind), 1,
                                   count=True).count
        return {"events": count("event"), "frames": count("frame")}

    @staticmethod
    def idf(searcher: tantivy.Searcher, terms: list[str]) -> list[float]:
        """BM25's idf of each term as tantivy scores it, ln(1 + (N - n + 0.5)/(n + 0.5))
        (n: the documents holding it; a term no document holds has the largest idf)."""
        n_docs = searcher.num_docs
        return [math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
                for df in (searcher.doc_freq("terms", t) for t in terms)]

    @staticmethod
    def term_count(searcher: tantivy.Searcher) -> int:
        return len(searcher.terms_with_prefix("terms", ""))

    def size_bytes(self) -> int:
        """0 once a rebuild's swap removed this generation (a reader still held it)."""
        total = 0
        try:
            entries = list(os.scandir(self.path))
        except FileNotFoundError:
            return 0
        for e in entries:
            try:
                total += e.stat().st_size if e.is_file() else 0
            except FileNotFoundError:  # tantivy's temporary files come and go
                pass
        return total

    def search(self, searcher: tantivy.Searcher, q: Query, offset: int, count: int) -> list[Hit]:
        """Hits in rank order: BM25 when there are terms, else by time (oldest first,
        ties by key, so the listing never depends on how the index was built)."""
        must: list = []
        if q.keys:
            must.append(_any(SCHEMA, "key", q.keys))
        if q.kinds:
            must.append(_any(SCHEMA, "kind", q.kinds))
        if q.sessions:
            must.append(_any(SCHEMA, "session", q.sessions))
        if q.since_us is not None or q.until_us is not None:
            must.append(tantivy.Query.range_query(
                SCHEMA, "time", tantivy.FieldType.Integer,
                lower_bound=q.since_us if q.since_us is not None else -(1 << 62),
                upper_bound=q.until_us if q.until_us is not None else 1 << 62,
                include_lower=True, include_upper=q.until_us is None))
        if q.terms:
            words = tantivy.Query.boolean_query(
                [(tantivy.Occur.Should, tantivy.Query.term_query(SCHEMA, "terms", t))
                 for t in q.terms])
            query = (tantivy.Query.boolean_query(
                [(tantivy.Occur.Must, words)] +
                [(tantivy.Occur.Must, tantivy.Query.const_score_query(m, 0.0)) for m in must])
                if must else words)

            def run(n: int) -> list:
                return [(-score, addr) for score, addr in
                        searcher.search(query, n, count=False).hits]
        else:
            query = tantivy.Query.boolean_query([(tantivy.Occur.Must, m) for m in must])

            def run(n: int) -> list:
                return searcher.search(query, n, count=False, order_by_field="time",
                                       order=tantivy.Order.Asc).hits
        n = offset + count
        raw = _through_ties(run, n)
        addrs = [addr for _, addr in raw]
        seqs = searcher.fast_field_values("seq", addrs) if addrs else []
        # Ties ordered by key (events by seq, then frames by id): the ranking never
        # depends on how the index was built (replicas answer alike).
        picked = _by_key_within_ties(searcher, raw, seqs)[offset:offset + count]
        keys = [f"e:{seqs[i]}" if seqs[i] >= 0 else _stored_key(searcher, addrs[i])
                for i in picked]
        if q.terms:  # BM25 order; only frames' hits use the time (an event's comes from
            # its record)
            frames = [i for i in picked if seqs[i] < 0]  # (an event's seq is its own)
            times = dict(zip(frames, searcher.fast_field_values(
                "time", [addrs[i] for i in frames]))) if frames else {}
            return [Hit(key, -raw[i][0], times.get(i)) for i, key in zip(picked, keys)]
        times = searcher.fast_field_values("time", [addrs[i] for i in picked]) if picked else []
        return [Hit(key, 0.0, t) for key, t in zip(keys, times)]


def _through_ties(run: Callable[[int], list], n: int) -> list:
    """The first n hits of `run` (sorted (order key, address) pairs) and every other hit
    tied with the n-th: enough to order that tie by key. The first fetch takes a margin
    past n: ties straddling the page end are common (one in two 1-word queries at 1M
    events) but short (they ended within 13 hits past a page of 20 there), and a few more
    hits cost far less than a second search. Past the margin, growing steps, and only
    through the tie (not on to whatever tie a step happens to end in)."""
    want = n + 1 + max(TIE_MARGIN, n // 4)
    raw = run(want)
    if len(raw) <= n or raw[n - 1][0] != raw[n][0]:
        return raw[:n]
    cut = raw[n - 1][0]
    while len(raw) == want and raw[-1][0] == cut:
        want = 2 * want
        raw = run(want)
    return [h for h in raw if _not_after(h[0], cut)]


def _not_after(value, cut) -> bool:
    """Whether an order key sorts at or before the cut (None, no time, sorts last)."""
    if cut is None:
        return True
    return value is not None and value <= cut


def _by_key_within_ties(searcher: tantivy.Searcher, raw: list, seqs: list) -> list[int]:
    """Indexes of `raw` in (order key, vector_index.key_order) order, on arrays: a tie can
    hold tens of thousands of hits."""
    if not raw:
        return []
    ev = np.asarray(seqs, dtype=np.int64)
    frame = ev < 0
    within = np.where(frame, 0, ev)
    if frame.any():  # frames by id (few): their rank among themselves
        fidx = np.flatnonzero(frame)
        fkeys = [_stored_key(searcher, raw[i][1]) for i in fidx]
        within[fidx[sorted(range(len(fidx)), key=fkeys.__getitem__)]] = np.arange(len(fidx))
    keys = [h[0] for h in raw]
    none = np.array([k is None for k in keys])
    order_key = np.array([0 if k is None else k for k in keys], dtype=np.float64
                         if isinstance(next((k for k in keys if k is not None), 0), float)
                         else np.int64)
    return np.lexsort((within, frame, order_key, none)).tolist()


def _stored_key(searcher: tantivy.Searcher, addr) -> str:
    return searcher.doc(addr).get_first("key")


def _any(schema: tantivy.Schema, fld: str, values: list[str]) -> tantivy.Query:
    return tantivy.Query.boolean_query(
        [(tantivy.Occur.Should, tantivy.Query.term_query(schema, fld, v)) for v in values])


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
