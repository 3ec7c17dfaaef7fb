"""What a context is now (TransactionCore.status) and the structural checks a server runs
at start (startup_check), each over one open read view."""
from __future__ import annotations

from datetime import datetime
from typing import Callable, Optional

from morphz.services.transaction.core import policy_change, retention
from morphz.services.transaction.core.ownership import Ownership
from morphz.services.transaction.core.results import (
    PolicyResult, RetentionState, SessionStatus, StatusResult)
from morphz.shared import policy
from morphz.shared.auth import Caller
from morphz.shared.mind import records as R
from morphz.shared.mind.state import MindState


def status(m: MindState, context: str, commit_seq: int, shard: str, owners: Ownership,
           schedule: retention.Schedule, clock: Callable[[], datetime],
           caller: Caller) -> StatusResult:
    """`owners`: who owns the context (Ownership.describe); `schedule`: when the
    retention timer applies its policy next."""
    policy.check_any(m, context, caller, policy.READ)
    readable = policy.sessions(m, caller, policy.READ)
    meta = m.require_meta(context)
    by_state = {R.ACTIVE: 0, R.RETIRING: 0, R.RETIRED: 0}
    for state in m.frame_states():
        by_state[state] += 1
    sessions = tuple(SessionStatus(s.id, s.state, s.level, m.pending_count(s),
                                   m.waiting_count(s), len(m.open_calls(s.id)))
                     for s in m.sessions() if readable is None or s.id in readable)
    return StatusResult(context, meta.revision, meta.tick, meta.window, by_state,
                        sessions, meta.next_seq, commit_seq, shard, **owners.describe(context),
                        retention=policy_change.retention_view(m, schedule, clock()))


def readable(m: MindState, caller: Caller) -> bool:
    """Whether the context exists and `caller` may read some of it (list_contexts)."""
    return m.meta() is not None and policy.sessions(m, caller, policy.READ) != frozenset()


def startup_problem(m: MindState, context: str) -> Optional[str]:
    """The event sequence must end where the context's meta says (None: it does)."""
    meta = m.meta()
    if meta is None:
        return None  # a context holding only records outside the Mind
    last = m.last_event_seq()
    if (last + 1 if last is not None else 0) != meta.next_seq:
        return f"{context}: events end at {last}, meta expects next {meta.next_seq}"
    return None


def policy_view(m: MindState, context: str, schedule: retention.Schedule,
                clock: Callable[[], datetime], caller: Caller) -> PolicyResult:
    """The context's policy, as its administrators see it (get_policy)."""
    policy.check(m, context, caller, policy.ADMIN)
    m.require_meta(context)
    return policy_change.view(m, context, "", schedule, clock())


def retention_state(m: MindState, context: str, schedule: retention.Schedule,
                    clock: Callable[[], datetime], caller: Caller) -> RetentionState:
    """The context's retention policy, as those who may apply it see it."""
    policy.check(m, context, caller, policy.ERASE)
    m.require_meta(context)
    return RetentionState(context, policy_change.retention_view(m, schedule, clock()))
