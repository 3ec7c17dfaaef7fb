"""Changes of a context's policy (shared/policy.py): checked here, applied by the reducer
from `policy` events, so a change is chained, audited and replayed like any event.

A `policy` event's payload: payloads.Policy (op grant | revoke, principal, rights, session).
A `context-created` event made by an authenticated principal names it (data["admin"]):
the creator becomes the context's admin."""
from __future__ import annotations

from morphz.shared import policy
from morphz.shared.auth import check_principal
from morphz.shared.errors import MorphzError
from morphz.shared.mind import records as R
from morphz.shared.mind.state import MindState
from morphz.shared.names import check_name
from morphz.services.transaction.core.payloads import Created, Policy
from morphz.services.transaction.core.results import Grant, PolicyResult

OPS = ("grant", "revoke")


def check_change(op: str, principal: str, rights: list[str], session: str) -> Policy:
    """The event payload of a policy change, or CONTEXT_INPUT_INVALID naming the field."""
    if op not in OPS:
        raise MorphzError("CONTEXT_INPUT_INVALID", "op must be grant or revoke", field="op")
    if principal != policy.EVERYONE:
        check_principal(principal)
    wanted = sorted(set(rights))
    if not wanted or any(r not in policy.RIGHTS for r in wanted):
        raise MorphzError("CONTEXT_INPUT_INVALID", "rights must be among "
                          f"{', '.join(policy.RIGHTS)}", field="rights")
    if session:
        check_name(session, "session")
        for right in (policy.ADMIN, policy.ERASE):
            if right in wanted:
                raise MorphzError("CONTEXT_INPUT_INVALID", f"{right} is a right on the "
                                  "whole context, not on one session", field="rights")
    return Policy(op, principal, tuple(wanted), session)


def apply_created(m: MindState, created: Created) -> None:
    if created.admin:
        m.set_grant(created.admin, policy.ADMIN, policy.WHOLE, True)


def apply_change(m: MindState, ev: R.Event, change: Policy) -> None:
    for right in change.rights:
        m.set_grant(change.principal, right, change.session, change.op == "grant")


def view(m: MindState, context: str, event_ref: str = "") -> PolicyResult:
    """The policy as GetPolicy answers it (`event_ref`: the change just recorded)."""
    return PolicyResult(context, tuple(Grant(p, r, s) for p, r, s in m.policy()), event_ref)
