"""A scripted agent loop in the manner of seed 002 (the release story), for the tests of
ListSnapshots, the evaluation view and the inspector's evaluation pages: 20 evaluations
alternating between two sessions, `release` (odd steps) and `support` (even steps).

Each step appends its inputs, compiles (claiming them: a new activation and snapshot),
sometimes asks recall for the evaluation (search, or a frame traversal), sometimes issues
an action and gets its tool result back, commits one context-tx under its activation
(with a request id, so its receipt is kept) and delivers. Step 5 is seed 002's: the test
report digested into test-result, release revised to packaging, the relation, the report
retired. Step 4 appends a secret tool result; step 7's input is a long log, shown as a
preview. Every step records what the server answered, for the tests to compare with."""
from __future__ import annotations

from dataclasses import dataclass, field

from morphz.client import Client, Evaluation

SESSIONS = ("release", "support")
STEPS = 20
SECRET = "sk-live-PLANTED-evals-5f3a90"
CHINESE = "回归测试：120 通过，0 失败"  # the test report of step 5's input
CUSTOMER_ASK = "客户询问版本何时发布"  # a frame's body, in Chinese (step 2)
BIG_LOG = "packaging log: " + "artifact ok; " * 600  # over the 4 KiB preview threshold


@dataclass
class Step:
    number: int              # 1..20
    session: str
    activation: str
    snapshot: str
    hash: str
    revision_seen: int       # the Mind revision the encoding showed
    regions: dict[str, str]  # region name -> its text, from the compile's reply
    inputs: list[str]        # what this step appended
    claimed: list[str]       # what its activation claimed (its inputs, and the recall
    #                          observations its session's step before recorded)
    recalls: list[str] = field(default_factory=list)    # the recall observations
    actions: list[str] = field(default_factory=list)
    results: list[str] = field(default_factory=list)
    tx_ref: str = ""
    revision: int = 0        # the Mind revision its transaction made


def _inputs(mz: Client, context: str, n: int, session: str) -> list[str]:
    def add(kind: str, text: str, **kw) -> str:
        return mz.append_event(context, session=session, kind=kind, text=text, **kw).ref
    if n == 1:
        return [add("user-message", "Ship v1 once the regression tests pass. 测试通过后发布。")]
    if n == 2:
        return [add("user-message", "Customer asks when v1 ships.")]
    if n == 4:
        return [add("tool-result", f"deploy token {SECRET}", secret=True, actor="vault")]
    if n == 5:
        return [add("tool-result", CHINESE, actor="npm test")]
    if n == 7:
        return [add("tool-result", BIG_LOG, actor="ci")]
    return [add("user-message", f"step {n}: continue ({session})")]


def _tx(n: int, session: str, seen: int, refs: list[str]) -> tuple[str, str]:
    """(the context-tx text, its reason) of step n, based on the revision seen."""
    notes = f"notes-{session}"
    if n == 1:
        return (f"(context-tx (base-version {seen}) (create release (goal ship-v1) "
                "(stage waiting-tests)))", "")
    if n == 2:
        return (f"(context-tx (base-version {seen}) (create {notes} (step 2)) "
                f'(create customer-ask (问题 "{CUSTOMER_ASK}")))', "")
    if n == 3:
        return f"(context-tx (base-version {seen}) (create {notes} (step 3)))", ""
    if n == 5:
        return (f'(context-tx (base-version {seen}) (reason "测试结果已吸收，继续准备发布") '
                f"(derive test-result (from {refs[0]}) (tests passed)) "
                "(revise release (goal ship-v1) (stage packaging)) "
                f"(relate test-result supports release) (retire {refs[0]}))",
                "测试结果已吸收，继续准备发布")
    return f"(context-tx (base-version {seen}) (revise {notes} (step {n})))", ""


def run(mz: Client, context: str, steps: int = STEPS) -> list[Step]:
    mz.create_context(context)
    out = []
    for n in range(1, steps + 1):
        session = SESSIONS[(n - 1) % 2]
        refs = _inputs(mz, context, n, session)
        enc = mz.compile(context, session=session)
        regions = {r.name: enc.text[r.start:r.end] for r in enc.regions}
        step = Step(n, session, enc.activation, enc.snapshot, enc.hash, enc.revision,
                    regions, refs, list(enc.claimed))
        ev = Evaluation(session, enc.activation)
        if n % 3 == 0:
            step.recalls.append(mz.search(context, "release", evaluation=ev,
                                          min_commit_seq=0).observation_ref)
        if n == 5:
            step.recalls.append(mz.traverse(context, "release", depth=1,
                                            evaluation=ev).observation_ref)
        if n % 4 == 1:
            action = mz.record_action(context, session=session, activation=enc.activation,
                                      text=f"run: npm run build (step {n})")
            step.actions.append(action.ref)
            step.results.append(mz.tool_result(context, call=action.ref,
                                               text=f"build {n} ok").ref)
        text, _ = _tx(n, session, enc.revision, refs)
        receipt = mz.commit(context, text, session=session, activation=enc.activation,
                            request_id=f"{context}-step-{n}")
        step.tx_ref, step.revision = receipt.event_ref, receipt.revision
        mz.deliver(context, enc.activation)
        out.append(step)
    return out
