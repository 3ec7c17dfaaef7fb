"""A candidate Mind: the read model (view.py) over a storage Reader, plus an overlay of
writes that every read sees.

Every change a transaction, event or activation makes lands in the overlay first;
`writes()` is the batch handed to storage. Nothing touches storage until then, so a
rejected request leaves no trace.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping, NamedTuple, Optional

from morphz.shared.storage.api import Key, Reader, Write
from morphz.shared.mind import envelope, receipts, records as R
from morphz.shared.mind.view import MindView
from morphz.shared.storage.overlay import Overlay, overlay_scan


_NOT_PENDING = object()
_UNREAD = object()  # an argument not given: read the row


class MindState(MindView):
    def __init__(self, reader: Reader) -> None:
        super().__init__(reader)
        self._overlay = Overlay()
        self._quarantined: list[tuple[str, Key]] = []
        self._erasing: set[tuple[str, Key]] = set()  # rows an erasure rewrites

    # -- raw access -------------------------------------------------------------
    def _get(self, table: str, key: Key) -> Optional[bytes]:
        pending = self._overlay.get(table, key, _NOT_PENDING)
        return super()._get(table, key) if pending is _NOT_PENDING else pending

    def _put(self, table: str, key: Key, value: Optional[bytes]) -> None:
        self._overlay.put(table, key, value)

    def _scan(self, table: str, prefix: Key = (),
              after: Optional[Key] = None) -> Iterator[tuple[Key, bytes]]:
        """Rows of table under prefix (after `after`), overlay applied, in key order."""
        return overlay_scan(self._reader, self._overlay, table, prefix, after)

    def _exists(self, table: str) -> bool:
        """MindView._exists through the pending writes."""
        return next(iter(overlay_scan(self._reader, self._overlay, table, limit=1)),
                    None) is not None

    def _scan_values(self, table: str, prefix: Key = ()) -> Iterable[bytes]:
        return [raw for _, raw in self._scan(table, prefix)]

    def _scan_keys(self, table: str, after: Optional[Key] = None) -> Iterator[Key]:
        return (k for k, _ in self._scan(table, (), after))  # through the pending writes

    def rows(self, table: str) -> dict[Key, bytes]:
        """Every row of a table (overlay applied): for audit and projection rebuilds."""
        if self._overlay.written(table):
            return dict(self._scan(table))
        return dict(self._reader.scan_tables([(table, ())])[0])

    def row_items(self, table: str) -> Iterator[tuple[Key, bytes]]:
        """rows() in key order, read as they are iterated (none held)."""
        return self._scan(table)

    def quarantine(self, table: str, key: Key) -> None:
        """Move a stray row aside (storage keeps it in its quarantine table); reads
        through this view no longer see it, and a write may take its key after."""
        self._quarantined.append((table, key))
        self._put(table, key, None)

    def overlay(self) -> Overlay:
        """The writes made so far, without the meta row (writes() adds it): a replay folds
        each event's writes into its own rows and carries the Meta object along."""
        return self._overlay

    def writes(self) -> list[Write]:
        if self._meta is not None:
            self._put("meta", (), R.dumps(self._meta))
        if self._erasing:
            return [w._replace(erase=True) if (w.table, w.key) in self._erasing else w
                    for w in self._overlay.writes()]
        if not self._quarantined:  # every commit but a rebuild's: the list as made
            return self._overlay.writes()
        moved = set(self._quarantined)  # first: a later write may reuse the key
        return [Write(t, k, None, quarantine=True) for t, k in self._quarantined] + [
            w for w in self._overlay.writes()
            if not (w.value is None and (w.table, w.key) in moved)]

    # -- meta -------------------------------------------------------------------
    def init_meta(self, meta: R.Meta) -> None:
        self._meta = meta

    # -- what an erasure rewrites (services/transaction/core/erasure.py) ------------------
    # Each row keeps its key; the write is flagged as an erasure's (Write.erase), which
    # may rewrite an event and which the change feed names for derived data to drop.
    def _erase_put(self, table: str, key: Key, raw: bytes) -> None:
        self._put(table, key, raw)
        self._erasing.add((table, key))

    def erase_event(self, ev: R.Event) -> bytes:
        """A stored event whose content an erasure took, rewritten (seq, id, envelope
        kept); its new bytes."""
        raw = R.dumps(ev)
        self._erase_put("events", (ev.seq,), raw)
        return raw

    def erase_frame_version(self, f: R.Frame, current: bool) -> None:
        """A frame version whose body an erasure took; `current`: it is the frame's
        present version too (put_frame wrote both rows alike)."""
        raw = R.dumps(f)
        self._erase_put("frame_versions", (f.id, f.changed_at), raw)
        if current:
            self._erase_put("frames", (f.id,), raw)
            self._frames[f.id] = f

    def erase_checkpoint(self, cp: R.Checkpoint) -> None:
        self._erase_put("checkpoints", (cp.name,), R.dumps(cp))

    # -- events and observations -------------------------------------------------
    def add_event(self, ev: R.Event) -> None:
        raw = R.dumps(ev)
        self._put("events", (ev.seq,), raw)
        self._put("event_ids", (ev.id,), str(ev.seq).encode())
        meta = self.require_meta(ev.context)
        enveloped = self.note_link(meta, ev)
        meta.chain = envelope.next_link(vars(ev), raw, enveloped)

    @staticmethod
    def note_link(meta: R.Meta, ev: R.Event) -> bool:
        """Whether `ev` is linked by envelope; the first one is recorded in the meta."""
        if envelope.LINK not in ev.data:
            return False
        if meta.links_from is None:
            meta.links_from = ev.seq
        return True

    def add_observation(self, seq: int) -> None:
        """A new input's observation: put_observation(seq, Observation()), its bytes
        made once per process."""
        self._put_observation(seq, R.NEW_OBSERVATION, retired=False)

    def put_observation(self, seq: int, obs: R.Observation) -> None:
        self._put_observation(seq, R.dumps(obs), obs.retired)

    def _put_observation(self, seq: int, raw: bytes, retired: bool) -> None:
        """Store an observation's state and keep the active-inbox index in step."""
        self._put("observations", (seq,), raw)
        self._put("inbox", (seq,), None if retired else b"")

    # -- frames -------------------------------------------------------------------
    def put_frame(self, f: R.Frame) -> None:
        """Store a frame and its as-of version at the current context revision."""
        f.changed_at = self.meta().revision
        raw = R.dumps(f)
        self._put("frames", (f.id,), raw)
        self._put("frame_versions", (f.id, f.changed_at), raw)
        self._frames[f.id] = f

    def remove_frame(self, frame_id: str) -> None:
        self._put("frames", (frame_id,), None)
        self._frames[frame_id] = None

    # -- relations ------------------------------------------------------------------
    def add_relation(self, s: str, name: str, o: str) -> None:
        self._put("relations", (s, name, o), b"")
        self._put("relations_in", (o, name, s), b"")

    def remove_relation(self, s: str, name: str, o: str) -> None:
        self._put("relations", (s, name, o), None)
        self._put("relations_in", (o, name, s), None)

    # -- order and checkpoints ---------------------------------------------------------
    # Order is kept as ranks with gaps, so appending a frame writes two small rows
    # instead of rewriting the whole list; `place` takes a midpoint or renumbers.
    ORDER_GAP = 1 << 20

    def _ranked(self) -> list[tuple[int, str]]:
        return [(k[0], raw.decode()) for k, raw in self._scan("order")]

    def _set_rank(self, frame_id: str, rank: Optional[int], old=_UNREAD) -> None:
        """`old`: the frame's rank row when the caller has just read it."""
        if old is _UNREAD:
            old = self._get("order_rank", (frame_id,))
        if old is not None:
            self._put("order", (int(old),), None)
        self._put("order_rank", (frame_id,), None if rank is None else str(rank).encode())
        if rank is not None:
            self._put("order", (rank,), frame_id.encode())

    def append_order(self, frame_id: str) -> None:
        if self._get("order_rank", (frame_id,)) is None:
            meta = self.meta()
            meta.order_tail += self.ORDER_GAP
            self._set_rank(frame_id, meta.order_tail, old=None)

    def place(self, frame_id: str, index: int) -> None:
        """Move frame_id to position `index` of the order without it."""
        meta = self.meta()
        rest = [(r, f) for r, f in self._ranked() if f != frame_id]
        if index == 0:
            meta.order_head -= self.ORDER_GAP
            self._set_rank(frame_id, meta.order_head)
        elif index >= len(rest):
            meta.order_tail += self.ORDER_GAP
            self._set_rank(frame_id, meta.order_tail)
        elif rest[index][0] - rest[index - 1][0] > 1:
            self._set_rank(frame_id, (rest[index - 1][0] + rest[index][0]) // 2)
        else:
            ids = [f for _, f in rest]
            self.put_order(ids[:index] + [frame_id] + ids[index:])

    def put_order(self, order: list[str]) -> None:
        """Renumber the whole order (rollback, or a placement with no gap left)."""
        meta = self.meta()
        for _, fid in self._ranked():
            self._set_rank(fid, None)
        for fid in order:
            meta.order_tail += self.ORDER_GAP
            self._set_rank(fid, meta.order_tail)

    def put_checkpoint(self, cp: R.Checkpoint) -> None:
        self._put("checkpoints", (cp.name,), R.dumps(cp))

    def remove_checkpoint(self, name: str) -> None:
        self._put("checkpoints", (name,), None)

    # -- sessions, inputs, activations ---------------------------------------------------
    def put_session(self, s: R.Session) -> None:
        self._put("sessions", (s.id,), R.dumps(s))

    def new_session(self, sid: str) -> None:
        """A session's first record (counting its waiting inputs where the context does)."""
        counted = self.meta().counts
        self.put_session(R.Session(sid, pending=0 if counted else None,
                                   waiting=0 if counted else None))

    def set_pending(self, sid: str, seq: int, on: bool) -> None:
        self._put("pending", (sid, seq), b"" if on else None)

    def count_waiting(self, sid: str, inputs: int, messages: int = 0) -> None:
        """`inputs` more (or fewer) of the session's inputs wait to be claimed, `messages`
        of them from other sessions: its counts, where the context keeps them."""
        if not self.meta().counts:
            return
        s = self.session(sid)
        s.pending += inputs
        s.waiting += messages
        self.put_session(s)

    def put_activation(self, a: R.Activation) -> None:
        """Store an activation; an undelivered one keeps its root request protected."""
        rec = R.plain(a)
        if not rec["results"]:  # rows of activations without results keep their old bytes
            del rec["results"]
        self._put("activations", (a.id,), R.dumps(rec))
        if a.root is not None:
            self._put("root_requests", (a.root,), None if a.delivered else a.id.encode())

    # -- causal scopes: calls, messages, promoted evidence ----------------------------------
    def put_call(self, seq: int, c: R.Call) -> None:
        """Store a call; one without a result stays listed among its session's open calls."""
        self._put("calls", (seq,), R.dumps(c))
        self._put("open_calls", (c.session, seq),
                  c.activation.encode() if c.result is None else None)

    def promote(self, seq: int, revision: int) -> None:
        """Mark evidence as cited by the shared Mind; the first revision that did stays."""
        if not self.is_promoted(seq):
            self._put("promoted", (seq,), str(revision).encode())

    # -- organizing window ----------------------------------------------------------------
    def set_due(self, due_tick: int, frame_id: str, generation: Optional[int]) -> None:
        self._put("retire_due", (due_tick, frame_id),
                  None if generation is None else str(generation).encode())

    def due_until(self, tick: int) -> list[tuple[int, str, int]]:
        out = []
        for (due, fid), raw in self._scan("retire_due"):
            if due > tick:
                break
            out.append((due, fid, int(raw)))
        return out

    # -- conflict boundaries ---------------------------------------------------------------
    # A stamp is "R" when the transaction making revision R changed the boundary, and
    # "R@T" when an activation did at tick T while R was the latest revision (a window
    # retirement makes no revision).
    def boundary_stamp(self, boundary: str) -> Optional[R.Stamp]:
        return R.Stamp.parse(self._get("boundaries", (str(boundary),)))

    def set_boundaries(self, boundaries: Iterable[str], revision: int,
                       tick: Optional[int] = None) -> None:
        """Stamp each boundary: one stamp for all (a transaction of n ops stamps some 3n)."""
        # str(): a typed boundary (a str subclass) keys its row as its plain text.
        self._overlay.put_all("boundaries", zip(map(str, boundaries)),
                              R.stamp_bytes(revision, tick))

    # -- what a request's writes changed (the transaction core's boundaries: changes.py) --
    def written_changes(self) -> "WrittenChanges":
        """What this view's writes changed against the rows it read (bytes that differ),
        decoded as far as a conflict boundary compares them."""
        rows = self._changed_rows(_CHANGE_TABLES)
        frames = rows["frames"]  # (lists, not generators: every commit passes here)
        return WrittenChanges(
            tuple([(fid, before is not None, after is not None)
                   for (fid,), before, after in frames]),
            tuple([(seq, _flags(before), _flags(after))
                   for (seq,), before, after in rows["observations"]]),
            tuple([key for key, _, _ in rows["relations"]]),
            any([before is not None and after is not None
                 for _, before, after in rows["order_rank"]]),
            tuple([name for (name,), _, _ in rows["checkpoints"]]),
            tuple([(sid, _attention(before), _attention(after))
                   for (sid,), before, after in rows["sessions"]]),
            {fid: before for (fid,), before, _ in frames if before is not None})

    def _changed_rows(self, tables: frozenset[str]) -> dict[str, list[tuple[Key, Optional[bytes],
                                                                            Optional[bytes]]]]:
        """Per table of `tables`: (key, before, after) of each row this view wrote whose
        bytes differ from the reader's, i.e. what the request being applied changed."""
        out: dict[str, list] = {}
        get = self._reader.get
        for table in tables:
            out[table] = [(key, before, after) for key, after in self._overlay.table_items(table)
                          if (before := get(table, key)) != after]
        return out

    def order_before(self) -> list[str]:
        """The frame order as the reader has it (before this view's writes)."""
        return [raw.decode() for _, raw in self._reader.scan("order")]

    # -- policy -------------------------------------------------------------------------
    def set_grant(self, principal: str, right: str, session: str, on: bool) -> None:
        self._put("policy", (principal, right, session), b"" if on else None)
        self._grants.pop(principal, None)

    def set_policy_row(self, key: tuple[str, str, str], value: Optional[bytes]) -> None:
        """A row of the policy table that is no grant (its principal is empty: the
        retention policy, services/transaction/core/retention.py); None deletes it."""
        self._put("policy", key, value)

    # -- idempotency ----------------------------------------------------------------------
    def put_idempotency(self, request_id: str, record: receipts.IdempotencyRecord) -> None:
        self._put("idempotency", (request_id,), receipts.dumps(record))



_CHANGE_TABLES = frozenset(("frames", "observations", "relations", "order_rank",
                            "checkpoints", "sessions"))


class FrameFacts(NamedTuple):
    """What a frame's conflict boundaries compare (changes.py): `frame:ID` its content,
    `sources:ID` its sources, `life:ID` its lifecycle."""
    content: tuple  # (body, revision)
    sources: list
    life: tuple  # (state, protected, retire request's generation, its due tick)

    @staticmethod
    def of(f: R.Frame) -> "FrameFacts":
        retire = f.retire
        return FrameFacts((f.body, f.revision), f.sources,
                          (f.state, f.protected, retire.generation if retire else None,
                           retire.due_tick if retire else None))


@dataclass(frozen=True)
class WrittenChanges:
    """MindState.written_changes: each kind's changed keys; for observations and sessions
    the compared facts before and after (flags: retired, protected; attention: state,
    level); `reranked`: a frame that had an order rank has another one."""
    frames: tuple[tuple[str, bool, bool], ...]  # (frame id, existed before, exists after)
    observations: tuple[tuple[int, tuple, tuple], ...]
    relations: tuple[tuple[str, str, str], ...]
    reranked: bool
    checkpoints: tuple[str, ...]
    sessions: tuple[tuple[str, tuple, tuple], ...]
    # The rows of the frames that existed, as read for the comparison: a frame's facts
    # before are decoded from them when asked (not read again: a round trip where the
    # store is remote), and only then (most commits name the boundaries they change).
    _frames_before: Mapping[str, bytes] = field(default_factory=dict, repr=False,
                                                compare=False)

    def frame_before(self, frame_id: str) -> FrameFacts:
        """The facts of a changed frame that existed before the writes."""
        d = R.decode_json(self._frames_before[frame_id])
        retire = d.get("retire") or {}
        return FrameFacts((d["body"], d["revision"]), d["sources"],
                          (d["state"], d["protected"], retire.get("generation"),
                           retire.get("due_tick")))


def _flags(raw: Optional[bytes]) -> tuple:
    obs = R.decode_json(raw) if raw is not None else {}
    return bool(obs.get("retired")), bool(obs.get("protected"))


def _attention(raw: Optional[bytes]) -> tuple:
    s = R.decode_json(raw) if raw is not None else {}
    return s.get("state"), s.get("level")
