"""Applying a context's changes of the storage change feed to its lexical index (part of
indexer.py's Indexer): each change's events and frames read back from the store, a chunk
of changes per round trip, made documents and written in index commits of about
APPLY_BYTES of text, each at the version of the last change it covers (kept in the same
tantivy commit, so an entry the index already holds is skipped). Gives way to a rebuild
of the context that begins meanwhile: its swap catches up from the version it read."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from morphz.services.recall.core.documents import (
    TEXT_VERSION, event_doc, event_key, event_text, frame_doc, frame_key, frame_text,
    indexed)
from morphz.services.recall.index.tantivy_docs import Doc
from morphz.services.recall.index.tantivy_index import ContextIndex
from morphz.services.recall.runtime.index_reads import (
    APPLY_BYTES, READ_AHEAD_BYTES, change_chunks, frame_changers, skipping_damaged)
from morphz.shared.mind.bulk import prefetch_changes
from morphz.shared.mind.state import MindState
from morphz.shared.storage.api import Store
from morphz.shared.storage.feed import Change

if TYPE_CHECKING:
    from opentelemetry import trace

# In an index's meta: the commit_seq of an erasure whose earlier content its files may
# still hold, until the rebuild that rewrites them swaps in (Indexer._purge).
ERASURE_PENDING = "erasure_pending"
SUPERSEDED_CHECK = 1000  # events read between looks at whether a rebuild began
# (READ_AHEAD_BYTES, APPLY_BYTES: index_reads.py, named here for the lexical leg's reads.)


def erased_keys(change: Change) -> set[str]:
    """The index keys a change's erasure rewrote (of a frame: any of its versions)."""
    return {event_key(s) for s in change.erased} | {frame_key(f) for f in change.erased_frames}


@dataclass
class _Part:
    """What an application gathered for its next index write."""
    docs: dict[str, Doc] = field(default_factory=dict)
    deletes: list[str] = field(default_factory=list)
    text_bytes: int = 0
    changes: int = 0  # changes gathered
    erased: set[str] = field(default_factory=set)  # keys an erasure in them rewrote

    def add(self, key: str, doc: Doc, text: str) -> None:
        self.docs[key] = doc
        self.text_bytes += len(text)



class ChangeApplying:
    """Indexer's application of feed changes (a mixin: Indexer holds the state named
    below and the steps it calls back, `_lock`, `index`, `position`, `_dropped`, `_erase`,
    `_vectors_follow`)."""
    _store: Store
    _tracer: "trace.Tracer"
    _deleted: set[str]
    _progress: dict[str, dict]

    def apply(self, context: str, changes: list[Change]) -> int:
        """Index one context's feed entries (in commit order); those the index already
        holds are skipped, and those it never saw before them (commit_seq counts every
        commit of a context: a hole is a rebuild that died after the follower had left
        them to it) are read from the context's own feed first. While a rebuild of the
        context runs, nothing: its swap catches up from the version it read (indexing
        into the index it replaces would be work thrown away, and slows it down).
        Returns how many were applied."""
        gone = [i for i, c in enumerate(changes) if c.deleted]
        if gone:  # the context was deleted: what came before it goes with it
            self._dropped(context)
            changes = changes[gone[-1] + 1:]
            if not changes:
                return 0
        self._deleted.discard(context)  # (made again under its name, if it was)
        with self._lock(context):
            if self._rebuilding(context):
                return 0
            position = self.position(context)
            fresh = [c for c in changes if c.commit_seq > position]
            if not fresh:
                return 0
            applied = 0
            while fresh[0].commit_seq > position + 1:
                hole = [c for c in self._store.changes(position, context=context).changes
                        if c.commit_seq < fresh[0].commit_seq]
                if not hole:
                    break
                applied += self._apply_locked(context, hole)
                position = hole[-1].commit_seq
            return applied + self._apply_locked(context, fresh)

    def _rebuilding(self, context: str) -> bool:
        return bool(self._progress.get(context, {}).get("running"))

    def _apply_locked(self, context: str, fresh: list[Change]) -> int:
        """apply() of changes past the index's position, its context lock held: a chunk
        of changes at a time (their rows read in one round trip), written to the index
        once the documents gathered reach APPLY_BYTES of text, and at the end; each write
        records the version of the last change it covers. A backlog of large events is
        indexed in several writes instead of held whole. Given up when a rebuild of the
        context starts meanwhile (a first application can be long: a whole backlog
        read, tokenized, fitted on), and the rebuild covers the rest. Returns how many
        changes were written."""
        idx = self.index(context)
        written = 0
        # Each row as it is now (no snapshot held): a frame read past these changes is
        # what the index should hold anyway, and the later change indexes it again.
        with self._tracer.start_as_current_span("recall.index_apply") as span, \
                self._store.latest(context) as reader:
            m = MindState(reader)
            part = _Part()
            for chunk in change_chunks(fresh, SUPERSEDED_CHECK):
                if self._rebuilding(context):
                    return written
                m.forget_prefetched()
                changed = frame_changers(chunk)
                prefetch_changes(m, [s for c in chunk for s in c.events]
                                 + [e for e in changed.values() if e is not None],
                                 changed, max_bytes=READ_AHEAD_BYTES)
                start = 0  # the chunk's changes whose frames are not gathered yet
                for i, change in enumerate(chunk):
                    for seq in change.events:
                        self._gather_event(context, m, seq, part)
                    part.changes += 1
                    part.erased.update(erased_keys(change))
                    if part.text_bytes >= APPLY_BYTES or change is fresh[-1]:
                        self._gather_frames(context, m, frame_changers(chunk[start:i + 1]),
                                            part)
                        if not self._write(context, idx, m, part, change):
                            return written
                        written += part.changes
                        part, start = _Part(), i + 1
                        m.forget_prefetched()
                if start < len(chunk):  # the whole chunk's, unless a write cut it
                    self._gather_frames(context, m, changed if start == 0
                                        else frame_changers(chunk[start:]), part)
            span.set_attribute("morphz.changes", len(fresh))
        return written

    def _gather_event(self, context: str, m: MindState, seq: int, part: "_Part") -> None:
        with skipping_damaged(context, event_key(seq)):
            ev = m.event(seq)
            if ev is None or not indexed(ev.kind):  # moved aside by a repair; not indexed
                part.deletes.append(event_key(seq))
            else:
                part.add(event_key(seq), event_doc(ev), event_text(ev))

    def _gather_frames(self, context: str, m: MindState, changed: dict[str, Optional[int]],
                       part: "_Part") -> None:
        for fid, changer in changed.items():
            with skipping_damaged(context, frame_key(fid)):
                f = m.frame(fid)
                if f is None:  # gone (rolled back): drop it from the index too
                    part.deletes.append(frame_key(fid))
                else:
                    ev = m.event(changer) if changer is not None else None
                    part.add(frame_key(fid), frame_doc(f, ev), frame_text(f))

    def _write(self, context: str, idx: ContextIndex, m: MindState, part: "_Part",
               last: Change) -> bool:
        """One index commit of what `part` gathered, at `last`'s version; False (nothing
        written) when a rebuild of the context began."""
        if self._rebuilding(context):
            return False
        old_meta = idx.snapshot()[1]
        # A new index holds today's texts; an older one keeps saying it does not.
        meta = dict(old_meta or {"text_version": TEXT_VERSION}, context=context,
                    position=last.commit_seq)
        meta.pop("vectors", None)  # (an older index's: the leg's HEAD names it now)
        if part.erased:  # until a rebuild's files replace these (self._purge)
            meta[ERASURE_PENDING] = last.commit_seq
        idx.apply(part.docs.values(), meta, deletes=part.deletes)
        if part.erased:
            self._erase(context, idx, part.erased)
        self._vectors_follow(context)
        return True
