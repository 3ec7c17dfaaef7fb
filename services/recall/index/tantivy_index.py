"""The derived index of one context: a tantivy index directory fed with our own ICU
terms (joined by spaces, split again by tantivy's whitespace tokenizer), BM25 ranked.

This is the storage adapter of the recall core: with tantivy_docs.py (the schema and
documents) and tantivy_search.py (a page of hits), the only modules that import
tantivy. Documents are keyed (`e:<seq>`, `f:<frame id>`) so indexing a change is an
upsert and re-applying it changes nothing. The context version the index holds lives
in a `__meta__` document written in the same tantivy commit as the documents it
covers, so a restart resumes exactly where the last commit ended. The vector leg
(vector_index.py) lives in the same generation directory and keeps its own position
(its HEAD file); indexes written before that name it in `__meta__` (key "vectors").
"""
from __future__ import annotations

import json
import math
import os
import threading
import time
from typing import Iterable, Union

import tantivy

from morphz.services.recall.index.tantivy_docs import META_KEY, SCHEMA, Doc, document, open_index
from morphz.services.recall.index.tantivy_search import Hit, Query, search
from morphz.services.recall.index.vector_index import VectorLeg
from morphz.shared.errors import MorphzError

WRITER_HEAP = 32 << 20
# tantivy's writer lock is a flock on a file in the index directory, and a process this
# one starts (a worker, spawned: fork then exec) holds a copy of that file until its exec
# closes it; a writer opened in that moment, after the last one was dropped, is refused
# (LockBusy). So a refused writer is asked for again, backing off, this long at most.
WRITER_WAIT_SECONDS = 5.0
WRITER_RETRY_FIRST, WRITER_RETRY_MOST = 0.001, 0.05


class ContextIndex:
    """One context's index: upserts with the position in one commit; snapshot reads."""

    def __init__(self, path: str, writer_wait: float = WRITER_WAIT_SECONDS) -> None:
        self.path = path
        self._index = open_index(path, create=True)
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
                        writer.add_document(document(d))
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

    @staticmethod
    def search(searcher: tantivy.Searcher, q: Query, offset: int, count: int) -> list[Hit]:
        """A page of hits of `searcher` (tantivy_search.search)."""
        return search(searcher, q, offset, count)
