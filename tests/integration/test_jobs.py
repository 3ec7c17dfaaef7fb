"""Server-side jobs (SEC-07, shared/jobs.py): an audit or a rebuild started as a job answers
at once with an id; the job's progress rises while it runs; a cancelled job stops at its
next check, ends `cancelled`, uses no more CPU and leaves nothing half-done; a job is
invisible to principals who may not run its operation; the caps refuse with named reasons.
Each test runs a real `morphz serve` process over loopback (CPU time from /proc).

The running jobs are kept slow by the server's own pacing, not by sleeps: a job draws on
the expensive calls' budgets, and while other callers' cheap calls are served (the
test's polls, over a connection of their own: a caller's own calls do not pace its job)
it may use only --expensive-share of a core (here 2%)."""
from __future__ import annotations

import asyncio
import json

import grpc
import pytest

from morphz.client import AsyncClient, Client, Credentials
from morphz.services.recall.client import RecallClient
from morphz.services.storage.client import StorageClient
from morphz.shared.storage.api import Write
from morphz.services.transaction.client import TransactionClient
from morphz.shared.errors import MorphzError
from morphz.shared.grpc.auth import ClientAuth
from tests import wire
from tests.integration.test_availability import cpu_seconds, settled_cpu
from tests.integration.test_cli import assert_error, run_cli, run_json
from tests.polling import until
from tests.topology import ServerProcess

EVENTS, EVENT_BYTES, BATCH = 1200, 32 << 10, 100
SLOW = ["--expensive-share", "0.02", "--storage-listen", "127.0.0.1:0"]
TOKENS = {"alice": "alice-token-5b0d0c1e9a7f", "bob": "bob-token-7c41e0d2b9a8",
          "carol": "carol-token-0e6d2a9b4c17"}


def fill(client: TransactionClient, context: str, events: int = EVENTS) -> None:
    client.create_context(context)
    text = "x" * EVENT_BYTES
    for start in range(0, events, BATCH):
        client.append_events(context, [dict(session="s", kind="user-message",
                                             text=f"{i} {text}", request_id=f"r{i}")
                                        for i in range(start, min(events, start + BATCH))])


@pytest.fixture(scope="module")
def slow(tmp_path_factory):
    """A server whose jobs are paced to 2% of a core while others' calls are served, with
    context "big" (EVENTS events of 32 KiB) and "small"; its storage API listens too (to
    damage a context as only a write past the transaction path could)."""
    server = ServerProcess(tmp_path_factory.mktemp("jobs") / "data", args=SLOW).start()
    channel = grpc.insecure_channel(server.address, options=wire.BIG_MESSAGES)
    client = TransactionClient(channel, timeout=120)
    fill(client, "big")
    fill(client, "small", 3)
    yield server, client, channel
    channel.close()
    server.kill()


@pytest.fixture(scope="module")
def poller(slow):
    """Clients on a connection of their own (not shared with `slow`'s): their polls are
    another caller's cheap calls, which pace the running job. Polled over the job's own
    connection, a rebuild of "big" ran unpaced in 1.9 s, and a cancel sent after a poll
    that saw it running once arrived after its last event (a fresh-clone CI run)."""
    channel = grpc.insecure_channel(slow[0].address, options=[
        *wire.BIG_MESSAGES, ("grpc.use_local_subchannel_pool", 1)])
    yield TransactionClient(channel, timeout=120), RecallClient(channel, timeout=120)
    channel.close()


def polled(client, id: str, condition, bound: float = 120.0) -> dict:
    """The job as first seen meeting `condition` (polled: each poll is a cheap call that
    keeps the job paced)."""
    seen: list[dict] = []

    def check() -> bool:
        seen.append(client.get_job(id))
        return condition(seen[-1])
    until(check, bound, lambda: f"job {id}: {seen[-1] if seen else None}")
    return seen[-1]


def cancelled_and_quiet(server, client, id: str) -> dict:
    """Cancel the running job; it ends `cancelled` and the server spends (next to) no
    CPU after that."""
    asked = client.cancel_job(id)
    assert asked["cancel_requested"] is True
    job = polled(client, id, lambda j: j["state"] != "running")
    at_end = cpu_seconds(server.proc.pid)
    assert job["state"] == "cancelled", job
    assert job["error_reason"] == "CANCELLED" and job["result"] is None, job
    assert job["finished_at"] and job["done"] < job["total"], job
    spent = settled_cpu(server.proc.pid) - at_end
    assert spent < 0.5, f"the cancelled job went on for {spent:.2f} s of CPU"
    return job


def test_sec_07_an_audit_job_reports_rising_progress_and_stops_when_cancelled(slow, poller):
    server, client, _ = slow
    settled_cpu(server.proc.pid)
    job = client.start_job("big", "audit")
    assert job["id"].startswith("tx-") and job["state"] in ("queued", "running"), job
    assert job["kind"] == "audit" and job["context"] == "big" and job["created_at"]
    first = polled(poller[0], job["id"], lambda j: j["done"] > 0)
    assert first["state"] == "running" and first["started_at"], first
    assert first["total"] == EVENTS + 1  # and the context's creation
    later = polled(poller[0], job["id"], lambda j: j["done"] > first["done"])
    assert later["state"] == "running" and later["done"] < EVENTS + 1, later
    cancelled_and_quiet(server, client, job["id"])
    # Listed as it ended; its admission slot was given back: a full audit runs.
    listed = client.list_jobs("big")["jobs"]
    assert [(j["id"], j["state"]) for j in listed] == [(job["id"], "cancelled")]
    assert client.audit("small")["match"] is True


def test_sec_07_a_finished_audit_job_answers_the_audit_report(slow):
    server, client, _ = slow
    job = client.start_job("small", "audit")
    done = polled(client, job["id"], lambda j: j["state"] not in ("queued", "running"))
    assert done["state"] == "succeeded", done
    assert done["result"]["match"] is True and done["result"]["events_replayed"] == 4
    assert done["done"] == done["total"] == 4 and done["error_reason"] == ""
    # Cancelling a finished job changes nothing.
    assert client.cancel_job(job["id"])["state"] == "succeeded"


def test_sec_07_a_rebuild_job_cancelled_midway_leaves_the_projections_as_they_were(slow,
                                                                                 poller):
    """A row slipped in past the history's end (audit: no match; a rebuild moves it aside
    into quarantine): a rebuild job cancelled mid-replay moves nothing and writes
    nothing; one run through repairs it."""
    server, client, _ = slow
    storage_channel = grpc.insecure_channel(server.storage_address)
    storage = StorageClient(storage_channel, timeout=60)
    with storage.reader("big") as r:
        seq, tail = r.commit_seq, len(list(r.scan("event_ids")))
    stray = ("stray-id", str(EVENTS + 50).encode())
    storage.commit("big", seq, [Write("event_ids", (stray[0],), stray[1])])
    before = client.status("big")
    assert client.audit("big")["match"] is False
    job = client.start_job("big", "rebuild-projections")
    polled(poller[0], job["id"], lambda j: j["done"] > 0)
    cancelled_and_quiet(server, client, job["id"])
    assert client.status("big") == before  # same revision, commit sequence, tick
    with storage.reader("big") as r:
        assert len(list(r.scan("event_ids"))) == tail + 1 and list(r.scan("quarantine")) == []
    storage_channel.close()
    assert client.audit("big")["match"] is False  # as damaged as before, no more
    repaired = client.rebuild_projections("big")
    assert repaired["quarantined"] == ["event_ids/stray-id"]
    assert client.audit("big")["match"] is True


def test_sec_07_an_index_rebuild_job_runs_on_recall_and_can_be_cancelled(slow, poller):
    server, client, channel = slow
    recall = RecallClient(channel, timeout=120)
    before = recall.inspect("big")["last_rebuild"]
    job = recall.start_job("big")
    assert job["id"].startswith("recall-") and job["kind"] == "rebuild-index", job
    polled(poller[1], job["id"], lambda j: j["done"] > 0)
    cancelled_and_quiet(server, recall, job["id"])
    assert recall.inspect("big")["last_rebuild"] == before  # nothing swapped in
    done = recall.start_job("small")
    finished = polled(recall, done["id"], lambda j: j["state"] not in ("queued", "running"))
    assert finished["state"] == "succeeded" and finished["result"]["context"] == "small"
    # Each service knows its own jobs only.
    with pytest.raises(MorphzError) as e:
        client.get_job(done["id"])
    assert e.value.reason == "JOB_NOT_FOUND"


def test_sec_07_an_unknown_job_kind_or_id_is_refused(slow):
    _, client, _ = slow
    with pytest.raises(MorphzError) as e:
        client.start_job("small", "compact")
    assert e.value.reason == "CONTEXT_INPUT_INVALID" and e.value.details["field"] == "kind"
    with pytest.raises(MorphzError) as e:
        client.get_job("tx-0000000000000000")
    assert e.value.reason == "JOB_NOT_FOUND"


@pytest.fixture(scope="module")
def principals(tmp_path_factory):
    """A server with bearer tokens for alice, bob and carol, each with a context of their
    own."""
    tmp = tmp_path_factory.mktemp("principals")
    tokens = tmp / "tokens.json"
    tokens.write_text(json.dumps({token: name for name, token in TOKENS.items()}))
    server = ServerProcess(tmp / "data", args=["--tokens", str(tokens)]).start()
    clients = {}
    for name in TOKENS:
        ch = ClientAuth(token=TOKENS[name]).channel(server.address)
        clients[name] = TransactionClient(ch, timeout=60)
        fill(clients[name], name, 20)
    yield server, clients
    server.kill()


def refused(fn, *args) -> MorphzError:
    with pytest.raises(MorphzError) as e:
        fn(*args)
    return e.value


def test_sec_07_a_job_of_another_principal_answers_as_not_found(principals):
    _, c = principals
    job = c["alice"].start_job("alice", "audit")
    for verb in (c["bob"].get_job, c["bob"].cancel_job):
        err = refused(verb, job["id"])
        assert err.reason == "JOB_NOT_FOUND", err
        assert err.message == refused(verb, "tx-" + "0" * 16).message.replace(
            "tx-" + "0" * 16, job["id"])  # as an id that never existed
    assert c["bob"].list_jobs()["jobs"] == []
    assert refused(c["bob"].start_job, "alice", "audit").reason == "FORBIDDEN"
    assert c["alice"].get_job(job["id"])["cancel_requested"] is False  # bob's cancel: none
    assert [j["id"] for j in c["alice"].list_jobs()["jobs"]] == [job["id"]]




def test_sec_07_the_cli_starts_detached_jobs_and_gets_lists_and_cancels_them(slow):
    server, _, _ = slow
    started = run_json("context", "audit", "small", "--detach", address=server.address)
    assert started["id"].startswith("tx-") and started["kind"] == "audit"
    got: list = []
    until(lambda: got.append(run_json("job", "get", started["id"], address=server.address))
          or got[-1]["state"] == "succeeded", 120, lambda: got[-1:])
    assert got[-1]["result"]["match"] is True
    index = run_json("context", "recall-index", "rebuild", "small", "--detach",
                     address=server.address)
    assert index["id"].startswith("recall-")
    listed = run_json("job", "list", "--of", "small", address=server.address)["jobs"]
    assert {started["id"], index["id"]} <= {j["id"] for j in listed}
    cancel = run_json("job", "cancel", started["id"], address=server.address)
    assert cancel["state"] == "succeeded"  # finished: cancelling changes nothing
    text = run_cli("job", "get", started["id"], address=server.address)
    assert text.returncode == 0 and f"{started['id']}  audit small  succeeded" in text.stdout
    missing = run_cli("job", "get", "recall-0000000000000000", "--format=json",
                      address=server.address)
    assert_error(missing, "NOT_FOUND", "JOB_NOT_FOUND")


def test_sec_07_the_python_clients_start_poll_list_and_cancel_jobs(slow):
    server, _, _ = slow

    with Client(server.address, credentials=Credentials(), timeout=60) as client:
        job = client.start_job("small", "audit")
        until(lambda: client.job(job.id).state == "succeeded", 120)
        assert json.loads(client.job(job.id).result_json)["match"] is True
        index = client.start_job("small", "rebuild-index")
        assert index.id.startswith("recall-")
        assert {job.id, index.id} <= {j.id for j in client.jobs("small")}
        assert client.cancel_job(job.id).state == "succeeded"

    async def run() -> str:
        client = AsyncClient(server.address, credentials=Credentials(), timeout=60)
        try:
            started = await client.start_job("small", "rebuild-projections")
            return (await client.job(started.id)).kind
        finally:
            await client.close()
    assert asyncio.run(run()) == "rebuild-projections"


def test_sec_07_jobs_run_where_their_service_runs(client, ctx, endpoints):
    """On the session's servers (all-in-one, or split with --topology split): the audit
    job on the transaction service, the index rebuild job on recall."""
    client.append_event(ctx, "s", "user-message", "a job's context")
    audit = client.start_job(ctx, "audit")
    until(lambda: client.get_job(audit["id"])["state"] == "succeeded", 120,
          lambda: client.get_job(audit["id"]))
    assert client.get_job(audit["id"])["result"]["match"] is True
    channel = grpc.insecure_channel(endpoints.recall)
    try:
        recall = RecallClient(channel, timeout=60)
        index = recall.start_job(ctx)
        until(lambda: recall.get_job(index["id"])["state"] == "succeeded", 120,
              lambda: recall.get_job(index["id"]))
        assert recall.get_job(index["id"])["result"]["context"] == ctx
    finally:
        channel.close()
