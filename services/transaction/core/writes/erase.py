"""An erasure's commits (TransactionCore.erase): a step of ERASE_BATCH events at a time,
each its own `erasure` event (erase_select.py chooses, erasure.py rewrites)."""
from __future__ import annotations

from typing import Union

from morphz.services.transaction.core import erasure, payloads as P
from morphz.services.transaction.core.builds import Proposed
from morphz.services.transaction.core.erase_select import Plan, Selector, plan
from morphz.services.transaction.core.erasure import erasure_result, showing_snapshots
from morphz.services.transaction.core.results import ErasureResult
from morphz.services.transaction.core.writes.writer import Writer
from morphz.shared import policy
from morphz.shared.auth import Caller
from morphz.shared.deadline import Deadline
from morphz.shared.mind import records as R
from morphz.shared.mind.state import MindState


def erase_dry_run(m: MindState, context: str, sel: Selector, caller: Caller,
                  deadline: Deadline) -> ErasureResult:
    """What erasing `sel` would take, nothing changed."""
    policy.check(m, context, caller, policy.ERASE)
    m.require_meta(context)
    found = plan(m, sel, limit=1 << 62, deadline=deadline)
    return erasure_result(context, [found], [], showing_snapshots(m, [found]))


def erase_steps(writer: Writer, context: str, sel: Selector, reason: str, caller: Caller,
                deadline: Deadline, steps: list[tuple[Plan, str]]) -> int:
    """Commit the erasure a step (ERASE_BATCH events) at a time, each step appended to
    `steps` once committed; the last commit's commit_seq."""
    made: list[tuple[Plan, str]] = []  # what the last build took, and its erasure
    commit_seq = 0
    while True:
        made.clear()

        def build(m: MindState) -> Union[Proposed, ErasureResult]:
            policy.check(m, context, caller, policy.ERASE)
            m.require_meta(context)
            step = plan(m, sel, limit=erasure.ERASE_BATCH, deadline=deadline)
            if step.empty:
                return erasure_result(context, [], [], ())
            at = R.ref(m.meta().next_seq)
            what, taken = erasure.rewrite(m, step, at)
            made[:] = [(step, at)]
            return writer.event(m, context, R.ERASURE, P.Erasure(
                reason, tuple(what), tuple(taken), sel.recorded(), len(step.events)),
                actor=caller.principal or "runtime")
        commit_seq = writer.write(context, build, with_seq=True, deadline=deadline)[1] \
            or commit_seq
        if not made:  # nothing (more) to take
            return commit_seq
        steps.append(made[0])
        if not made[0][0].more:
            return commit_seq
