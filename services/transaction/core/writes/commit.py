"""A transaction's `build` (TransactionCore.commit): authorized for the session it is
committed for, read at its activation's tick or its own `(base-tick T)`, rebased onto
the Mind's revision (boundaries.py), and proposed as a `context-tx` event."""
from __future__ import annotations

from typing import Callable, Optional, Union

from opentelemetry import trace

from morphz.services.transaction.core import payloads as P
from morphz.services.transaction.core.boundaries import check_base
from morphz.services.transaction.core.builds import Proposed, payload_hash
from morphz.services.transaction.core.results import CommitResult
from morphz.services.transaction.core.txlang import Tx, parse_text
from morphz.services.transaction.core.writes.writer import Writer, replayed
from morphz.shared import policy
from morphz.shared.auth import Caller
from morphz.shared.errors import MorphzError
from morphz.shared.mind import records as R
from morphz.shared.mind.state import MindState


def parse(tx: Union[str, Tx], tracer: trace.Tracer) -> Tx:
    """A transaction's text parsed (a Tx as given), traced with its size."""
    with tracer.start_as_current_span("tx.parse") as span:
        parsed = parse_text(tx) if isinstance(tx, str) else tx
        if isinstance(tx, str):
            span.set_attribute("morphz.tx.chars", len(tx))
        span.set_attribute("morphz.tx.ops", len(parsed.ops))
    return parsed


def request_hash(session: str, tx_data: dict, activation: str, request_id: str) -> str:
    """The payload hash a retry of this commit is compared with ("" without a request
    id: only a retry is ever compared with it)."""
    if not request_id:
        return ""
    payload = {"session": session, "tx": tx_data}
    if activation:  # absent otherwise: earlier payload hashes stay valid
        payload["activation"] = activation
    return payload_hash(payload)


def commit_build(writer: Writer, tracer: trace.Tracer, rules_version: int, context: str,
                 parsed: Tx, tx_data: dict, session: str, request_id: str, activation: str,
                 caller: Caller) -> Callable[[MindState], Union[Proposed, CommitResult]]:
    """The `build` that commits `parsed` (its stored form `tx_data`)."""
    hashed = request_hash(session, tx_data, activation, request_id)

    def build(m: MindState) -> Union[Proposed, CommitResult]:
        policy.check_any(m, context, caller, policy.WRITE)
        meta = m.require_meta(context)
        done = replayed(m, request_id, hashed)
        if done is not None:
            return done
        act = m.activation(activation) if activation else None
        if act is not None and not policy.allowed(m, caller, policy.WRITE, act.session):
            act = None  # another session's activation reads as a missing one
        evaluating, read_tick = read_point(m, parsed, session, activation, meta.tick, act)
        # For a session, its writers; for no session (the shared Mind), the context's;
        # retiring or restoring a session is a write to that session too.
        policy.check(m, context, caller, policy.WRITE, evaluating)
        for op in parsed.ops:
            if op.op in ("retire-session", "restore-session"):
                policy.check(m, context, caller, policy.WRITE, op.name)
        with tracer.start_as_current_span("tx.rebase") as span:
            span.set_attribute("morphz.revision", meta.revision)
            rebased = check_base(m, parsed, meta.revision, session=evaluating,
                                 read_tick=read_tick)
            # Once accepted: an unchecked base-version may not fit an attribute's int64.
            span.set_attribute("morphz.tx.base_version", parsed.base_version)
            span.set_attribute("morphz.tx.rebased", rebased)
        data = P.Commit(parsed, rules_version, activation, hashed,
                        parsed.base_version if rebased else None)
        return writer.event(m, context, R.CONTEXT_TX, data, data.to_data(tx_data),
                            session=evaluating, actor="agent", text=parsed.render(),
                            request_id=request_id)
    return build


def read_point(m: MindState, tx: Tx, session: str, activation: str, tick: int,
               act: Optional[R.Activation]) -> tuple[str, Optional[int]]:
    """(the session a commit is made for, the tick it read at): from the activation it
    names, the session it names and the transaction's own `(base-tick T)`."""
    read_tick = tx.base_tick
    if read_tick is not None and read_tick > tick:
        raise MorphzError("BASE_TICK_AHEAD", f"base-tick {read_tick} is ahead of the "
                          f"cognitive tick {tick}", base_tick=read_tick, tick=tick)
    if activation:
        if act is None:
            raise MorphzError("ACTIVATION_NOT_FOUND", f"no activation {activation}",
                              activation=activation)
        if session and act.session != session:
            raise MorphzError("CAUSAL_SCOPE_VIOLATION", f"activation {activation} is a causal "
                              f"scope of session {act.session}, not of {session}",
                              activation=activation, session=session)
        session = act.session
        if read_tick is None:
            read_tick = act.tick
    if session:
        s = m.session(session)
        if s is None:
            raise MorphzError("SESSION_NOT_FOUND", f"no session {session}", session=session)
        restoring = any(o.op == "restore-session" and o.name == session for o in tx.ops)
        if s.state == R.RETIRED and not restoring:
            raise MorphzError("SESSION_RETIRED", f"session {session} is retired: its "
                              "evaluations can no longer commit", session=session)
    return session, read_tick
