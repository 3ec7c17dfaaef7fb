"""A context's snapshots listed newest first, a page at a time (ListSnapshots, ASM-06).

Every snapshot is written with its entries in the snapshot index (shared/mind/
snapshots.py): under the whole context, its session and its activation, ordered by when
it was frozen. An entry holds this module's summary of the record (`Entry`), so a page
is one range read of the index, never a read of the records it lists: its cost does not
grow with the number of snapshots the context holds."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Optional

import msgspec

from morphz.shared import cursor as cursors, policy
from morphz.shared.auth import Caller
from morphz.shared.errors import MorphzError
from morphz.shared.mind.snapshots import Listed, Listing, SnapshotRepository
from morphz.shared.mind.view import MindView
from morphz.shared.mind.view_snapshots import snapshot_corrupt
from morphz.shared.names import check_name
from morphz.services.encoding.core.options import bad
from morphz.services.encoding.core.record import Head
from morphz.services.encoding.core.scope import parse_time

DEFAULT_PAGE, MAX_PAGE = 20, 100
ENTRY_VERSION = 1
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class Entry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One snapshot as a listing shows it (the JSON its index entries hold; `v`: the
    form's version, refused when newer than this server reads)."""
    v: int
    snapshot: str
    hash: str
    session: str
    activation: str
    time: str           # when it was frozen, ISO 8601 with offset
    bytes: int          # of the rendered encoding
    limit_bytes: int    # its byte budget
    tokens: int         # estimated tokens used
    limit_tokens: int   # 0: no token budget
    level: str          # pressure: normal | elevated | maintenance
    permille: int
    parent: str         # the snapshot whose scope it narrowed ("" for none)
    revision: int       # the Mind revision it saw
    tick: int
    claimed: int        # inputs its activation claimed
    reveal_secrets: bool
    last_event: int     # the seq of the history's last event then (its activation's, or after)
    stamp: int          # when it was frozen, the listing's order: microseconds, UTC

    @property
    def key(self) -> tuple[int, str]:
        """Its place in a listing (what a page continues after)."""
        return self.stamp, self.snapshot


def stamp_of(when: datetime) -> int:
    """Microseconds since the epoch, UTC: the index's order."""
    return (when - _EPOCH) // _MICROSECOND


_MICROSECOND = datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=timezone.utc) - _EPOCH
_encode_entry = msgspec.json.Encoder().encode
_decode_entry = msgspec.json.Decoder(Entry).decode


def listing_of(head: Head, stamp: int, last_event: int) -> Listing:
    """What a compile writes beside its record: the record's summary, and where it goes."""
    p = head.pressure
    entry = Entry(ENTRY_VERSION, head.id, head.hash, head.session, head.activation.id,
                  head.time, head.bytes, p.limit_bytes, p.used_tokens, p.limit_tokens,
                  p.level, p.permille, head.parent, head.revision, head.tick,
                  len(head.activation.claimed), head.scope.reveal_secrets, last_event, stamp)
    return Listing(head.session, head.activation.id, stamp, _encode_entry(entry))


def entry(listed: Listed) -> Entry:
    """An index entry decoded, or SNAPSHOT_CORRUPT naming its snapshot."""
    try:
        e = _decode_entry(listed.summary)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise snapshot_corrupt(listed.snapshot_id, f"its index entry: {str(err)[:120]}") \
            from None
    if e.v > ENTRY_VERSION or e.snapshot != listed.snapshot_id or e.stamp != listed.stamp:
        raise snapshot_corrupt(listed.snapshot_id, "its index entry is of another snapshot "
                               "or a newer form")
    return e


@dataclass(frozen=True)
class SnapshotQuery:
    """ListSnapshots' request, checked: filters (empty: any), page size and cursor."""
    session: str = ""
    activation: str = ""
    since: str = ""   # inclusive, ISO 8601 with offset
    until: str = ""   # exclusive
    limit: int = DEFAULT_PAGE
    cursor: str = ""

    @staticmethod
    def make(session: str = "", activation: str = "", since: str = "", until: str = "",
             limit: int = 0, cursor: str = "") -> "SnapshotQuery":
        if session:
            check_name(session, "session")
        if activation:
            check_name(activation, "activation")
        s, u = parse_time(since, "since"), parse_time(until, "until")
        if s and u and s >= u:
            raise bad("since must be before until", field="since")
        if not 0 <= limit <= MAX_PAGE:
            raise bad(f"limit must be 1..{MAX_PAGE} (0: {DEFAULT_PAGE})", field="limit")
        if len(cursor) > cursors.MAX_CURSOR_CHARS:
            raise cursors.invalid("ENCODING")
        return SnapshotQuery(session, activation, since, until, limit or DEFAULT_PAGE, cursor)

    def params(self, context: str) -> dict:
        """What a cursor is bound to (a cursor of another listing is refused)."""
        return {"context": context, "session": self.session, "activation": self.activation,
                "since": self.since, "until": self.until}


@dataclass(frozen=True)
class SnapshotPage:
    entries: list[Entry]
    next_cursor: str  # "" on the last page


def page(m: MindView, context: str, q: SnapshotQuery, caller: Caller) -> SnapshotPage:
    """A page of the listing `q` names, as `caller` may see it: a session's needs
    `encode` for it, an activation's for the activation's session (else: as a missing
    activation), the whole context's `encode` on the whole context."""
    if q.activation:
        policy.check_any(m, context, caller, policy.ENCODE)
        m.require_meta(context)
        act = m.activation(q.activation)
        if act is None or not policy.allowed(m, caller, policy.ENCODE, act.session):
            raise MorphzError("ACTIVATION_NOT_FOUND", f"no activation {q.activation}",
                              activation=q.activation)
        if q.session and act.session != q.session:
            return SnapshotPage([], "")  # the filters name no snapshot together
    else:
        policy.check(m, context, caller, policy.ENCODE, q.session)
        m.require_meta(context)
        if q.session and not m.has_session(q.session):
            raise MorphzError("SESSION_NOT_FOUND", f"no session {q.session}",
                              session=q.session)
    after = _after(q, context)
    since, until = (_stamp(q.since, "since"), _stamp(q.until, "until"))
    rows = SnapshotRepository.listed(m, session=q.session, activation=q.activation,
                                     after=after, until=until, since=since,
                                     limit=q.limit + 1)
    entries = [entry(r) for r in rows[:q.limit]]
    more = len(rows) > q.limit
    next_cursor = cursors.encode("snapshots", q.params(context), "1", 0,
                                 f"{rows[q.limit - 1].stamp}:{rows[q.limit - 1].snapshot_id}") \
        if more else ""
    return SnapshotPage(entries, next_cursor)


def _after(q: SnapshotQuery, context: str) -> Optional[tuple[int, str]]:
    """Where the cursor's page starts: past the last entry the previous page gave."""
    if not q.cursor:
        return None
    # New snapshots come first in the listing, so a page after a given entry never
    # changes: the cursor has one version, and never goes stale.
    _, after = cursors.decode_position(q.cursor, "snapshots", q.params(context), "1",
                                       service="ENCODING")
    stamp, sep, snapshot_id = after.partition(":")
    if not sep or not stamp.isdigit() or not snapshot_id:
        raise cursors.invalid("ENCODING")
    return int(stamp), snapshot_id


def _stamp(value: str, what: str) -> Optional[int]:
    t = parse_time(value, what)
    return stamp_of(t) if t is not None else None
