"""The read model's runtime records (view.py): sessions and the inputs they wait on,
activations, calls, promotions; who may do what (the policy table, shared/policy.py);
what a request id was applied as (idempotency, receipts.py).
"""
from __future__ import annotations

from typing import Iterable, Optional

from morphz.shared.mind import receipts, records as R
from morphz.shared.mind.view_events import DECODE_BYTES, EventReads

# A message's stored record holds this, unescaped (a text holding it has its quotes
# escaped); records are compact JSON (shared/mind/records.py dumps).
_MESSAGE_KIND = b'"kind":"message"'


class SessionReads(EventReads):
    """Built on the events: a session's waiting messages are inputs of a kind."""

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

    def waiting(self, target: str) -> list[int]:
        """Messages addressed to the session that no activation of it has claimed yet:
        its pending inputs that are messages. A stored event whose bytes lack the kind
        field a message's record holds is none, so only the others are decoded (a
        session's pending inputs may be many, and every encoding counts every
        session's); the rows are read in one round trip (up to DECODE_BYTES: large
        events one at a time) and kept for that decode."""
        seqs = self.pending(target)
        self.prefetch_tables({"events": [(seq,) for seq in seqs]}, max_bytes=DECODE_BYTES)
        out = []
        for seq in seqs:
            raw = self._get("events", (seq,))
            if raw is not None and _MESSAGE_KIND in raw and self.event(seq).kind == R.MESSAGE:
                out.append(seq)
        return out

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

    # -- idempotency (receipts.py) -----------------------------------------------------
    def idempotency(self, request_id: str) -> Optional[receipts.IdempotencyRecord]:
        """What the request id was applied as, of any stored version (receipts.py)."""
        return receipts.loads(self._get("idempotency", (request_id,)))

    def prefetch_idempotency(self, request_ids: Iterable[str]) -> None:
        self.prefetch("idempotency", [(r,) for r in request_ids])
