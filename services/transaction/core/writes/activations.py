"""The `build`s of an evaluation's start and end (TransactionCore.activate, deliver):
an `activation` event opens a causal scope of a session, a `delivery` event closes it."""
from __future__ import annotations

from typing import Callable, Union

from morphz.services.transaction.core import payloads as P
from morphz.services.transaction.core.builds import Proposed
from morphz.services.transaction.core.results import ActivationResult
from morphz.services.transaction.core.writes.writer import Writer
from morphz.shared import policy
from morphz.shared.auth import Caller
from morphz.shared.errors import MorphzError
from morphz.shared.mind import records as R
from morphz.shared.mind.state import MindState


def activate_build(writer: Writer, rules_version: int, context: str, session: str,
                   caller: Caller) -> Callable[[MindState], Proposed]:
    def build(m: MindState) -> Proposed:
        policy.check(m, context, caller, policy.WRITE, session)
        meta = m.require_meta(context)
        return writer.event(m, context, R.ACTIVATION,
                            P.Activation(f"a{meta.activations + 1}", rules_version),
                            session=session, actor="runtime")
    return build


def deliver_build(writer: Writer, context: str, activation: str,
                  caller: Caller) -> Callable[[MindState], Union[Proposed, ActivationResult]]:
    def build(m: MindState) -> Union[Proposed, ActivationResult]:
        policy.check_any(m, context, caller, policy.WRITE)
        m.require_meta(context)
        act = m.activation(activation)
        if act is None or not policy.allowed(m, caller, policy.WRITE, act.session):
            raise MorphzError("ACTIVATION_NOT_FOUND", f"no activation {activation}",
                              activation=activation)
        if act.delivered:  # delivering twice is a retry, not an error
            return ActivationResult.of(act)
        return writer.event(m, context, R.DELIVERY, P.Delivery(activation),
                            session=act.session, actor="runtime")
    return build
