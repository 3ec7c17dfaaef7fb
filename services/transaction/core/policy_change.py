"""Changes of a context's policy (shared/policy.py): checked here, applied by the reducer
from `policy` events, so a change is chained, audited and replayed like any event.

A `policy` event's payload: payloads.Policy (op grant | revoke, principal, rights, session;
or op retention and the context's retention policy: core/retention.py). A
`context-created` event made by an authenticated principal names it (data["admin"]):
the creator becomes the context's admin."""
from __future__ import annotations

from datetime import datetime
from typing import Optional

from morphz.shared import policy
from morphz.shared.auth import check_principal
from morphz.shared.errors import MorphzError
from morphz.shared.mind import records as R
from morphz.shared.mind.state import MindState
from morphz.shared.names import check_name
from morphz.services.transaction.core import retention
from morphz.services.transaction.core.payloads import RETENTION_OP, Created, Policy
from morphz.services.transaction.core.results import Grant, PolicyResult, RetentionView

OPS = ("grant", "revoke", RETENTION_OP)


def check_change(op: str, principal: str, rights: list[str], session: str,
                 retention_text: str = "") -> Policy:
    """The event payload of a policy change, or CONTEXT_INPUT_INVALID naming the field.
    Op retention: `retention_text` the policy, or `none` (no principal, right, session)."""
    if op not in OPS:
        raise MorphzError("CONTEXT_INPUT_INVALID", "op must be grant, revoke or retention",
                          field="op")
    if op == RETENTION_OP:
        if principal or rights or session:
            raise MorphzError("CONTEXT_INPUT_INVALID", "a retention policy names no "
                              "principal, right or session", field="principal")
        return Policy(op, "", (), "", retention.Retention.parse(retention_text))
    if retention_text:
        raise MorphzError("CONTEXT_INPUT_INVALID", f"op {op} takes no retention policy",
                          field="retention")
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
    if change.op == RETENTION_OP:
        m.set_policy_row(retention.ROW, None if change.retention is None else
                         retention.row_value(change.retention, R.ref(ev.seq)))
        return
    for right in change.rights:
        m.set_grant(change.principal, right, change.session, change.op == "grant")


def view(m: MindState, context: str, event_ref: str = "",
         schedule: retention.Schedule = retention.ON_DEMAND,
         now: Optional[datetime] = None) -> PolicyResult:
    """The policy as GetPolicy answers it (`event_ref`: the change just recorded)."""
    return PolicyResult(context, tuple(Grant(p, r, s) for p, r, s in m.policy()),
                        event_ref, retention_view(m, schedule, now))


def retention_view(m: MindState, schedule: retention.Schedule,
                   now: Optional[datetime]) -> Optional[RetentionView]:
    """The context's retention policy, and when the timer next applies it (None: none)."""
    kept = retention.from_row(m.policy_row(retention.ROW))
    if kept is None:
        return None
    policy, set_at = kept
    due = schedule.next_after(now) if now is not None else None
    return RetentionView(policy.text(), policy.kinds, policy.days, set_at,
                         due.isoformat() if due else "", int(schedule.every))
