"""DIST-05 under load: eight writers commit transactions and append events to a few
contexts through the split transaction process while readers search and traverse through
the recall process and compile encodings through the encoding process, all at once.
No caller sees INTERNAL (a StaleRead escaping a remote read would arrive as one) or any
error a client could not act on; TX_CONFLICT and CONCURRENT_UPDATE, the documented
"reread and retry", are retried as a client would and counted. Afterwards every
acknowledged commit and event is found by recall search once the index has caught up.

It starts its own four processes, so it runs the same under either --topology."""
from __future__ import annotations

import collections
import random
import threading
import time

import grpc
import pytest

from morphz.services.encoding.client import EncodingClient
from morphz.services.recall.client import RecallClient
from morphz.services.transaction.client import TransactionClient
from morphz.shared.errors import MorphzError

from tests.topology import BOUND, SplitServers

WRITERS, CONTEXTS = 8, 3
LOAD_SECONDS = 12.0  # how long the load runs; nothing below asserts on speed
RETRIED = {"TX_CONFLICT", "CONCURRENT_UPDATE"}  # reread and retry, as a client would
PAGE = 100  # recall's largest page
pytestmark = pytest.mark.split_processes


@pytest.fixture
def split(tmp_path):
    servers = SplitServers(tmp_path).start()
    yield servers
    servers.kill()


class Load:
    """What every thread records: acknowledged refs per writer, retried rejections, any
    other error, and how much work each kind of caller did."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: dict[int, list[str]] = collections.defaultdict(list)
        self.retried: collections.Counter = collections.Counter()
        self.errors: list[tuple[str, str, str]] = []  # (caller, reason, message)
        self.calls: collections.Counter = collections.Counter()
        self.stop = threading.Event()

    def retry(self, who: str, fn, *args, **kwargs):
        """fn(...) until it answers; TX_CONFLICT/CONCURRENT_UPDATE are retried (counted),
        any other error is recorded and ends this caller."""
        while True:
            try:
                reply = fn(*args, **kwargs)
            except MorphzError as e:
                if e.reason not in RETRIED:
                    raise
                with self.lock:
                    self.retried[e.reason] += 1
                continue
            with self.lock:
                self.calls[who] += 1
            return reply

    def run(self, who: str, body) -> threading.Thread:
        def guarded() -> None:
            try:
                while not self.stop.is_set():
                    body()
            except MorphzError as e:
                with self.lock:
                    self.errors.append((who, e.reason, e.message))
            except BaseException as e:  # noqa: BLE001 - reported by the test
                with self.lock:
                    self.errors.append((who, type(e).__name__, str(e)))
        t = threading.Thread(target=guarded, name=who)
        t.start()
        return t


def context_of(writer: int) -> str:
    return f"load-{writer % CONTEXTS}"


def writer_body(load: Load, tx: TransactionClient, i: int):
    """One commit (its own frame; every third also the shared frame, where writers
    conflict), then one event; each acknowledged ref is recorded."""
    n = iter(range(1 << 30))
    ctx = context_of(i)

    def body() -> None:
        k = next(n)
        shared = f" (revise shared (last writer{i} n{k}))" if k % 3 == 0 else ""

        def commit() -> dict:  # a retry rereads the revision, as a client must
            base = tx.status(ctx)["revision"]
            return tx.commit(ctx, f"(context-tx (base-version {base}) "
                                  f"(revise w{i} (note writer{i} n{k})){shared})",
                             request_id=f"w{i}-tx-{k}")
        receipt = load.retry("commit", commit)
        event = load.retry("event", tx.append_event, ctx, f"s{i}", "user-message",
                           f"writer{i} event n{k}", request_id=f"w{i}-ev-{k}")
        with load.lock:
            load.acked[i] += [receipt["event_ref"], event["ref"]]
    return body


def searcher_body(load: Load, recall: RecallClient, rng: random.Random):
    def body() -> None:
        i = rng.randrange(WRITERS)
        page = load.retry("search", recall.search, context_of(i), f"writer{i} note",
                          limit=20)
        if page["next_cursor"]:
            load.retry("search", recall.search, context_of(i), f"writer{i} note",
                       limit=20, cursor=page["next_cursor"])
    return body


def traverser_body(load: Load, recall: RecallClient, rng: random.Random):
    def body() -> None:
        ctx = f"load-{rng.randrange(CONTEXTS)}"
        walk = load.retry("traverse", recall.traverse, ctx, "shared", depth=2,
                          direction="both", include_bodies=True)
        assert {n["id"] for n in walk["nodes"]} >= {"shared"}, walk
    return body


def encoder_body(load: Load, enc: EncodingClient, rng: random.Random):
    def body() -> None:
        i = rng.randrange(WRITERS)
        e = load.retry("compile", enc.compile, context_of(i), f"s{i}")
        assert "(frame shared" in e["text"], e["text"][:200]
    return body


def found_events(recall: RecallClient, context: str, query: str) -> set[str]:
    """Every event ref search finds for `query`, over all its pages."""
    refs: set[str] = set()
    cursor = ""
    while True:
        page = recall.search(context, query, kinds=["event"], limit=PAGE, cursor=cursor)
        refs |= {h["ref"] for h in page["results"]}
        if not (cursor := page["next_cursor"]):
            return refs


def caught_up(recall: RecallClient, context: str) -> dict:
    deadline = time.monotonic() + BOUND  # the index follows the outbox in the background
    while (st := recall.inspect(context))["lag"]:
        assert time.monotonic() < deadline, st
        time.sleep(0.1)
    return st


@pytest.fixture
def clients(split):
    at = split.endpoints
    channels = [grpc.insecure_channel(a) for a in (at.transaction, at.recall, at.encoding)]
    yield (TransactionClient(channels[0], timeout=30), RecallClient(channels[1], timeout=30),
           EncodingClient(channels[2], timeout=30))
    for ch in channels:
        ch.close()


def test_dist_05_eight_writers_split(clients):
    tx, recall, enc = clients
    for c in range(CONTEXTS):
        ctx = f"load-{c}"
        tx.create_context(ctx)
        writers = [i for i in range(WRITERS) if context_of(i) == ctx]
        creates = " ".join(f"(create w{i} (note writer{i} start)) (relate w{i} feeds shared)"
                           for i in writers)
        tx.commit(ctx, f"(context-tx (base-version 0) (create shared (last none)) {creates})")
        for i in writers:  # each writer's session exists before the encoder compiles for it
            tx.append_event(ctx, f"s{i}", "user-message", f"writer{i} starts")

    load = Load()
    threads = [load.run(f"writer{i}", writer_body(load, tx, i)) for i in range(WRITERS)]
    threads += [load.run(f"searcher{k}", searcher_body(load, recall, random.Random(k)))
                for k in range(2)]
    threads += [load.run("traverser", traverser_body(load, recall, random.Random(2))),
                load.run("encoder", encoder_body(load, enc, random.Random(3)))]
    try:
        load.stop.wait(LOAD_SECONDS)
    finally:
        load.stop.set()
        for t in threads:
            t.join(timeout=BOUND)
    assert not [t.name for t in threads if t.is_alive()], "a caller is stuck"
    assert load.errors == [], load.errors[:10]
    # Every kind of caller did real work, every writer got commits acknowledged.
    assert all(load.calls[who] > 0 for who in ("commit", "event", "search", "traverse",
                                               "compile")), load.calls
    assert all(len(load.acked[i]) >= 2 for i in range(WRITERS)), dict(load.acked)

    for c in range(CONTEXTS):
        ctx = f"load-{c}"
        st = caught_up(recall, ctx)
        assert st["documents"] == st["events"] + st["frames"], st
        for i in (i for i in range(WRITERS) if context_of(i) == ctx):
            missing = set(load.acked[i]) - found_events(recall, ctx, f"writer{i}")
            assert not missing, (ctx, i, sorted(missing)[:10])
        assert tx.audit(ctx)["match"]
    print(f"calls {dict(load.calls)}, retried {dict(load.retried)}, "
          f"acknowledged {sum(map(len, load.acked.values()))} refs")
