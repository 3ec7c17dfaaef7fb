"""The budgets of expensive calls (shared/admission.py, SEC-07): concurrency and
CPU-seconds, per principal and server-wide, with clocks the test moves."""
from __future__ import annotations

import pytest

from morphz.shared import limits
from morphz.shared.admission import WINDOW_SECONDS, Admission, Budgets
from morphz.shared.errors import MorphzError


class Clocks:
    def __init__(self) -> None:
        self.now, self.cpu = 0.0, 0.0


@pytest.fixture
def clocks():
    return Clocks()


def admission(clocks, **budgets) -> Admission:
    return Admission(Budgets(**budgets), clock=lambda: clocks.now, cpu_clock=lambda: clocks.cpu)


def refused(limit: limits.Limit, fn, *args) -> MorphzError:
    with pytest.raises(MorphzError) as e:
        fn(*args)
    assert e.value.reason == limit.reason
    assert e.value.status.value == "RESOURCE_EXHAUSTED"
    assert e.value.details["limit"] == limit.name
    return e.value


def test_sec_07_a_principal_at_its_concurrency_leaves_the_others_theirs(clocks):
    a = admission(clocks, expensive_rpcs=3, principal_rpcs=2)
    held = [a.admit("alice"), a.admit("alice")]
    err = refused(limits.PRINCIPAL_RPCS, a.admit, "alice")
    assert err.details["principal"] == "alice" and err.details["max"] == 2
    bob = a.admit("bob")  # alice's limit is hers: bob is admitted
    refused(limits.EXPENSIVE_RPCS, a.admit, "carol")  # the server's: 3 running
    with held[0]:
        pass
    with a.admit("carol"), bob, held[1]:
        assert a.running() == 3
    assert a.running() == 0 and a.running("alice") == 0


def test_sec_07_unauthenticated_callers_meet_the_server_wide_budgets_only(clocks):
    a = admission(clocks, expensive_rpcs=3, principal_rpcs=1)
    held = [a.admit(None) for _ in range(3)]
    refused(limits.EXPENSIVE_RPCS, a.admit, None)
    for t in held:
        with t:
            pass


def test_sec_07_cpu_seconds_are_charged_and_refilled(clocks):
    a = admission(clocks, principal_cpu_seconds=6, expensive_cpu_seconds=10)
    with a.admit("alice"):
        clocks.cpu += 7  # overdraws: a call is charged after it ran
    err = refused(limits.PRINCIPAL_CPU, a.admit, "alice")
    # 1 s overdrawn at 6 CPU-s per minute: back in 10 s
    assert err.details["retry_after_seconds"] == pytest.approx(WINDOW_SECONDS / 6, abs=0.01)
    with a.admit("bob"):  # bob's budget is his own
        clocks.cpu += 4
    refused(limits.EXPENSIVE_CPU, a.admit, "carol")  # 11 of the server's 10 used
    clocks.now += 10.0  # the server's bucket refills 10 per minute: +1.67
    with a.admit("carol"):
        pass
    clocks.now += 0.5
    with a.admit("alice"):  # 10.5 s: hers is positive again
        pass


def test_sec_07_budgets_keep_workers_for_cheap_calls():
    Budgets(expensive_rpcs=15, principal_rpcs=2).check(16)
    for bad in (Budgets(expensive_rpcs=16), Budgets(expensive_rpcs=4, principal_rpcs=5),
                Budgets(principal_cpu_seconds=0)):
        with pytest.raises(MorphzError) as e:
            bad.check(16)
        assert e.value.reason == "CONTEXT_INPUT_INVALID"


def test_sec_07_expensive_calls_pause_to_their_share_while_cheap_calls_are_served(clocks):
    pauses: list[float] = []
    a = Admission(Budgets(expensive_share=0.25), clock=lambda: clocks.now,
                  cpu_clock=lambda: clocks.cpu, sleep=pauses.append)
    with a.admit("alice", "alice") as ticket:
        clocks.cpu += 0.5
        ticket.pace()
        assert pauses == []  # no cheap call: full speed
        a.cheap_started("alice")
        clocks.cpu += 0.5
        ticket.pace()
        assert pauses == []  # its own caller's cheap calls do not pace it
        a.cheap_ended("alice")
        a.cheap_started("bob")
        clocks.cpu += 0.3
        ticket.pace(remaining=10.0)
        # 0.3 s of CPU less the 0.05 s burst, at a quarter of a core: 1 s (the most at once)
        assert pauses == [pytest.approx(1.0)]
        clocks.now += 1.0  # the pause refilled the share to 0
        clocks.cpu += 0.3
        ticket.pace(remaining=0.2)
        assert pauses[-1] == pytest.approx(0.2)  # never past the deadline
        a.cheap_ended("bob")
        clocks.now += 5.0  # the last cheap call is long over: full speed again
        clocks.cpu += 1.0
        ticket.pace()
        assert len(pauses) == 2
    assert a._cheap == {}  # callers long gone are forgotten
