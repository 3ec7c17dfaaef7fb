"""The job caps over real gRPC (SEC-07; shared/jobs.py, limits.JOBS and PRINCIPAL_JOBS):
a principal at its cap of queued or running jobs is refused RESOURCE_EXHAUSTED
PRINCIPAL_JOB_LIMIT while another principal still starts jobs; once the server holds
its cap every principal is refused JOB_LIMIT, and the cheap calls are still served; a
cancelled job gives its place back. A real `morphz serve` process with bearer tokens.

The jobs stay queued or running for the length of the test without sleeps or timing:
the server runs one expensive call at a time (--max-expensive-rpcs 1, and so --max-principal-rpcs 1), so the first
job holds the only slot while the others wait queued behind it, and the first is an
audit of a context large enough, paced to 1% of a core while the other principals'
calls are served, that it is still running when the caps are looked at (checked, not
assumed). The job cancelled to give a place back is a queued one: a running audit may
end by itself just before a cancel reaches it."""
from __future__ import annotations

import json

import grpc
import pytest

from morphz.api.common.v1 import common_pb2
from morphz.api.transaction.v1 import transaction_pb2_grpc as tpb_grpc
from morphz.services.transaction.client import TransactionClient
from morphz.shared import limits
from morphz.shared.grpc.auth import ClientAuth
from morphz.shared.grpc.errors import from_rpc_error
from tests.integration.test_jobs import fill, polled
from tests.topology import ServerProcess

TOKENS = {"alice": "alice-token-3f9c1d0b7e2a", "bob": "bob-token-8a2e4c6d1f03",
          "carol": "carol-token-5d7b9e1a3c60"}
ARGS = ["--expensive-share", "0.01", "--max-expensive-rpcs", "1", "--max-principal-rpcs", "1"]
ACTIVE = ("queued", "running")


@pytest.fixture(scope="module")
def capped(tmp_path_factory):
    """A server with tokens for alice, bob and carol; alice's context "alice-big" (600
    events of 32 KiB) and a small context of each principal's own."""
    tmp = tmp_path_factory.mktemp("job-caps")
    tokens = tmp / "tokens.json"
    tokens.write_text(json.dumps({token: name for name, token in TOKENS.items()}))
    server = ServerProcess(tmp / "data", args=["--tokens", str(tokens), *ARGS]).start()
    channels = {name: ClientAuth(token=token).channel(server.address)
                for name, token in TOKENS.items()}
    clients = {name: TransactionClient(ch, timeout=120) for name, ch in channels.items()}
    fill(clients["alice"], "alice-big", 600)
    for name, client in clients.items():
        fill(client, name, 3)
    yield server, clients, channels
    for ch in channels.values():
        ch.close()
    server.kill()


def start_refused(channel: grpc.Channel, context: str) -> tuple[grpc.StatusCode, object]:
    """StartJob(audit) on the raw stub: the status code and the structured error of its
    refusal (the test fails if it is accepted)."""
    stub = tpb_grpc.TransactionServiceStub(channel)
    with pytest.raises(grpc.RpcError) as e:
        stub.StartJob(common_pb2.StartJobRequest(context=context, kind="audit"), timeout=60)
    return e.value.code(), from_rpc_error(e.value)


def test_sec_07_a_principal_at_its_job_cap_is_refused_while_others_start_and_are_served(capped):
    server, c, ch = capped
    # alice: the first job takes the one expensive slot; the second waits queued.
    first = c["alice"].start_job("alice-big", "audit")
    second = c["alice"].start_job("alice", "audit")
    assert first["state"] in ACTIVE and second["state"] in ACTIVE, (first, second)
    code, err = start_refused(ch["alice"], "alice")
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, (code, err)
    assert err.reason == limits.PRINCIPAL_JOBS.reason == "PRINCIPAL_JOB_LIMIT", err
    assert err.details["limit"] == limits.PRINCIPAL_JOBS.name
    assert err.details["max"] == limits.PRINCIPAL_JOBS.max == 2
    assert err.details["principal"] == "alice", err.details

    # bob is not held back by alice's cap: his jobs are taken (queued behind hers)...
    bobs = [c["bob"].start_job("bob", "audit") for _ in range(2)]
    assert all(j["state"] in ACTIVE for j in bobs), bobs
    # ...while alice is still at hers (her first job did not end meanwhile).
    assert start_refused(ch["alice"], "alice")[1].reason == "PRINCIPAL_JOB_LIMIT"

    # Four jobs held: the server's cap. carol, who holds none, is refused by that one.
    code, err = start_refused(ch["carol"], "carol")
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, (code, err)
    assert err.reason == limits.JOBS.reason == "JOB_LIMIT", err
    assert err.details["limit"] == limits.JOBS.name and err.details["max"] == limits.JOBS.max == 4
    # Yet carol's cheap calls are served: her context's status, an append, a read.
    before = c["carol"].status("carol")
    appended = c["carol"].append_event("carol", "s", "user-message", "still served")
    assert c["carol"].status("carol")["revision"] == before["revision"]
    assert c["carol"].get_event("carol", appended["ref"])["text"] == "still served"

    # The jobs behind the slot wait queued. The running audit held the slot through the
    # refusals above (carol's JOB_LIMIT counted four jobs held), and may have ended by
    # itself since: at load average 30 it did, in the PostgreSQL pass of CI.
    held = [c["alice"].get_job(first["id"]), c["alice"].get_job(second["id"]),
            *(c["bob"].get_job(j["id"]) for j in bobs)]
    states = [j["state"] for j in held]
    if states[0] == "running":  # the usual case: nothing behind it has moved
        assert states[1:] == ["queued", "queued", "queued"], held
    else:  # it ended, and the one slot passed on: still one job running at most
        assert states[0] == "succeeded" and states[1:].count("running") <= 1, held

    # A cancelled job gives its place back. One cancelled while queued (its reply says
    # so) ends cancelled whatever the running one does meanwhile; the running audit may
    # end by itself between the look above and a cancel (it did, under load), so it is
    # not the one relied on.
    queued = (("alice", second), ("bob", bobs[0]), ("bob", bobs[1]))
    cancelled = next(((who, job) for who, job in queued
                      if c[who].cancel_job(job["id"])["state"] == "queued"), None)
    assert cancelled, "every queued job had started before it was cancelled"
    who, job = cancelled
    assert polled(c[who], job["id"], lambda j: j["state"] not in ACTIVE)["state"] \
        == "cancelled"
    # carol's job is taken now, and runs once the others are gone.
    mine = c["carol"].start_job("carol", "audit")
    assert mine["state"] in ACTIVE, mine
    for who, job in (("alice", first), *queued):
        c[who].cancel_job(job["id"])
    done = polled(c["carol"], mine["id"], lambda j: j["state"] not in ACTIVE)
    assert done["state"] == "succeeded" and done["result"]["match"] is True, done
