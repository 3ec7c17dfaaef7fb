"""DIST-01..04: one owner per context through etcd leases, and fencing tokens checked by
storage. A real etcd on loopback (tests/etcd_server.py); the ownership core over the
real etcd adapter in-process, then a real storage process and two transaction processes
started with --etcd, one of them SIGKILLed.

A commit sent to an instance that does not own the context is refused (NOT_OWNER, its
details naming the owner and its address), not forwarded; clients given a way to
connect, and the CLI, follow that redirect."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import etcd3gw
import grpc
import pytest

from morphz.services.storage.client import StorageClient
from morphz.services.transaction.core.ownership import (OWNERS_PREFIX, Instance,
                                                        LeaseOwnership)
from morphz.shared.coord.etcd import EtcdCoordinator
from morphz.shared.errors import MorphzError
from morphz.shared.storage.api import Write

from tests.conftest import ServerProcess
from tests.polling import until
from tests.topology import NOT_SERVING, SERVING, health, wait_health
from tests.wire import SERVICES

TRANSACTION_SERVICE = SERVICES["transaction"].full_name

# Every test starts the processes it needs, so the split pass of .ci/run need not repeat them.
pytestmark = pytest.mark.split_processes

TTL = 3  # seconds: the lease TTL of every instance here
BOUND = 60.0  # seconds any wait below may take before the test fails


def owner_key(context: str) -> str:
    return OWNERS_PREFIX + context


def key_holder(etcd, context: str) -> tuple[str, int]:
    """(the instance named in the context's ownership key, its create_revision), read
    from etcd directly; ("", 0) if nobody owns it."""
    host, port = etcd.address.rsplit(":", 1)
    c = etcd3gw.client(host=host, port=int(port), timeout=5, api_path="/v3/")
    try:
        found = c.get(owner_key(context).encode(), metadata=True)
    finally:
        c.session.close()
    if not found:
        return "", 0
    value, meta = found[0]
    return json.loads(value)["instance"], int(meta["create_revision"])


def refused(reason: str, fn, *args, **kwargs) -> MorphzError:
    with pytest.raises(MorphzError) as info:
        fn(*args, **kwargs)
    assert info.value.reason == reason, info.value.to_dict()
    return info.value


def eventually(fn, what: str):
    """fn() once it stops raising MorphzError (bounded); the errors seen meanwhile."""
    seen, deadline = [], time.monotonic() + BOUND
    while True:
        try:
            return fn(), seen
        except MorphzError as e:
            seen.append(e)
            assert time.monotonic() < deadline, f"{what}: still {e.to_dict()}"
        time.sleep(0.1)


def wait_until(cond, what: str) -> None:
    deadline = time.monotonic() + BOUND
    while not cond():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)


def until_refused(fn, reason: str, what: str) -> MorphzError:
    """Call fn() until it is refused with `reason` (bounded); that error."""
    deadline = time.monotonic() + BOUND
    while True:
        try:
            fn()
        except MorphzError as e:
            if e.reason == reason:
                return e
            raise
        assert time.monotonic() < deadline, f"{what}: never refused with {reason}"
        time.sleep(0.1)


# -- the ownership core over the real etcd adapter, in-process ---------------------------

@pytest.fixture
def owners(etcd):
    """make(id) -> a started LeaseOwnership of instance `id` on the test's etcd."""
    made = []

    def make(instance_id: str) -> LeaseOwnership:
        coord = EtcdCoordinator(etcd.address, timeout=1.0)
        o = LeaseOwnership(coord, Instance(instance_id, f"{instance_id}.test:7072"), ttl=TTL)
        o.start()
        made.append((o, coord))
        return o
    yield make
    for o, coord in made:
        o.close()
        coord.close()


def test_dist_01_one_instance_owns_a_context_the_other_is_refused_naming_it(owners, etcd):
    a, b = owners("a"), owners("b")
    token = a.token("c1")
    assert token == a.token("c1") == key_holder(etcd, "c1")[1]  # create_revision
    err = refused("NOT_OWNER", b.token, "c1")
    assert err.status.value == "FAILED_PRECONDITION"
    assert err.details == {"context": "c1", "owner": "a", "owner_address": "a.test:7072"}
    assert b.token("c2") > token  # each context has its own owner
    assert refused("NOT_OWNER", a.token, "c2").details["owner"] == "b"
    a.close()  # revokes its lease: its contexts are free at once
    assert b.token("c1") > token  # taken again: a higher token fences a's commits
    assert key_holder(etcd, "c1")[0] == "b"


def test_dist_01_a_restarted_instance_reclaims_its_contexts_at_once(etcd):
    """An instance killed while owning a context (its lease left to run out: 60 s here)
    and started again under its id owns the context at once, with a higher token: it
    revokes its former process's lease (before, it was refused NOT_OWNER by its own
    former lease until the TTL ran out)."""
    coords = [EtcdCoordinator(etcd.address, timeout=1.0) for _ in range(2)]
    killed = LeaseOwnership(coords[0], Instance("a", "a.test:7072"), ttl=60)
    restarted = LeaseOwnership(coords[1], Instance("a", "a.test:7072"), ttl=60)
    try:
        killed.start()
        token = killed.token("c")
        killed._stop.set()  # as SIGKILL leaves it: no renewal, no revocation
        killed._keeper.join()
        started = time.monotonic()
        restarted.start()
        assert restarted.token("c") > token
        assert time.monotonic() - started < 10
        assert key_holder(etcd, "c") == ("a", restarted.token("c"))
    finally:
        restarted.close()
        for c in coords:
            c.close()


def test_dist_01_a_second_process_with_the_same_id_supersedes_the_first(owners):
    """Two live processes under one instance id (a duplicate, or a restart the old one
    survived): the newer one takes the contexts with a higher token, and the older one,
    its lease revoked, refuses every commit from then on (fails closed), for good."""
    first = owners("a")
    token = first.token("c")
    second = owners("a")
    assert second.token("c") > token
    until_refused(lambda: first.token("c"), "OWNERSHIP_LOST", "the superseded process")
    # Its lease revoked, it is refused at once ("the lease expired"); its keeper's next
    # round finds the newer process's record and says so (a loaded machine delays it).
    until(lambda: "another process runs as instance a" in first.trouble(), BOUND,
          f"the superseded process never said so: {first.trouble()}")
    time.sleep(TTL)  # it never takes its contexts back
    refused("OWNERSHIP_LOST", first.token, "c")
    refused("OWNERSHIP_LOST", first.token, "other")
    assert second.token("c") > token and not second.trouble()


def test_dist_04_a_lease_not_renewed_refuses_at_once_and_resumes_once_owning_again(
        owners, etcd):
    a = owners("a")
    old = a.token("c")
    etcd.pause()
    try:
        err = until_refused(lambda: a.token("c"), "OWNERSHIP_LOST", "etcd paused")
        assert err.status.value == "UNAVAILABLE"
        assert err.details["instance"] == "a" and err.details["context"] == "c"
        time.sleep(TTL + 1)  # past the TTL: etcd will find the lease expired
        refused("OWNERSHIP_LOST", a.token, "c")
    finally:
        etcd.resume()
    token, _ = eventually(lambda: a.token("c"), "etcd resumed")
    assert token > old  # owned again under a new lease, not the expired one
    assert key_holder(etcd, "c") == ("a", token)


# -- real processes: storage, two transaction instances, etcd ------------------------------

def transaction_instance(tmp_path, name: str, storage: ServerProcess, etcd) -> ServerProcess:
    return ServerProcess(tmp_path / name, args=[
        "transaction", "--storage", storage.address, "--etcd", etcd.address,
        "--lease-ttl", str(TTL)]).start()


@pytest.fixture
def cluster(tmp_path, etcd):
    """A storage process and two transaction instances (a, b) owning contexts through
    the test's etcd; each instance's id is its address (the default)."""
    procs = {"storage": ServerProcess(tmp_path / "storage", args=["storage"]).start()}
    for name in ("a", "b"):
        procs[name] = transaction_instance(tmp_path, name, procs["storage"], etcd)
    yield procs
    for p in procs.values():
        p.kill()


def tx(base: int, ops: str) -> str:
    return f"(context-tx (base-version {base}) {ops})"


def test_dist_01_a_second_transaction_process_is_refused_with_the_owner(cluster, etcd):
    a, b = cluster["a"].client(), cluster["b"].client()
    a.create_context("dist-01")
    a.commit("dist-01", tx(0, "(create plan (goal ship))"))
    assert key_holder(etcd, "dist-01")[0] == cluster["a"].address
    err = refused("NOT_OWNER", b.commit, "dist-01", tx(1, "(create other (x 1))"))
    assert err.details == {"context": "dist-01", "owner": cluster["a"].address,
                           "owner_address": cluster["a"].address}
    # Every write is the owner's; reads are anyone's.
    refused("NOT_OWNER", b.append_event, "dist-01", "main", "user-message", "hi")
    assert b.status("dist-01")["revision"] == 1
    # The other instance owns the contexts it writes first.
    b.create_context("dist-01-b")
    err = refused("NOT_OWNER", a.commit, "dist-01-b", tx(0, "(create x (y 1))"))
    assert err.details["owner_address"] == cluster["b"].address
    assert a.commit("dist-01", tx(1, "(create next (x 2))"))["revision"] == 2


def test_dist_01_clients_and_the_cli_follow_the_refusal_to_the_owner(cluster, etcd):
    from morphz.services.transaction.client import TransactionClient
    a = cluster["a"].client()
    a.create_context("dist-01-redirect")
    a.commit("dist-01-redirect", tx(0, "(create plan (goal ship))"))
    b = TransactionClient(grpc.insecure_channel(cluster["b"].address), timeout=30,
                          connect=grpc.insecure_channel)
    try:  # sent to b, refused there unread, sent again to a, which commits it once
        receipt = b.commit("dist-01-redirect", tx(1, "(create next (x 2))"))
        assert receipt["revision"] == 2
        assert b.append_event("dist-01-redirect", "main", "user-message", "hi")["ref"]
    finally:
        b.close()
    assert a.status("dist-01-redirect")["revision"] == 2
    assert key_holder(etcd, "dist-01-redirect")[0] == cluster["a"].address
    from morphz.client import Client, Credentials  # the agent runtimes' client
    with Client(cluster["b"].address, credentials=Credentials()) as mz:
        assert mz.append_event("dist-01-redirect", session="main", kind="user-message",
                               text="again").ref
    assert a.status("dist-01-redirect")["event_count"] == 5
    out = subprocess.run(
        [sys.executable, "-m", "morphz.services.cli.main", "--format=json", "--server",
         cluster["b"].address, "context", "tx", "--context", "dist-01-redirect", "-"],
        input=tx(2, "(create third (x 3))"), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["revision"] == 3


def test_dist_02_storage_rejects_a_stale_token_even_at_the_current_version(cluster, etcd):
    a = cluster["a"].client()
    a.create_context("dist-02")
    a.commit("dist-02", tx(0, "(create plan (goal ship))"))
    _, token = key_holder(etcd, "dist-02")
    with grpc.insecure_channel(cluster["storage"].address) as channel:
        store = StorageClient(channel, timeout=10)
        with store.reader("dist-02") as r:
            current = r.commit_seq
        for stale in (token - 1, 0):  # a former owner's token; none at all
            err = refused("FENCED", store.commit, "dist-02", current,
                          [Write("frames", ("intruder",), b"{}")], fence=stale)
            assert err.details == {"context": "dist-02", "fence": stale, "highest": token}
        with store.reader("dist-02") as r:
            assert r.commit_seq == current and r.get("frames", ("intruder",)) is None
    assert a.commit("dist-02", tx(1, "(create next (x 2))"))["revision"] == 2


def test_dist_03_the_owner_killed_another_instance_takes_over_with_nothing_lost(
        cluster, etcd):
    a, b = cluster["a"].client(timeout=10), cluster["b"].client(timeout=10)
    a.create_context("dist-03")
    acked: list[int] = []

    def writer() -> None:  # commits one frame after another until its server dies
        try:
            for n in range(10_000):
                a.commit("dist-03", tx(n, f"(create f{n} (n {n}))"))
                acked.append(n)
        except MorphzError:
            return
    thread = threading.Thread(target=writer)
    thread.start()
    wait_until(lambda: len(acked) >= 5, "the first commits")
    cluster["a"].kill()  # SIGKILL, mid-stream
    thread.join(timeout=BOUND)
    assert not thread.is_alive()
    old_owner, old_token = key_holder(etcd, "dist-03")
    assert old_owner == cluster["a"].address
    started = time.monotonic()

    def take_over():
        return b.commit("dist-03", tx(b.status("dist-03")["revision"],
                                      "(create after-takeover (by b))"))
    receipt, refusals = eventually(take_over, "takeover by b")
    took = time.monotonic() - started
    # Until the dead owner's lease expired, b was told who owned the context.
    assert {e.reason for e in refusals} <= {"NOT_OWNER"}
    assert all(e.details["owner"] == cluster["a"].address for e in refusals)
    assert key_holder(etcd, "dist-03")[1] > old_token
    frames = {f["id"] for f in b.list_frames("dist-03")["frames"]}
    created = history(cluster["storage"].address, "dist-03")
    # The history checker: every acknowledged commit is in the history exactly once,
    # nothing is in it twice, and the frames are what the history made.
    assert all(created[f"f{n}"] == 1 for n in acked), created
    assert max(created.values()) == 1, created
    assert set(created) == frames and "after-takeover" in frames
    # Continues from the committed state: all of it, acknowledged or not, in order.
    assert receipt["revision"] == len(frames) == b.status("dist-03")["revision"]
    print(f"takeover after {took:.1f} s (TTL {TTL} s), {len(acked)} commits acknowledged")


def history(storage_address: str, context: str) -> Counter:
    """How many events of the context's stored history create each frame (read from
    storage directly, not through any transaction instance's view of it)."""
    with grpc.insecure_channel(storage_address) as channel:
        with StorageClient(channel, timeout=30).reader(context) as r:
            raw = b"".join(record for _, record in r.scan("events"))
    return Counter(m.decode() for m in re.findall(rb"\(create ([\w-]+) ", raw))


def paused(proc: ServerProcess) -> bool:
    """The process is stopped (SIGSTOP, or a pause fault)."""
    stat = open(f"/proc/{proc.proc.pid}/stat").read()
    return stat.rsplit(")", 1)[1].split()[0] == "T"


FENCE_CYCLES = 20


def test_dist_02_a_paused_owner_resumed_after_a_takeover_is_fenced_every_time(
        cluster, etcd, tmp_path):
    """An owner frozen between taking its token and sending its commit (a pause fault:
    SIGSTOP at that point, at every commit of x) past its lease TTL; b takes the context
    over and commits; SIGCONT: x's commit reaches storage with the old token and is
    refused FENCED, and so is everything x then attempts. 20 cycles, 0 stale writes."""
    x_proc = ServerProcess(tmp_path / "x", args=[
        "transaction", "--storage", cluster["storage"].address, "--etcd", etcd.address,
        "--lease-ttl", "2"]).start(MORPHZ_FAULT="after-token-before-submit")
    cluster["x"] = x_proc  # killed with the cluster
    x, b = x_proc.client(timeout=BOUND), cluster["b"].client(timeout=10)
    fenced, stale = 0, []
    for k in range(FENCE_CYCLES):
        outcome, events, window = fence_cycle(x_proc, x, b, cluster["storage"], f"fence-{k}")
        if isinstance(outcome, MorphzError) and outcome.reason == "FENCED":
            fenced += 1
        else:
            stale.append((k, outcome))
        if (events, window) != (1, 8):  # b's creation alone (x asked for window 3)
            stale.append((k, events, window))
    assert (fenced, stale) == (FENCE_CYCLES, [])


def fence_cycle(x_proc: ServerProcess, x, b, storage: ServerProcess, context: str):
    """One cycle on a new context: (what x's frozen creation of it returned, how many
    events storage holds for it, its window)."""
    outcome: list = []
    resumed = threading.Event()

    def frozen_create() -> None:  # x takes the context, then freezes with its token
        deadline = time.monotonic() + BOUND
        while True:
            try:
                outcome.append(x.create_context(context, window=3))
            except MorphzError as e:
                # Refused before it froze: the last cycle's pause outlived x's lease, and
                # its keeper has not been granted a new one yet (a loaded machine).
                if e.reason == "OWNERSHIP_LOST" and not resumed.is_set() and \
                        time.monotonic() < deadline:
                    time.sleep(0.1)
                    continue
                outcome.append(e)
            return
    thread = threading.Thread(target=frozen_create)
    thread.start()
    wait_until(lambda: paused(x_proc) or not thread.is_alive(), "x frozen before its commit")
    assert not outcome, f"x answered without freezing: {outcome}"
    # b is refused (NOT_OWNER) until x's lease expires, then takes over and creates it.
    # On a loaded machine b's own renewal may come late (TTL 3 s): b then refuses
    # (OWNERSHIP_LOST) rather than commit unsure of its lease, and takes over once renewed.
    status, refusals = eventually(lambda: b.create_context(context), "b takes over")
    assert {e.reason for e in refusals} <= {"NOT_OWNER", "OWNERSHIP_LOST"}, \
        [e.to_dict() for e in refusals]
    resumed.set()
    x_proc.proc.send_signal(signal.SIGCONT)
    thread.join(BOUND)
    assert len(outcome) == 1, "x's commit did not return"
    # Whatever x attempts next is refused before it reaches storage: not the owner.
    for _ in range(3):
        err = refused_any(lambda: x.commit(context, tx(0, "(create later (by x))")))
        assert err.reason in ("NOT_OWNER", "OWNERSHIP_LOST"), err.to_dict()
    with grpc.insecure_channel(storage.address) as channel:
        with StorageClient(channel, timeout=30).reader(context) as r:
            events = len(list(r.scan("events")))
    return outcome[0], events, b.status(context)["window"]


def refused_any(fn) -> MorphzError:
    with pytest.raises(MorphzError) as info:
        fn()
    return info.value


def test_dist_04_etcd_stopped_past_the_ttl_owners_refuse_then_resume_once_it_restarts(
        cluster, etcd):
    """etcd really stopped (its process ended) for longer than the TTL, then started
    again on the same data: the owner refuses with a clear error meanwhile, and commits
    again afterwards with no operator action."""
    a = cluster["a"].client(timeout=10)
    a.create_context("dist-04")
    a.commit("dist-04", tx(0, "(create plan (goal ship))"))
    _, old_token = key_holder(etcd, "dist-04")
    revision = 1
    etcd.stop()
    try:
        def commit():
            nonlocal revision
            a.commit("dist-04", tx(revision, f"(create r{revision} (x 1))"))
            revision += 1
        err = until_refused(commit, "OWNERSHIP_LOST", "etcd stopped")
        assert err.status.value == "UNAVAILABLE"
        assert err.details["instance"] == cluster["a"].address
        assert "lease" in err.message and "dist-04" in err.message
        # Its health says so too, so probes and clients turn to another instance; the
        # transaction service's own name stays SERVING: recall and encoding processes
        # check that name, and their reads need no lease.
        wait_health(cluster["a"], NOT_SERVING)
        assert health(cluster["a"].address, TRANSACTION_SERVICE) == SERVING
        time.sleep(TTL + 1)  # longer than the TTL
        err = refused("OWNERSHIP_LOST", commit)
        assert "etcd" in err.message  # says why: etcd does not answer
        assert health(cluster["a"].address) == NOT_SERVING
    finally:
        etcd.restart()
    receipt, _ = eventually(lambda: a.commit("dist-04", tx(revision, "(create back (x 1))")),
                            "etcd restarted")
    wait_health(cluster["a"], SERVING)
    assert receipt["revision"] == revision + 1  # nothing was written while refused
    owner, token = key_holder(etcd, "dist-04")
    # Its lease may have survived (etcd renews leases' TTLs when it starts) or been
    # replaced (then the context was taken again under a higher token).
    assert owner == cluster["a"].address and token >= old_token


@pytest.mark.parametrize("argv, field", [
    (["storage", "--etcd", "127.0.0.1:1"], "etcd"),
    (["transaction", "--storage", "127.0.0.1:1", "--instance", "x"], "instance"),
    (["transaction", "--storage", "127.0.0.1:1", "--etcd", "http://etcd"], "etcd"),
    (["transaction", "--storage", "127.0.0.1:1", "--etcd", "127.0.0.1:1",
      "--lease-ttl", "1"], "lease_ttl"),
], ids=["storage-with-etcd", "instance-without-etcd", "etcd-not-host-port", "ttl-too-short"])
def test_dist_01_only_transaction_instances_take_etcd(tmp_path, argv, field):
    proc = subprocess.run([sys.executable, "-m", "morphz.services.cli.main", "serve", *argv,
                           "--listen", "127.0.0.1:0", "--data", str(tmp_path / "data")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert (error["reason"], error["details"]["field"]) == ("CONTEXT_INPUT_INVALID", field)
