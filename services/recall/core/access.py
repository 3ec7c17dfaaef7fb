"""Who may recall what, decided once per call on the view the call reads (or, for a call
that must wait first, on a view of its own before it waits: RecallCore.search).

`recall` on the whole context, or for the session of the evaluation a recall is made for:
a session-bound principal recalls only for its evaluations, so only what that causal scope
sees. The caller's grants are read once; a caller with no recall grant at all is refused
before anything is told of the evaluation's activation (shared/policy.py: SEC-02)."""
from __future__ import annotations

from typing import Optional

from morphz.services.recall.core.request import Evaluation
from morphz.shared import policy
from morphz.shared.auth import Caller
from morphz.shared.errors import MorphzError
from morphz.shared.mind.view import MindView
from morphz.shared.mind.visibility import Viewer


def admit(m: MindView, context: str, caller: Caller,
          evaluation: Optional[Evaluation]) -> None:
    """FORBIDDEN unless `caller` may recall for the evaluation's session (its names
    checked: request.check_evaluation), or on the whole context when none is named;
    RECALL_ACTIVATION_INVALID unless the activation is one of its session's, undelivered."""
    granted = policy.sessions(m, caller, policy.RECALL)  # None: every session
    session = policy.WHOLE
    if evaluation:
        if granted == frozenset():  # no recall grant at all: told nothing more
            raise policy.forbidden(context, caller, policy.RECALL)
        _check_activation(m, evaluation)
        session = evaluation.session
    if not (granted is None or (session != policy.WHOLE and session in granted)):
        raise policy.forbidden(context, caller, policy.RECALL, session)


def _check_activation(m: MindView, evaluation: Evaluation) -> None:
    session, activation = evaluation.session, evaluation.activation
    act = m.activation(activation)
    if act is None or act.session != session:
        raise MorphzError("RECALL_ACTIVATION_INVALID",
                          f"no activation {activation} in session {session}",
                          session=session, activation=activation)
    if act.delivered:
        raise MorphzError("RECALL_ACTIVATION_INVALID",
                          f"activation {activation} was already delivered",
                          activation=activation)


def viewer(m: MindView, evaluation: Optional[Evaluation]) -> Optional[Viewer]:
    """The evaluating session's view; None for an operator's read (sees everything)."""
    return Viewer(m, evaluation.session) if evaluation else None
