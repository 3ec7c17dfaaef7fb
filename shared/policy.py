"""Authorization: who may do what in a context, read from the context's own policy (the
`policy` projection, kept by `policy` events: services/transaction/core/policy_change.py).

A grant is (principal, right, session). Rights:
- read: GetStatus, GetFrame, ListFrames, GetEvent, ListContexts shows the context;
- write: AppendEvent, Activate, Deliver, Commit;
- recall: Search, Read, Traverse, InspectIndex of the recall service;
- encode: Compile (which claims the session's inputs) and the snapshot calls;
- reveal: see secrets where a request asks to (`reveal_secrets` on a read or an
  evaluation's scope, and every use of a snapshot whose scope revealed them), for the
  sessions it is granted on (an event: a session that sees it; frames, the shared Mind:
  any); without it such a request is FORBIDDEN, never silently redacted;
- admin: all of the above, plus Audit, RebuildProjections, RebuildIndex, Set/GetPolicy;
- erase: Erase (docs/privacy.md); administrators hold it, and it may be granted alone
  (on the whole context only).
The session is '' for the whole context, or one session id: what an evaluation of that
session may do. Committed Mind state (frames) is shared by every session, so any read
grant reads frames; a session's evidence (events) reads only through that session's
causal scope (shared/mind/visibility.py); a session-bound writer writes as that session
only (its inputs, activations and the transactions its evaluations commit; a message
needs write on both its source and its target session, retire-session/restore-session
on the session named); a transaction committed for no session needs write on the whole
context. The principal `*` stands for every
authenticated principal.

Whoever creates a context becomes its admin. Unrestricted callers (shared/auth.py:
development mode, in-process code, the services' own principal, server-wide admins)
pass every check. Authorization is checked before a context's existence: a caller
without rights gets the same FORBIDDEN for a context that exists and for one that does
not, and a reference it may not see reads as a missing one (SEC-02)."""
from __future__ import annotations

from typing import Optional

from morphz.shared.auth import Caller
from morphz.shared.errors import MorphzError
from morphz.shared.limits import echo
from morphz.shared.mind.view import MindView

READ, WRITE, RECALL, ENCODE, REVEAL, ADMIN = ("read", "write", "recall", "encode", "reveal",
                                              "admin")
# Erase content (docs/privacy.md):
# administrators hold it; granted alone, it is a right on the whole context.
ERASE = "erase"
RIGHTS = (READ, WRITE, RECALL, ENCODE, REVEAL, ADMIN, ERASE)
EVERYONE = "*"
WHOLE = ""  # a grant's session: the whole context


def _grants(view: MindView, caller: Caller) -> set[tuple[str, str]]:
    return view.grants(caller.principal) | view.grants(EVERYONE)


def sessions(view: MindView, caller: Caller, right: str) -> Optional[frozenset[str]]:
    """The sessions `right` is granted for: None for every one (a grant on the whole
    context, admin, or an unrestricted caller); an empty set for none."""
    if caller.unrestricted:
        return None
    grants = _grants(view, caller)
    if (ADMIN, WHOLE) in grants or (right, WHOLE) in grants:
        return None
    return frozenset(s for r, s in grants if r == right)


def allowed(view: MindView, caller: Caller, right: str, session: str = WHOLE) -> bool:
    """Whether `caller` holds `right` on the whole context, or for `session`."""
    granted = sessions(view, caller, right)
    return granted is None or (session != WHOLE and session in granted)


def check(view: MindView, context: str, caller: Caller, right: str,
          session: str = WHOLE) -> None:
    """FORBIDDEN unless `caller` holds `right` on the whole context or for `session`."""
    if not allowed(view, caller, right, session):
        raise forbidden(context, caller, right, session)


def check_any(view: MindView, context: str, caller: Caller, right: str) -> None:
    """FORBIDDEN unless `caller` holds `right` for the context or at least one session."""
    if sessions(view, caller, right) == frozenset():
        raise forbidden(context, caller, right)


# Said with every refusal, whatever the context (so it tells nothing about it): contexts
# made in development mode have no policy, and only a server-wide admin reaches them.
WHAT_TO_DO = ("; ask an admin of the context for a grant (a context made without "
              "authentication has none: a server administrator, `morphz serve --admin`, "
              "grants it with `morphz context policy grant PRINCIPAL admin --context NAME`)")


def forbidden(context: str, caller: Caller, right: str, session: str = WHOLE) -> MorphzError:
    """The one refusal: it names what was asked and what to do, never whether the
    context exists."""
    where = f"context {context}" + (f" as session {session}" if session else "")
    who = echo(caller.principal)  # a certificate's name is not bounded like a token's
    return MorphzError("FORBIDDEN", f"principal {who} may not {right} in {where}{WHAT_TO_DO}",
                       principal=who, context=context, right=right, session=session or None)
