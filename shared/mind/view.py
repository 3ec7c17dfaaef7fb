"""The read model: typed reads of one context's tables at one version (a storage Reader).

Every reader of the projections goes through it: encoding and recall read through a
MindView, the transaction service through MindState (state.py), which lays its
candidate writes over the same reads. Table names, keys and the records' JSON stay
here and in records.py; no reader decodes rows itself.
"""
from __future__ import annotations

import json
from typing import Iterable, Iterator, Optional, TypeVar, Union

from morphz.shared.errors import MorphzError
from morphz.shared.mind import envelope, receipts, records as R
from morphz.shared.storage.api import Key, Reader

T = TypeVar("T")
_EVENT_CACHE, _EVENT_CACHE_BYTES = 1024, 32 << 20
_DECODE_BYTES = 8 << 20  # rows event_dicts reads ahead and decodes together at most
_STATE_CACHE = 256


# A message's stored record holds this, unescaped (a text holding it has its quotes
# escaped); records are compact JSON (shared/mind/records.py dumps).
_MESSAGE_KIND = b'"kind":"message"'
_UNREAD = object()  # _get: no prefetched row for this key


class MindView:
    def __init__(self, reader: Reader) -> None:
        self._reader = reader
        self._meta: Optional[R.Meta] = None
        # Decoded frames of this request (MindState changes them only through put_frame).
        self._frames: dict[str, Optional[R.Frame]] = {}
        # Decoded events: immutable, and asked for again and again within one request.
        self._events: dict[int, R.Event] = {}
        self._event_bytes = 0  # their stored size
        # Observation rows repeat byte for byte (most say active): each form decoded once.
        self._states: dict[bytes, R.Observation] = {}
        # Rows read ahead by prefetch (what the snapshot holds; MindState's own writes
        # lie over them).
        self._rows: dict[tuple[str, Key], Optional[bytes]] = {}
        # Whole scans read ahead by prefetch_scans: (table, prefix) -> rows. MindState
        # scans through its overlay and never reads these.
        self._scans: dict[tuple[str, Key], list[tuple[Key, bytes]]] = {}
        self._grants: dict[str, frozenset[tuple[str, str]]] = {}  # principal -> grants

    @property
    def commit_seq(self) -> int:
        """The context's storage version read (0: nothing was ever committed to it)."""
        return self._reader.commit_seq

    # -- raw access (MindState lays its overlay over these two) ---------------------------
    def _get(self, table: str, key: Key) -> Optional[bytes]:
        row = self._rows.get((table, key), _UNREAD)
        return self._reader.get(table, key) if row is _UNREAD else row

    def prefetch(self, table: str, keys: Iterable[Key]) -> None:
        """Read these rows now, in one round trip where the reader is remote (GetMany),
        for the gets that follow (the hot loops over a page of hits or an inbox)."""
        self.prefetch_tables({table: keys})

    def prefetch_tables(self, wanted: dict[str, Iterable[Key]], *, last: bool = False,
                        max_bytes: Optional[int] = None) -> None:
        """prefetch() of each table's keys, all in one round trip where the reader is
        remote (a page of hits reads its observations, frames and events together).
        `last`: no other read is expected (Reader.get_tables' `release`). `max_bytes`:
        read ahead about that much at most; the rest is read when asked for."""
        if max_bytes is not None and not self._reader.remote:
            return  # a local reader reads them when asked, as cheaply, holding none ahead
        asked = [(table, [k for k in dict.fromkeys(keys) if (table, k) not in self._rows])
                 for table, keys in wanted.items()]
        asked = [(table, keys) for table, keys in asked if keys]
        if asked:
            for (table, keys), rows in zip(asked, self._reader.get_tables(
                    asked, release=last, max_bytes=max_bytes)):
                for k, row in zip(keys, rows):
                    self._rows[(table, k)] = row

    def prefetch_scans(self, wanted: Iterable[tuple[str, Key]]) -> None:
        """Whole scans of these (table, prefix) read now in one round trip (ScanMany),
        for the scans that follow (an encoding's first reads: frames, order, relations,
        sessions...), when the reader is remote; a local one scans when asked (holding
        every row first cost an in-process compile of 1,000 frames 8% more)."""
        if not self._reader.remote:
            return
        asked = [w for w in dict.fromkeys(wanted) if w not in self._scans]
        if asked:
            self._scans.update(zip(asked, self._reader.scan_tables(asked)))

    def forget_prefetched(self) -> None:
        """Drop the rows read ahead and the events decoded (a long pass over a backlog
        reads ahead a chunk at a time)."""
        self._rows.clear()
        self._scans.clear()
        self._events.clear()
        self._event_bytes = 0

    def _scan(self, table: str, prefix: Key = (),
              after: Optional[Key] = None) -> Iterator[tuple[Key, bytes]]:
        rows = self._scans.get((table, prefix)) if after is None else None
        return iter(rows) if rows is not None else self._reader.scan(table, prefix, after)

    def _scan_keys(self, table: str, after: Optional[Key] = None) -> Iterator[Key]:
        return self._reader.scan_keys(table, (), after)

    def _exists(self, table: str) -> bool:
        """Whether the table has a row (one read of one row at most)."""
        rows = self._scans.get((table, ()))
        if rows is not None:
            return bool(rows)
        return next(iter(self._reader.scan(table, limit=1)), None) is not None

    def _scan_values(self, table: str, prefix: Key = ()) -> Iterable[bytes]:
        """_scan's values only (the store need not decode keys nobody reads)."""
        rows = self._scans.get((table, prefix))
        if rows is not None:
            return [v for _, v in rows]
        return self._reader.scan_values(table, prefix)

    # -- meta -------------------------------------------------------------------
    def meta(self) -> Optional[R.Meta]:
        if self._meta is None:
            self._meta = R.loads(R.Meta, self._get("meta", ()))
        return self._meta

    def require_meta(self, context: str) -> R.Meta:
        """The context's meta, or CONTEXT_NOT_FOUND: every service's first check."""
        meta = self.meta()
        if meta is None:
            raise MorphzError("CONTEXT_NOT_FOUND", f"context {context} does not exist",
                              context=context)
        return meta

    # -- events and observations -------------------------------------------------
    def event(self, seq: int) -> Optional[R.Event]:
        """The event (shared with other callers of this view: never change it)."""
        ev = self._events.get(seq)
        if ev is None:
            raw = self._get("events", (seq,))
            # A long scan (a rebuild), or a few large events, stay bounded.
            if len(self._events) >= _EVENT_CACHE or self._event_bytes >= _EVENT_CACHE_BYTES:
                self._events.clear()
                self._event_bytes = 0
            ev = self._events[seq] = R.loads(R.Event, raw)
            self._event_bytes += len(raw) if raw is not None else 0
        return ev

    def has_event(self, seq: int) -> bool:
        """Events are numbered densely from 0: no need to read one to know it exists."""
        meta = self.meta()
        return meta is not None and 0 <= seq < meta.next_seq

    def event_seq_by_id(self, event_id: str) -> Optional[int]:
        raw = self._get("event_ids", (event_id,))
        return int(raw) if raw is not None else None

    def event_by_ref(self, ref: str) -> Optional[R.Event]:
        """The event an `@eN` ref or a full event id names; None when there is none."""
        seq = R.parse_ref(ref)
        if seq is None:
            seq = self.event_seq_by_id(ref)
        meta = self.meta()
        if seq is None or meta is None or seq >= meta.next_seq:
            return None
        return self.event(seq)

    def event_dicts(self, seqs: Iterable[int], *,
                    text_chars: Optional[int] = None) -> dict[int, dict]:
        """The stored events of these seqs as plain dicts (hot paths that need a few fields
        of many events), decoded a group of rows at a time; missing ones are left out.
        `text_chars`: each text cut to that many characters as it is decoded (a page of
        large events is never held whole), but a transaction's: its secret parts are
        found by parsing it whole."""
        keys = [(seq,) for seq in seqs]
        self.prefetch_tables({"events": keys}, max_bytes=_DECODE_BYTES)
        out: dict[int, dict] = {}
        group: list[tuple[int, bytes]] = []
        size = 0
        for key in keys:
            raw = self._get("events", key)
            if raw is None:
                continue
            if group and size + len(raw) > _DECODE_BYTES:
                _decode_into(out, group, text_chars)
                group, size = [], 0
            group.append((key[0], raw))
            size += len(raw)
        if group:
            _decode_into(out, group, text_chars)
        return out

    def event_seqs_from(self, seq: int) -> list[int]:
        """The seqs of stored event rows at or past `seq` (none past meta's next_seq in a
        sound history): a range read, not a scan of the history."""
        return [k[0] for k, _ in self._scan("events", after=(seq - 1,) if seq else None)]

    def events(self) -> Iterator[R.Event]:
        for _, raw in self._scan("events"):
            yield R.loads(R.Event, raw)

    def prefetch_events(self, seqs: Iterable[int]) -> None:
        """Read these events ahead, in one round trip where the store is remote."""
        self.prefetch_tables({"events": [(seq,) for seq in seqs]})

    def event_record(self, seq: int) -> tuple[Optional[R.Event], Optional[bytes]]:
        """A copy of the stored event of its own (a caller may change it: an erasure)
        and its stored bytes; (None, None) when there is none."""
        raw = self._get("events", (seq,))
        return (R.loads(R.Event, raw), raw) if raw is not None else (None, None)

    def event_row(self, seq: int) -> Optional[bytes]:
        """One event's stored bytes, undecoded."""
        return self._get("events", (seq,))

    def event_rows(self) -> Iterator[tuple[Key, bytes]]:
        """The stored event rows, undecoded, in seq order."""
        return self._scan("events")

    def envelope_link(self, seq: int) -> str:
        """What an event after stored event `seq` links with: its envelope hash
        (envelope.py), whichever way it was itself linked."""
        raw = self.event_row(seq)
        return envelope.next_link(R.decode_json(raw), raw, True)

    def observation(self, seq: int) -> Optional[R.Observation]:
        return R.loads(R.Observation, self._get("observations", (seq,)))

    def observation_state(self, seq: int) -> str:
        """An input's lifecycle (active or retired); '' for runtime events, which have none."""
        obs = self._shared_observation(seq)
        return "" if obs is None else R.RETIRED if obs.retired else R.ACTIVE

    def observation_protected(self, seq: int) -> bool:
        """Whether an input is protected (False for runtime events, which have no state)."""
        obs = self._shared_observation(seq)
        return obs is not None and obs.protected

    def _shared_observation(self, seq: int) -> Optional[R.Observation]:
        """The input's observation state, decoded once per form of its row in this view
        (shared: never change it; observation() gives one to change)."""
        raw = self._get("observations", (seq,))
        if raw is None:
            return None
        obs = self._states.get(raw)
        if obs is None:
            obs = R.loads(R.Observation, raw)
            if len(self._states) >= _STATE_CACHE:
                self._states.clear()
            self._states[bytes(raw)] = obs
        return obs

    def inbox(self) -> list[int]:
        """Active (not retired) observations in event sequence order."""
        return [k[0] for k, _ in self._scan("inbox")]

    # -- frames -------------------------------------------------------------------
    def frame(self, frame_id: str) -> Optional[R.Frame]:
        f = self._frames.get(frame_id, _UNREAD)
        if f is _UNREAD:
            f = self._frames[frame_id] = R.loads(R.Frame, self._get("frames", (frame_id,)))
        return f

    def frames(self) -> Iterator[R.Frame]:
        for _, raw in self._scan("frames"):
            yield R.loads(R.Frame, raw)

    def frame_states(self) -> Iterator[str]:
        """Each frame's state, bodies undecoded."""
        for raw in self._scan_values("frames"):
            yield R.frame_state(raw)

    def frame_ids(self, after: Optional[str] = None) -> Iterator[str]:
        """Every frame's id, in order (those after the id `after`), bodies unread."""
        for (fid,) in self._scan_keys("frames", None if after is None else (after,)):
            yield fid

    def frames_in_order(self) -> list[R.Frame]:
        """Every frame in projection order: the placed ones as `place` left them, then
        the rest by id (as ListFrames shows them)."""
        return [R.loads(R.Frame, raw) for _, raw in self.frame_rows_in_order()]

    def frame_rows_in_order(self) -> list[tuple[str, bytes]]:
        """frames_in_order as (frame id, stored row), undecoded."""
        return self.in_placement_order({k[0]: (k[0], raw) for k, raw in self._scan("frames")})

    def frame_rows(self) -> list[bytes]:
        """Every frame's stored row, undecoded and keys unread: for a reader that keeps
        what it made of a row from one request to the next (encoding's RowCache), and
        orders what it made with in_placement_order."""
        return list(self._scan_values("frames"))

    def in_placement_order(self, by_id: dict[str, T]) -> list[T]:
        """The values of `by_id` (frame id -> what was made of that frame) in projection
        order: the placed frames as `place` left them, then the rest by id."""
        order = [fid for fid in self.order() if fid in by_id]
        placed = set(order)
        if len(placed) < len(by_id):  # placed is a subset: equal sizes, no others
            order += sorted(fid for fid in by_id if fid not in placed)
        return [by_id[fid] for fid in order]

    def frame_at(self, frame_id: str, revision: int) -> Optional[R.Frame]:
        """The frame as it stood at context revision `revision` (committed state only)."""
        for _, raw in self._reader.scan("frame_versions", (frame_id,),
                                        after=(frame_id, revision + 1), limit=1, reverse=True):
            return R.loads(R.Frame, raw)
        return None

    def frame_versions(self) -> Iterator[R.Frame]:
        """Every stored version of every frame: by frame id, then context revision (an
        erasure's plan reads them all)."""
        for _, raw in self._scan("frame_versions"):
            yield R.loads(R.Frame, raw)

    def last_version(self, frame_id: str) -> Optional[R.Frame]:
        rows = list(self._scan("frame_versions", (frame_id,)))
        return R.loads(R.Frame, rows[-1][1]) if rows else None

    # -- relations, order and checkpoints ---------------------------------------------
    def has_relation(self, s: str, name: str, o: str) -> bool:
        return self._get("relations", (s, name, o)) is not None

    def relations_from(self, s: str) -> list[tuple[str, str, str]]:
        return [k for k, _ in self._scan("relations", (s,))]

    def relations_to(self, o: str) -> list[tuple[str, str, str]]:
        return [(s, n, o2) for (o2, n, s), _ in self._scan("relations_in", (o,))]

    def relations(self) -> list[tuple[str, str, str]]:
        return [k for k, _ in self._scan("relations")]

    def has_relations(self) -> bool:
        """Whether any relation exists (one row read at most)."""
        return self._exists("relations")

    def order(self) -> list[str]:
        return [raw.decode() for raw in self._scan_values("order")]

    def order_after(self, rank: Optional[int] = None) -> Iterator[tuple[int, str]]:
        """(rank, frame id) of the order's entries past `rank` (all: None), in order: a
        page of a listing reads from where the last one ended, not the whole order."""
        for (r,), raw in self._scan("order", after=None if rank is None else (rank,)):
            yield r, raw.decode()

    def unplaced_frame_ids(self, after: Optional[str] = None) -> Iterator[str]:
        """Ids of the frames the order does not name (past the id `after`), by id: the
        frames' keys merged with the ranks' (both by frame id), no row read or held."""
        ranked = self._scan_keys("order_rank", None if after is None else (after,))
        next_ranked = next(ranked, None)
        for fid in self.frame_ids(after):
            while next_ranked is not None and next_ranked[0] < fid:
                next_ranked = next(ranked, None)
            if next_ranked is None or next_ranked[0] != fid:
                yield fid

    def checkpoint(self, name: str) -> Optional[R.Checkpoint]:
        return R.loads(R.Checkpoint, self._get("checkpoints", (name,)))

    def checkpoints(self) -> Iterator[R.Checkpoint]:
        for _, raw in self._scan("checkpoints"):
            yield R.loads(R.Checkpoint, raw)

    def checkpoint_revisions(self) -> list[list]:
        """[name, revision] of every checkpoint, without decoding the Minds they hold."""
        return [[k[0], json.loads(raw)["revision"]] for k, raw in self._scan("checkpoints")]

    # -- sessions, inputs, activations, calls ---------------------------------------------
    def session(self, sid: str) -> Optional[R.Session]:
        return R.loads(R.Session, self._get("sessions", (sid,)))

    def has_session(self, sid: str) -> bool:
        """session(sid) is not None, without decoding it (each input asks)."""
        return self._get("sessions", (sid,)) is not None

    def sessions(self) -> list[R.Session]:
        return [R.loads(R.Session, raw) for _, raw in self._scan("sessions")]

    def pending(self, sid: str) -> list[int]:
        return [k[1] for k, _ in self._scan("pending", (sid,))]

    def pending_count(self, s: R.Session) -> int:
        """len(pending(s.id)): one row read where the context keeps counts."""
        return s.pending if s.pending is not None else len(self.pending(s.id))

    def waiting_count(self, s: R.Session) -> int:
        """len(waiting(s.id)): one row read where the context keeps counts."""
        return s.waiting if s.waiting is not None else len(self.waiting(s.id))

    def activation(self, aid: str) -> Optional[R.Activation]:
        return R.loads(R.Activation, self._get("activations", (aid,)))

    def is_protected_root(self, seq: int) -> bool:
        return self._get("root_requests", (seq,)) is not None

    def root_requests(self) -> set[int]:
        """The root requests of every undelivered activation."""
        return {k[0] for k, _ in self._scan("root_requests")}

    def call(self, seq: int) -> Optional[R.Call]:
        return R.loads(R.Call, self._get("calls", (seq,)))

    def prefetch_calls(self, seqs: Iterable[int]) -> None:
        self.prefetch("calls", [(s,) for s in seqs])

    def open_calls(self, sid: str) -> list[tuple[int, str]]:
        """(action seq, activation id) of the session's calls still waiting for a result."""
        return [(k[1], raw.decode()) for k, raw in self._scan("open_calls", (sid,))]

    def waiting(self, target: str) -> list[int]:
        """Messages addressed to the session that no activation of it has claimed yet:
        its pending inputs that are messages. A stored event whose bytes lack the kind
        field a message's record holds is none, so only the others are decoded (a
        session's pending inputs may be many, and every encoding counts every
        session's); the rows are read in one round trip (up to _DECODE_BYTES: large
        events one at a time) and kept for that decode."""
        seqs = self.pending(target)
        self.prefetch_tables({"events": [(seq,) for seq in seqs]}, max_bytes=_DECODE_BYTES)
        out = []
        for seq in seqs:
            raw = self._get("events", (seq,))
            if raw is not None and _MESSAGE_KIND in raw and self.event(seq).kind == R.MESSAGE:
                out.append(seq)
        return out

    def is_promoted(self, seq: int) -> bool:
        return self._get("promoted", (seq,)) is not None

    # -- policy (shared/policy.py) ---------------------------------------------------------
    def grants(self, principal: str) -> frozenset[tuple[str, str]]:
        """(right, session) granted to `principal` ('' session: the whole context); read
        once per view (a request checks several rights, a remote scan is a round trip)."""
        found = self._grants.get(principal)
        if found is None:  # no principal holds a grant (its rows are no grants)
            found = self._grants[principal] = frozenset(
                (k[1], k[2]) for k, _ in self._scan("policy", (principal,))) \
                if principal else frozenset()
        return found

    def policy(self) -> list[tuple[str, str, str]]:
        """Every grant: (principal, right, session); a row with no principal is none."""
        return [k for k, _ in self._scan("policy") if k[0]]

    def policy_row(self, key: tuple[str, str, str]) -> Optional[bytes]:
        """A row of the policy table that is no grant (state.set_policy_row)."""
        return self._get("policy", key)

    # -- what an encoding compile reads (services/encoding) ----------------------------
    # Intent-named read-aheads (one round trip each where the store is remote) and the
    # frames and events keyed by their stored form for a cache that outlives a request:
    # the encoding service names no table and decodes no row.
    def prefetch_session(self, session: str, *, last: bool = False) -> None:
        """The meta and one session's record (`last`: the view's last read)."""
        self.prefetch_tables({"meta": [()], "sessions": [(session,)]}, last=last)

    def prefetch_activation(self, activation: str) -> None:
        """The meta and one activation's record."""
        self.prefetch_tables({"activations": [(activation,)], "meta": [()]})

    def prefetch_encoding_scans(self, session: str) -> None:
        """Every whole scan a compile for `session` makes (gather.py), in one ScanMany."""
        self.prefetch_scans([("pending", (session,)), ("root_requests", ()), ("inbox", ()),
                             ("frames", ()), ("order", ()), ("relations", ()),
                             ("checkpoints", ()), ("sessions", ()), ("open_calls", (session,))])

    def prefetch_inputs(self, observations: Iterable[int], events: Iterable[int], *,
                        max_bytes: Optional[int] = None) -> None:
        """These observations' states and these events, read ahead together."""
        self.prefetch_tables({"observations": [(seq,) for seq in observations],
                              "events": [(seq,) for seq in events]}, max_bytes=max_bytes)

    def frame_cache_keys(self) -> list[bytes]:
        """Every frame's cache key (its stored form: equal keys are equal frames, a
        changed frame has a new key), in no particular order; frame_of_key decodes one."""
        return self.frame_rows()

    @staticmethod
    def frame_of_key(key: bytes) -> R.Frame:
        return R.loads(R.Frame, key)

    def event_cache_key(self, seq: int) -> Optional[bytes]:
        """The event's cache key (its stored form, which names its context and seq: a key
        names one event); None when there is no such event. event_of_key decodes one."""
        return self.event_row(seq)

    @staticmethod
    def event_of_key(key: bytes) -> R.Event:
        return R.loads(R.Event, key)

    def idempotency(self, request_id: str) -> Optional[receipts.IdempotencyRecord]:
        """What the request id was applied as, of any stored version (receipts.py)."""
        return receipts.loads(self._get("idempotency", (request_id,)))

    def prefetch_idempotency(self, request_ids: Iterable[str]) -> None:
        self.prefetch("idempotency", [(r,) for r in request_ids])

    def snapshot_rows(self) -> Iterator[tuple[str, bytes]]:
        """Every encoding snapshot's id and stored bytes (shared/mind/snapshots.py)."""
        for (snapshot_id,), raw in self._scan("snapshots"):
            yield snapshot_id, raw

    def snapshot_row(self, snapshot_id: str) -> Optional[bytes]:
        """An encoding snapshot's stored bytes (shared/mind/snapshots.py reads them)."""
        return self._get("snapshots", (snapshot_id,))

    def snapshot_index_rows(self, prefix: Key, bound: Optional[Key], limit: int, *,
                            newest_first: bool = True) -> Iterator[tuple[Key, bytes]]:
        """Up to `limit` rows of the snapshot index under `prefix`, past `bound` (None:
        from the end, or the start), last key first (or first first): one bounded range
        read (shared/mind/snapshots.py owns the keys and the rows)."""
        return self._reader.scan("snapshot_index", prefix, bound, limit,
                                 reverse=newest_first)

    # -- the transaction service's reads (issue 41: in place of its own table reads) ------
    def prefetch_frame_views(self, frame_ids: list[str], *, max_bytes: int) -> None:
        """Read ahead what views of these frames read: their rows (about `max_bytes` at
        most) and their relations both ways, in one round trip each where the store is
        remote (a page of a frame listing)."""
        self.prefetch_tables({"frames": [(fid,) for fid in frame_ids]}, max_bytes=max_bytes)
        self.prefetch_scans([(table, (fid,)) for fid in frame_ids
                             for table in ("relations", "relations_in")])

    def last_event_seq(self) -> Optional[int]:
        """The seq of the last stored event row (None: no event), read from the end:
        what a server's startup check compares with the meta's next seq."""
        last = next(iter(self._reader.scan("events", reverse=True, limit=1)), None)
        return last[0][0] if last is not None else None

    # -- encoding snapshots -------------------------------------------------------------
    def snapshot(self, snapshot_id: str) -> Optional[dict]:
        """A stored snapshot record as the JSON object it must be (its fields belong to
        the encoding service, which checks them); SNAPSHOT_CORRUPT when it is not one."""
        raw = self._get("snapshots", (snapshot_id,))
        if raw is None:
            return None
        return snapshot_json(raw, snapshot_id)


def snapshot_corrupt(snapshot_id: str, why: str) -> MorphzError:
    """A stored snapshot record that cannot be read: an answer, never a crash."""
    return MorphzError("SNAPSHOT_CORRUPT", f"snapshot {snapshot_id[:80]} is corrupt ({why}): "
                       "it cannot be shown, replayed, checked or read",
                       snapshot=snapshot_id[:80], why=why)


_JSON_KINDS = {type(None): "null", list: "an array", str: "a string", int: "a number",
               float: "a number", bool: "a boolean"}


def snapshot_json(text: Union[bytes, str], snapshot_id: str) -> dict:
    """A snapshot record's JSON object, or SNAPSHOT_CORRUPT: text that is not UTF-8 JSON,
    nests past the decoder's recursion limit, or holds anything but an object. Stored
    bytes of two lines are the head's JSON and the body's (the encoding service's
    snapshot.pack): the head is parsed, the body's text is kept under "packed" for the
    service to parse when it needs the body (a record of one line has it there already)."""
    body = None
    if isinstance(text, bytes):
        cut = text.find(b"\n")
        if cut >= 0:
            text, body = text[:cut], text[cut + 1:]
    try:
        value = json.loads(text.decode("utf-8") if isinstance(text, bytes) else text)
        if body is not None:
            body = body.decode("utf-8")
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise snapshot_corrupt(snapshot_id, f"not JSON: {type(e).__name__}") from None
    if not isinstance(value, dict):
        raise snapshot_corrupt(snapshot_id, f"{_JSON_KINDS.get(type(value), 'a value')}, "
                               "not an object")
    if body is not None:
        if "packed" in value:
            raise snapshot_corrupt(snapshot_id, "a body both in its head and after it")
        value["packed"] = body
    return value


def event_dict(raw: bytes) -> dict:
    """One stored event as a plain dict (for a hot path that needs no record object)."""
    return R.decode_json(raw)


def _decode_into(out: dict[int, dict], rows: list[tuple[int, bytes]],
                 text_chars: Optional[int]) -> None:
    """event_dicts' rows decoded at once (a page's events cost about half as much as one
    call each; a large row alone: the join would copy it), texts cut to `text_chars`."""
    parsed = (R.decode_json(b"[" + b",".join([raw for _, raw in rows]) + b"]")
              if len(rows) > 1 else [R.decode_json(rows[0][1])])
    for (seq, _), ev in zip(rows, parsed):
        if text_chars is not None:
            text = ev.get("text")
            if text is not None and len(text) > text_chars and ev.get("kind") != R.CONTEXT_TX:
                ev["text"] = text[:text_chars]
        out[seq] = ev
