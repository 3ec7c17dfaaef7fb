"""An append's checks and its `build` (TransactionCore.append_event, append_events):
an input, an action of an open activation or a message to another session, routed by
causal.py."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Union

from morphz.services.transaction.core import payloads as P
from morphz.services.transaction.core.builds import Proposed, payload_hash
from morphz.services.transaction.core.causal import Append, check_shape, route
from morphz.services.transaction.core.results import AppendResult
from morphz.services.transaction.core.writes.writer import Writer, replayed
from morphz.shared import policy
from morphz.shared.auth import Caller
from morphz.shared.errors import MorphzError
from morphz.shared.limits import EVENT_TEXT_BYTES, utf8_len
from morphz.shared.mind.receipts import AppendReceipt
from morphz.shared.mind.state import MindState
from morphz.shared.names import check_label, check_name
from morphz.shared.occurred import check_occurred_at

MAX_TEXT_BYTES = EVENT_TEXT_BYTES.max


def append_step(writer: Writer, context: str, session: str, kind: str, text: str, *,
                request_id: str, actor: str, causal_refs: list[str], activation: str,
                target_session: str, secret: bool, occurred_at: str,
                caller: Caller) -> Callable[[MindState], Union[Proposed, AppendResult]]:
    """Checks one append and returns the `build` that applies it."""
    req = Append(session, kind, list(causal_refs), activation, target_session)
    check_shape(req)
    size = utf8_len(text)  # (a 30 MB text is not copied to be measured)
    if size > MAX_TEXT_BYTES:
        raise MorphzError("CONTEXT_INPUT_INVALID", f"text exceeds {MAX_TEXT_BYTES} bytes",
                          field="text", **EVENT_TEXT_BYTES.details(size=size))
    check_label(actor, "actor")
    if request_id:
        check_name(request_id, "request_id")
    occurred = check_occurred_at(occurred_at)
    refs = req.refs
    payload = {"session": session, "kind": kind, "text": text, "actor": actor, "refs": refs}
    # Only when set, so requests made before these fields keep their payload hash.
    payload.update({k: v for k, v in (("activation", activation),
                                      ("target_session", target_session),
                                      ("secret", secret), ("occurred_at", occurred)) if v})

    request_hash = payload_hash(payload) if request_id else ""

    def build(m: MindState) -> Union[Proposed, AppendResult]:
        policy.check_any(m, context, caller, policy.WRITE)
        m.require_meta(context)
        done = replayed(m, request_id, request_hash)
        if done is not None:
            return done
        owner, routed = route(m, req)
        for sid in (owner, target_session):  # a message writes into its target too
            if sid:
                policy.check(m, context, caller, policy.WRITE, sid)
        data = P.Input(routed.activation, routed.target_session, routed.call,
                       request_hash, secret, occurred)  # (dataclasses.replace: 2x the cost)
        return writer.event(m, context, kind, data, session=owner, actor=actor or kind,
                            causal_refs=refs, text=text, request_id=request_id)
    return build


def append_result(done: Union[AppendReceipt, AppendResult], commit_seq: int) -> AppendResult:
    """An append's answer: its receipt's, or a retry's (already an AppendResult)."""
    if isinstance(done, AppendResult):
        return replace(done, commit_seq=commit_seq)
    return AppendResult.of(done, commit_seq=commit_seq)
