"""The read model's events (view.py): the Event History and each input's state.

Events are immutable: a view decodes each once (a bounded cache) and hands the same
object to every caller, who must not change it (event_record gives a copy to change).
Hot paths that need a few fields of many events read plain dicts (event_dicts), decoded
a group of rows at a time.
"""
from __future__ import annotations

from typing import Iterable, Iterator, Optional

from morphz.shared.mind import envelope, records as R
from morphz.shared.mind.view_rows import ViewRows
from morphz.shared.storage.api import Key

_EVENT_CACHE, _EVENT_CACHE_BYTES = 1024, 32 << 20
DECODE_BYTES = 8 << 20  # rows read ahead and decoded together at most (event_dicts)
_STATE_CACHE = 256


class EventReads(ViewRows):
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
        self.prefetch_tables({"events": keys}, max_bytes=DECODE_BYTES)
        out: dict[int, dict] = {}
        group: list[tuple[int, bytes]] = []
        size = 0
        for key in keys:
            raw = self._get("events", key)
            if raw is None:
                continue
            if group and size + len(raw) > DECODE_BYTES:
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

    def last_event_seq(self) -> Optional[int]:
        """The seq of the last stored event row (None: no event), read from the end:
        what a server's startup check compares with the meta's next seq."""
        last = next(iter(self._reader.scan("events", reverse=True, limit=1)), None)
        return last[0][0] if last is not None else None

    def envelope_link(self, seq: int) -> str:
        """What an event after stored event `seq` links with: its envelope hash
        (envelope.py), whichever way it was itself linked."""
        raw = self.event_row(seq)
        return envelope.next_link(R.decode_json(raw), raw, True)

    # -- keyed by their stored form, for a cache that outlives a request (encoding) ------
    def event_cache_key(self, seq: int) -> Optional[bytes]:
        """The event's cache key (its stored form, which names its context and seq: a key
        names one event); None when there is no such event. event_of_key decodes one."""
        return self.event_row(seq)

    @staticmethod
    def event_of_key(key: bytes) -> R.Event:
        return R.loads(R.Event, key)

    # -- observations: each input's lifecycle -------------------------------------------
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
