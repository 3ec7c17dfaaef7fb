"""Scopes: what one evaluation may see. A scope can only be
narrowed: a child names a subset of its parent's sessions, kinds and frames and a
time range inside the parent's. The root of every chain is the evaluating session's
causal scope: its own observations, the shared Mind."""
from __future__ import annotations

import functools
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Optional

from morphz.services.encoding.core.options import bad
from morphz.shared.names import check_lookup, check_name
from morphz.shared.errors import MorphzError

MAX_SCOPE_ENTRIES = 1024


def parse_time(value: str, what: str) -> Optional[datetime]:
    if not value:
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        raise bad(f"{what} is not an ISO 8601 time: {value[:60]!r}", field=what) from None
    if t.tzinfo is None:
        raise bad(f"{what} needs an explicit UTC offset", field=what, value=value[:60])
    return t


@dataclass(frozen=True)
class Scope:
    sessions: tuple[str, ...] = ()  # empty: no restriction at this level
    kinds: tuple[str, ...] = ()
    since: str = ""
    until: str = ""
    frames: tuple[str, ...] = ()
    # Secrets render as stored (shared/mind/secrets.py); off, `[secret REF]`. Explicit:
    # never inherited by a child scope, and granted to one only if its parent had it.
    reveal_secrets: bool = False

    @staticmethod
    def make(sessions=(), kinds=(), since: str = "", until: str = "", frames=(),
             reveal_secrets: bool = False) -> "Scope":
        lists = {"sessions": sessions, "kinds": kinds, "frames": frames}
        for name, values in lists.items():
            if len(values) > MAX_SCOPE_ENTRIES:
                raise bad(f"scope {name} has more than {MAX_SCOPE_ENTRIES} entries",
                          field=f"scope.{name}")
            check = check_lookup if name == "frames" else check_name  # frame ids: 200 chars
            for v in values:
                check(v, f"scope.{name} entry")
        s, u = parse_time(since, "scope.since"), parse_time(until, "scope.until")
        if s and u and not s < u:
            raise bad("scope.since must be before scope.until", field="scope")
        return Scope(tuple(sorted(set(sessions))), tuple(sorted(set(kinds))), since, until,
                     tuple(sorted(set(frames))), bool(reveal_secrets))

    def to_dict(self) -> dict:
        # reveal_secrets only when set: records written before it keep their form.
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()
                if k != "reveal_secrets" or v}

    # -- narrowing -----------------------------------------------------------------
    def narrow(self, child: "Scope") -> "Scope":
        """The child scope, with every field it leaves open inherited from self;
        anything wider than self is a SCOPE_VIOLATION naming the field."""
        def subset(name: str) -> tuple[str, ...]:
            mine, theirs = getattr(self, name), getattr(child, name)
            if not theirs:
                return mine
            if mine and not set(theirs) <= set(mine):
                extra = sorted(set(theirs) - set(mine))
                raise MorphzError("SCOPE_VIOLATION", f"scope can only be narrowed: {name} "
                                  f"{', '.join(extra[:5])} outside the parent scope",
                                  field=f"scope.{name}", outside=extra[:20])
            return theirs
        since, until = self.since, self.until
        if child.since:
            if self.since and parse_time(child.since, "since") < parse_time(self.since, "since"):
                raise MorphzError("SCOPE_VIOLATION", "scope can only be narrowed: since is "
                                  "earlier than the parent's", field="scope.since")
            since = child.since
        if child.until:
            if self.until and parse_time(child.until, "until") > parse_time(self.until, "until"):
                raise MorphzError("SCOPE_VIOLATION", "scope can only be narrowed: until is "
                                  "later than the parent's", field="scope.until")
            until = child.until
        if child.reveal_secrets and not self.reveal_secrets:
            raise MorphzError("SCOPE_VIOLATION", "scope can only be narrowed: reveal_secrets "
                              "was not granted to the parent", field="scope.reveal_secrets")
        return Scope.make(subset("sessions"), subset("kinds"), since, until, subset("frames"),
                          child.reveal_secrets)

    # -- membership ------------------------------------------------------------------
    def why_not_event(self, session: str, kind: str, time: str, occurred_at: str = "") -> str:
        """'' when an observation is inside the scope, else the reason it is not. The
        time range is judged on when it happened where it came from (`occurred_at`), the
        time Morphz recorded it where none was given: as recall's time-range search
        (RECALL-11)."""
        if self.sessions and session not in self.sessions:
            return "outside scope: another session's causal scope"
        if self.kinds and kind not in self.kinds:
            return "outside scope: kind"
        if self.since or self.until:
            t = datetime.fromisoformat(occurred_at or time)
            if self.since and t < self._since:
                return "outside scope: before since"
            if self.until and t >= self._until:
                return "outside scope: at or after until"
        return ""

    # Parsed once per scope (checked in make), not once per event judged.
    @functools.cached_property
    def _since(self) -> Optional[datetime]:
        return parse_time(self.since, "since")

    @functools.cached_property
    def _until(self) -> Optional[datetime]:
        return parse_time(self.until, "until")

    def allows_frame(self, frame_id: str) -> bool:
        return not self.frames or frame_id in self.frames


def causal_scope(session: str, reveal_secrets: bool = False) -> Scope:
    """The widest scope an evaluation of `session` may have."""
    return Scope(sessions=(session,), reveal_secrets=reveal_secrets)
