"""One evaluation (an activation) as a step of its agent, by reference (ShowEvaluation,
UI-03): the inputs it claimed, the snapshots compiled for it, the recall calls recorded
for it, the actions it issued and their results, the messages its session sent meanwhile,
the transactions committed under it with their receipts, the Mind's change they made,
and the session's previous and next evaluations.

Where it reads, and what that costs (none of it grows with the history's length):
- its snapshots and its neighbours: the snapshot index (listing.py), a few range reads;
- its events: the history from its activation event to its delivery, in chunks, at most
  MAX_SCAN_EVENTS events (past that the view says where it stopped: `complete` false).
  The activation event is found just after the last input it claimed (the claim comes
  after its inputs), or, when it claimed none, just before the history's last event
  when its first snapshot was compiled (`Entry.last_event`);
- a transaction's receipt: its idempotency record (its request id's), which holds the
  revision it made and each op's outcome; one committed without a request id keeps
  none, and shows its ops with outcome "" and revision 0.
Secrets stay markers: an event's preview is what a reader without `reveal` sees."""
from __future__ import annotations

import json
from typing import Any, Optional

from morphz.shared import policy
from morphz.shared.auth import Caller
from morphz.shared.errors import MorphzError
from morphz.shared.mind import receipts, records as R, secrets
from morphz.shared.mind.snapshots import SnapshotRepository
from morphz.shared.mind.view import MindView
from morphz.services.encoding.core.listing import Entry, entry
from morphz.services.encoding.core.results import (
    Action, Evaluation, EventRef, MindChange, MindDiff, RecallCall, Transaction, TxOutcome)

MAX_SCAN_EVENTS = 4096  # history read past (or before) the activation event, at most
CHUNK = 128             # events decoded at a time
PREVIEW_CHARS = 240
MAX_LISTED = 200        # entries of each list (inputs, actions, recalls, ...)
MAX_SNAPSHOTS = 50      # the activation's snapshots shown, oldest first
MAX_HITS = 50           # refs a recall call names
NEIGHBOUR_ROWS = 64     # session index rows read to find the previous or next step
FRAME_OPS = {"create": "created", "derive": "derived", "revise": "revised",
             "retire": "retired", "restore": "restored", "protect": "protected",
             "unprotect": "unprotected"}


def show(m: MindView, context: str, activation: str, caller: Caller) -> Evaluation:
    """The evaluation `activation` names, if `caller` may encode its session (else it
    reads as a missing one)."""
    policy.check_any(m, context, caller, policy.ENCODE)
    m.require_meta(context)
    act = m.activation(activation)
    if act is None or not policy.allowed(m, caller, policy.ENCODE, act.session):
        raise MorphzError("ACTIVATION_NOT_FOUND", f"no activation {activation}",
                          activation=activation)
    snaps = [entry(r) for r in SnapshotRepository.listed(
        m, activation=activation, limit=MAX_SNAPSHOTS, oldest_first=True)]
    inputs = tuple(_event_ref(d) for d in m.event_dicts(act.claimed[:MAX_LISTED]).values())
    walk = _Walk(m, act)
    walk.run(_start(m, act, snaps))
    transactions = walk.transactions()
    previous, following = _neighbours(m, act, snaps)
    return Evaluation(
        context, act.id, act.session, act.tick, act.tick_advanced, act.delivered,
        R.ref(act.root) if act.root is not None else "", walk.time, walk.activation_ref,
        walk.delivery_ref, inputs, tuple(snaps), tuple(walk.recalls), tuple(walk.actions()),
        tuple(walk.results), tuple(walk.messages), transactions,
        _diff(act, snaps, transactions), previous, following, walk.complete, walk.last_seq)


def _event_ref(d: dict) -> EventRef:
    text = secrets.shown_dict_text(d)
    return EventRef(R.ref(d["seq"]), d["kind"], d.get("session", ""), d["time"],
                    d.get("actor", ""), text[:PREVIEW_CHARS], len(text),
                    secrets.is_secret_event(d.get("data") or {}))


def _start(m: MindView, act: R.Activation, snaps: list[Entry]) -> tuple[int, bool]:
    """Where to look for the activation event: (seq, forward). Past its claimed inputs
    (the claim follows them); with none, back from the history's end at its first
    compile; with neither, from the start (within the bound)."""
    if act.claimed:
        return max(act.claimed) + 1, True
    if snaps:
        return snaps[0].last_event, False
    return 1, True


class _Walk:
    """The history from the activation event to its delivery, read a chunk at a time."""

    def __init__(self, m: MindView, act: R.Activation) -> None:
        self.m, self.act = m, act
        self.time = self.activation_ref = self.delivery_ref = ""
        self.recalls: list[RecallCall] = []
        self.results: list[EventRef] = []
        self.messages: list[EventRef] = []
        self._actions: dict[str, Action] = {}
        self._txs: list[dict] = []
        self.complete, self.last_seq = False, 0

    def run(self, start: tuple[int, bool]) -> None:
        seq, forward = start
        last = self.m.meta().next_seq - 1
        read = 0
        if not forward:  # back to the activation event, then forward from it
            seq = self._find_back(min(seq, last))
            if seq is None:
                return
        while seq <= last and read < MAX_SCAN_EVENTS:
            seqs = list(range(seq, min(last, seq + CHUNK - 1) + 1))
            read += len(seqs)
            for s, d in sorted(self.m.event_dicts(seqs).items()):
                self.last_seq = s
                if self._see(d):
                    self.complete = True
                    return
            seq = seqs[-1] + 1
        self.complete = seq > last  # the whole history so far was read

    def _find_back(self, seq: int) -> Optional[int]:
        low = max(1, seq - MAX_SCAN_EVENTS + 1)
        while seq >= low:
            seqs = list(range(max(low, seq - CHUNK + 1), seq + 1))
            for s, d in sorted(self.m.event_dicts(seqs).items(), reverse=True):
                if self._is_claim(d):
                    return s
            seq = seqs[0] - 1
        return None

    def _is_claim(self, d: dict) -> bool:
        return d["kind"] == R.ACTIVATION and \
            (d.get("data") or {}).get("activation_id") == self.act.id

    def _see(self, d: dict) -> bool:
        """Note one event; True at the activation's delivery (the walk's end)."""
        kind, data, aid = d["kind"], d.get("data") or {}, self.act.id
        if not self.activation_ref:
            if self._is_claim(d):
                self.activation_ref, self.time = R.ref(d["seq"]), d["time"]
            return False
        if kind == R.DELIVERY and data.get("activation_id") == aid:
            self.delivery_ref = R.ref(d["seq"])
            return True
        if kind == R.ACTION and data.get("activation") == aid:
            if len(self._actions) < MAX_LISTED:
                text = secrets.shown_dict_text(d)
                self._actions[R.ref(d["seq"])] = Action(R.ref(d["seq"]), d["time"],
                                                        text[:PREVIEW_CHARS], "")
        elif kind == R.TOOL_RESULT and data.get("call") in self._actions:
            call = data["call"]
            a = self._actions[call]
            self._actions[call] = Action(a.ref, a.time, a.preview, R.ref(d["seq"]))
            _add(self.results, _event_ref(d))
        elif kind == R.CONTEXT_TX and data.get("activation") == aid:
            if len(self._txs) < MAX_LISTED:
                self._txs.append(d)
        elif kind == "recall" and d.get("session") == self.act.session:
            call = _recall_call(d, aid)
            if call is not None:
                _add(self.recalls, call)
        elif kind == R.MESSAGE and d.get("session") == self.act.session:
            _add(self.messages, _event_ref(d))
        return False

    def actions(self) -> list[Action]:
        """Its actions, each with its result: seen in the walk, or (a late one, after
        the delivery) as the call's record names it."""
        open_calls = [a.ref for a in self._actions.values() if not a.result]
        self.m.prefetch_calls([R.ref_seq(r) for r in open_calls])
        for ref in open_calls:
            c = self.m.call(R.ref_seq(ref))
            if c is not None and c.result is not None:
                a = self._actions[ref]
                self._actions[ref] = Action(a.ref, a.time, a.preview, R.ref(c.result))
        return list(self._actions.values())

    def transactions(self) -> tuple[Transaction, ...]:
        ids = [d["request_id"] for d in self._txs if d.get("request_id")]
        self.m.prefetch_idempotency(ids)
        return tuple(_transaction(d, self.m.idempotency(d["request_id"])
                                  if d.get("request_id") else None) for d in self._txs)


def _add(items: list, item: Any) -> None:
    if len(items) < MAX_LISTED:
        items.append(item)


def _recall_call(d: dict, activation: str) -> Optional[RecallCall]:
    """A recall observation of this activation (its text is the recall service's record:
    op, activation, request, reply or, cut short, the reply's refs)."""
    try:
        rec = json.loads(d.get("text", ""))
    except ValueError:
        return None
    if not isinstance(rec, dict) or rec.get("activation") != activation:
        return None
    request = rec.get("request") if isinstance(rec.get("request"), dict) else {}
    op = str(rec.get("recall", ""))
    query = request.get({"search": "query", "read": "ref"}.get(op, "frame_id"), "")
    reply = rec.get("reply") if isinstance(rec.get("reply"), dict) else {}
    if "refs" in rec:
        found = [r for r in rec["refs"] if isinstance(r, str)]
    elif op == "read":
        found = [str(reply.get("ref", query))]
    else:
        items = reply.get("results") or reply.get("nodes") or []
        found = [str(i.get("ref") or i.get("id") or "") for i in items if isinstance(i, dict)]
    return RecallCall(R.ref(d["seq"]), op, str(query), tuple(found[:MAX_HITS]), len(found),
                      d["time"])


def _transaction(d: dict, kept: Optional[receipts.IdempotencyRecord]) -> Transaction:
    tx = (d.get("data") or {}).get("tx") or {}
    receipt = kept.receipt if kept is not None else None
    if not isinstance(receipt, receipts.TxReceipt) or receipt.seq != d["seq"]:
        receipt = None  # none kept (no request id), or not this event's
    if receipt is not None:
        results = tuple(TxOutcome(o.op, o.target, o.outcome, o.frame_revision)
                        for o in receipt.results)
    else:
        results = tuple(TxOutcome(o.get("op", ""), _target(o), "", 0)
                        for o in tx.get("ops", []))
    return Transaction(R.ref(d["seq"]), d.get("session", ""), d["time"],
                       receipt.revision if receipt else 0,
                       tx.get("base_version", 0), tx.get("reason", ""),
                       bool(receipt and receipt.rebased), results)


def _target(op: dict) -> str:
    """An op's target as a receipt names it (stored ops: txlang's fields)."""
    if "subject" in op:
        return f"{op['subject']} {op.get('name', '')} {op.get('object', '')}"
    for field in ("frame_id", "name", "session"):
        if op.get(field):
            return str(op[field])
    return " ".join(op.get("targets") or [])


def _diff(act: R.Activation, snaps: list[Entry],
          transactions: tuple[Transaction, ...]) -> MindDiff:
    """What the evaluation changed, by reference: its claim's window retirements, then
    each receipt's outcomes in order."""
    changes = [MindChange("frame", fid, "retired", 0, 0) for fid in act.retired_frames]
    for tx in transactions:
        for o in tx.results:
            changes.append(_change(o, tx.revision))
    made = [tx.revision for tx in transactions if tx.revision]
    start = snaps[0].revision if snaps else (min(made) - 1 if made else 0)
    return MindDiff(start, max(made) if made else start, tuple(changes))


def _change(o: TxOutcome, revision: int) -> MindChange:
    if o.op in ("relate", "unrelate"):
        return MindChange("relation", o.target, o.outcome or o.op + "d", 0, revision)
    if o.op in ("retire-session", "restore-session"):
        return MindChange("session", o.target, o.outcome, 0, revision)
    if o.op in ("checkpoint", "rollback", "drop-checkpoint"):
        return MindChange("checkpoint", o.target, o.outcome or o.op, 0, revision)
    if o.op == "place":
        return MindChange("order", o.target, o.outcome or "placed", 0, revision)
    kind = "observation" if R.is_ref(o.target) else "frame"
    return MindChange(kind, o.target, o.outcome or FRAME_OPS.get(o.op, o.op),
                      o.frame_revision, revision)


def _neighbours(m: MindView, act: R.Activation, snaps: list[Entry]) -> tuple[str, str]:
    """The session's evaluations just before and just after this one ("" for none). An
    evaluation's place among its session's is its first snapshot's (a later compile of
    an older one, as for a replay, does not move it): the nearest other evaluation whose
    first snapshot came before this one's first, and after it."""
    if not snaps:
        return "", ""
    firsts: dict[str, tuple[int, str]] = {act.id: snaps[0].key}

    def first(activation: str) -> tuple[int, str]:
        if activation not in firsts:
            firsts[activation] = SnapshotRepository.listed(
                m, activation=activation, limit=1, oldest_first=True)[0].key
        return firsts[activation]
    mine = snaps[0].key
    before, after = None, None
    for row in SnapshotRepository.listed(m, session=act.session, after=mine,
                                         limit=NEIGHBOUR_ROWS):
        e = entry(row)
        if e.activation == act.id:
            continue
        at = first(e.activation)
        if before is None or at > before[0]:
            before = (at, e.activation)
        if at == e.key:  # an evaluation's first: the ones further back came before it
            break
    for row in SnapshotRepository.listed(m, session=act.session, after=mine,
                                         limit=NEIGHBOUR_ROWS, oldest_first=True):
        e = entry(row)
        if e.activation != act.id and first(e.activation) == e.key:
            after = e.activation  # the first first snapshot past this one's first
            break
    return before[1] if before else "", after or ""
