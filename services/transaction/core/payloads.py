"""Each event kind's `data` as a typed record: a union tagged by the event's `kind`.

A live request builds its event's payload typed and the reducer applies that same
object (a transaction's parsed Tx is never turned into a dict and parsed back); a
replayed event's payload is decoded once from its stored `data` (`decode`). `to_data`
writes the dict stored events always held, key for key: stored bytes are hashed into the
history's chain, so an event written before these types and one written after read and
hash alike. Absent fields are what older events did not record (a `rules` version of 1,
no payload hash). The chain link (`prev`) stays in the data: chain.py's, not the kind's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from morphz.shared.mind import records as R
from morphz.services.transaction.core.retention import Retention
from morphz.services.transaction.core.txlang import Tx

RETENTION_OP = "retention"  # a Policy change that sets the retention policy


def _rules(version: int) -> dict:
    """The rules version an event records (rules.py); version 1 events record none."""
    return {} if version == 1 else {"rules": version}


@dataclass(frozen=True, slots=True)
class Created:
    window: int
    admin: str = ""  # the authenticated creator, who administers the context
    # Its sessions count their waiting inputs (Meta.counts): contexts created since
    # issue 58; absent before, so their replays keep the rows they wrote.
    counts: bool = False

    def to_data(self) -> dict:
        return {"window": self.window, **({"admin": self.admin} if self.admin else {}),
                **({"counts": True} if self.counts else {})}

    @staticmethod
    def from_data(d: dict) -> "Created":
        return Created(d["window"], d.get("admin", ""), d.get("counts", False) is True)


@dataclass(frozen=True, slots=True)
class Activation:
    activation_id: str
    rules: int = 1

    def to_data(self) -> dict:
        return {"activation_id": self.activation_id, **_rules(self.rules)}

    @staticmethod
    def from_data(d: dict) -> "Activation":
        return Activation(d["activation_id"], d.get("rules", 1))


@dataclass(frozen=True, slots=True)
class Delivery:
    activation_id: str

    def to_data(self) -> dict:
        return {"activation_id": self.activation_id}

    @staticmethod
    def from_data(d: dict) -> "Delivery":
        return Delivery(d["activation_id"])


@dataclass(frozen=True, slots=True)
class Commit:
    """A context-tx: the transaction, the evaluation it was committed for and, when it
    was based on an older revision and rebased, that revision."""
    tx: Tx
    rules: int = 1
    activation: str = ""
    payload_hash: str = ""  # with a request id: what its retries are compared with
    rebased_from: Optional[int] = None

    def to_data(self, tx_data: Optional[dict] = None) -> dict:
        """`tx_data`: self.tx.to_dict() when the caller has it already."""
        d = {"tx": tx_data if tx_data is not None else self.tx.to_dict(), **_rules(self.rules)}
        if self.activation:
            d["activation"] = self.activation
        if self.payload_hash:
            d["payload_hash"] = self.payload_hash
        if self.rebased_from is not None:
            d["rebased_from"] = self.rebased_from
        return d

    @staticmethod
    def from_data(d: dict) -> "Commit":
        return Commit(Tx.from_dict(d["tx"]), d.get("rules", 1), d.get("activation", ""),
                      d.get("payload_hash", ""), d.get("rebased_from"))


@dataclass(frozen=True, slots=True)
class Policy:
    op: str  # grant | revoke | retention
    principal: str
    rights: tuple[str, ...]
    session: str = ""
    # op retention: the context's retention policy from now on (None: none). Its event
    # keeps the grant fields, empty, so a reader older than retention applies nothing.
    retention: Optional[Retention] = None

    def to_data(self) -> dict:
        d = {"op": self.op, "principal": self.principal, "rights": list(self.rights),
             "session": self.session}
        if self.op == RETENTION_OP:
            d["retention"] = self.retention.to_data() if self.retention else None
        return d

    @staticmethod
    def from_data(d: dict) -> "Policy":
        kept = d.get("retention")
        return Policy(d["op"], d["principal"], tuple(d["rights"]), d["session"],
                      Retention.from_data(kept) if kept else None)


@dataclass(frozen=True, slots=True)
class Input:
    """An appended event (APPEND_KINDS): where causal.py routed it (an action's
    activation, a message's target, the call a tool result answers) and how it was sent."""
    activation: str = ""
    target_session: str = ""
    call: str = ""
    payload_hash: str = ""
    secret: bool = False
    occurred_at: str = ""

    def to_data(self) -> dict:
        d = {}
        for key, value in (("activation", self.activation),
                           ("target_session", self.target_session), ("call", self.call),
                           ("payload_hash", self.payload_hash), ("secret", self.secret),
                           (R.OCCURRED_AT, self.occurred_at)):
            if value:
                d[key] = value
        return d

    @staticmethod
    def from_data(d: dict) -> "Input":
        return Input(d.get("activation", ""), d.get("target_session", ""), d.get("call", ""),
                     d.get("payload_hash", ""), bool(d.get("secret", False)),
                     d.get(R.OCCURRED_AT, ""))


@dataclass(frozen=True, slots=True)
class Erasure:
    """What an erasure took (docs/privacy.md): each event whose content it removed, as
    (seq, digest of its first record, digest of the record it left), the frame versions
    whose bodies it took (frame id, context revision), how it selected them (never the
    phrase it matched: that is what was erased) and why. Who and when are the event's
    actor and time."""
    reason: str
    what: tuple[tuple[int, str, str], ...]
    frames: tuple[tuple[str, int], ...] = ()
    selector: Optional[dict] = None
    events: int = 0  # of `what`, the events erased whole (the rest: transactions' bodies)

    def to_data(self) -> dict:
        return {"reason": self.reason, "what": [list(w) for w in self.what],
                "versions": [list(f) for f in self.frames], "selector": self.selector or {},
                "events": self.events}

    @staticmethod
    def from_data(d: dict) -> "Erasure":
        return Erasure(d["reason"], tuple(tuple(w) for w in d["what"]),
                       tuple(tuple(f) for f in d.get("versions", ())),
                       d.get("selector") or {},
                       d.get("events", 0))


Payload = Union[Created, Activation, Delivery, Commit, Policy, Input, Erasure]
_BY_KIND = {R.CONTEXT_CREATED: Created, R.ACTIVATION: Activation, R.DELIVERY: Delivery,
            R.CONTEXT_TX: Commit, R.POLICY: Policy, R.ERASURE: Erasure}


def decode(ev: R.Event) -> Payload:
    """A stored event's payload, typed by its kind (an unknown kind reads as an input:
    the reducer refuses it by its kind)."""
    return _BY_KIND.get(ev.kind, Input).from_data(ev.data)


def payload_hash(ev: R.Event) -> str:
    """The payload hash an event with a request id recorded ('' before they did)."""
    return ev.data.get("payload_hash", "")
