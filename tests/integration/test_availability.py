"""Availability under abuse (issue 40): work stops at its call's deadline (SEC-07),
expensive calls draw on budgets so that no principal starves the others (SEC-07), and the
memory held for replies is bounded by configuration (SEC-08). Each test runs a real
`morphz serve` process over loopback and reads its CPU time from /proc."""
from __future__ import annotations

import os
import threading
import time

import grpc
import pytest

from morphz.api.transaction.v1 import transaction_pb2 as tpb
from morphz.api.transaction.v1 import transaction_pb2_grpc as tpb_grpc
from tests import wire
from tests.polling import until
from tests.topology import ServerProcess

MiB = 1 << 20
BIG_EVENT = 31 * MiB   # the reproduction: events of 31 MiB
BIG_EVENTS = 12        # enough that 8 audits run seconds of CPU past a 1 s deadline
AUDITS = 8
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def settled_cpu(pid: int, bound: float = 120.0) -> float:
    """The process's CPU time once it has gone quiet: less than 50 ms of CPU over half a
    second (the condition that its work has stopped), failing after `bound` seconds."""
    out = []

    def quiet() -> bool:
        before = cpu_seconds(pid)
        time.sleep(0.5)
        out.append(cpu_seconds(pid))
        return out[-1] - before < 0.05
    until(quiet, bound, "the server never went quiet")
    return out[-1]


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """A server holding context "big": BIG_EVENTS events of 31 MiB each."""
    server = ServerProcess(tmp_path_factory.mktemp("big") / "data").start()
    ch = grpc.insecure_channel(server.address, options=wire.BIG_MESSAGES)
    stub = tpb_grpc.TransactionServiceStub(ch)
    stub.CreateContext(tpb.CreateContextRequest(context="big"), timeout=30)
    stub.CreateContext(tpb.CreateContextRequest(context="small"), timeout=30)
    text = "x" * BIG_EVENT
    for i in range(BIG_EVENTS):
        stub.AppendEvent(tpb.AppendEventRequest(context="big", session="s", kind="user-message",
                                                text=text, request_id=f"r{i}"), timeout=120)
    yield server, stub
    ch.close()
    server.kill()


def test_sec_07_audits_past_their_deadline_stop_within_a_second(big):
    """8 Audit calls with a 1 s deadline on a context of 31 MiB events all answer
    DEADLINE_EXCEEDED, and the server stops working on them within a second of the
    deadline (before the fix it went on for seconds of CPU, finishing each)."""
    server, stub = big
    settled_cpu(server.proc.pid)
    codes: list = []

    def audit() -> None:
        try:
            stub.Audit(tpb.AuditRequest(context="big"), timeout=1.0)
            codes.append(grpc.StatusCode.OK)
        except grpc.RpcError as e:
            codes.append(e.code())
    threads = [threading.Thread(target=audit) for _ in range(AUDITS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert codes == [grpc.StatusCode.DEADLINE_EXCEEDED] * AUDITS
    grace_end = time.monotonic() + 1.0  # the bound: stopped within 1 s
    until(lambda: time.monotonic() >= grace_end, 5)
    after_grace = cpu_seconds(server.proc.pid)
    spent = settled_cpu(server.proc.pid) - after_grace
    assert spent < 1.0, f"the audits went on for {spent:.1f} s of CPU past their deadline"
    # The server is not left half-way: a full audit still matches.
    assert stub.Audit(tpb.AuditRequest(context="small"), timeout=60).match
