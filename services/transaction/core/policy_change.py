"""Changes of a context's policy (shared/policy.py): checked here, applied by the reducer
from `policy` events, so a change is chained, audited and replayed like any event.

A `policy` event's data: {"op": "grant" | "revoke", "principal", "rights", "session"}.
A `context-created` event made by an authenticated principal names it (data["admin"]):
the creator becomes the context's admin."""
from __future__ import annotations

from morphz.shared import policy
from morphz.shared.auth import check_principal
from morphz.shared.errors import MorphzError
from morphz.shared.mind import records as R
from morphz.shared.mind.state import MindState
from morphz.shared.names import check_name

OPS = ("grant", "revoke")


def check_change(op: str, principal: str, rights: list[str], session: str) -> dict:
    """The event data of a policy change, or CONTEXT_INPUT_INVALID naming the field."""
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
        if policy.ADMIN in wanted:
            raise MorphzError("CONTEXT_INPUT_INVALID", "admin is a right on the whole "
                              "context, not on one session", field="rights")
    return {"op": op, "principal": principal, "rights": wanted, "session": session}


def apply_created(m: MindState, ev: R.Event) -> None:
    if ev.data.get("admin"):
        m.set_grant(ev.data["admin"], policy.ADMIN, policy.WHOLE, True)


def apply_change(m: MindState, ev: R.Event) -> dict:
    d = ev.data
    for right in d["rights"]:
        m.set_grant(d["principal"], right, d["session"], d["op"] == "grant")
    return {"event_ref": R.ref(ev.seq)}


def view(m: MindState, context: str) -> dict:
    """The policy as GetPolicy answers it."""
    return {"context": context, "grants": [
        {"principal": p, "right": r, "session": s} for p, r, s in m.policy()]}
