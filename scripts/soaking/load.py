"""The soak's load: agents of a normal principal working in several sessions of a few
contexts, and an abusive one. Every write carries a request id and is sent again under it
until its outcome is known (acknowledged, or refused for good), as a client must when a
fault leaves it unknown; the Ledger keeps what the history checker needs (acknowledged
and refused requests by context), the latencies, the errors by reason and every
INTERNAL, and the read-your-writes searches that missed their own write."""
from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Optional

import grpc

from morphz.services.encoding.client import EncodingClient
from morphz.services.recall.client import RecallClient
from morphz.services.transaction.client import TransactionClient
from morphz.shared.errors import MorphzError
from morphz_conformance.h2_stall import StalledCall
from morphz.api.transaction.v1 import transaction_pb2 as tpb

from procs import Topology

# Outcome unknown: the write may or may not have been applied; send it again as it was.
UNKNOWN = {"UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED", "STORAGE_UNAVAILABLE",
           "UNKNOWN", "INTERNAL"}
# Refused, nothing applied, but it may pass later: send it again as it was.
LATER = {"OWNERSHIP_LOST", "NOT_OWNER", "STORAGE_FULL", "BYTES_IN_FLIGHT_LIMIT",
         "CONCURRENT_RPC_LIMIT", "EXPENSIVE_RPC_LIMIT", "PRINCIPAL_RPC_LIMIT",
         "EXPENSIVE_CPU_LIMIT", "PRINCIPAL_CPU_LIMIT", "STORAGE_SNAPSHOT_LIMIT",
         "RESOURCE_EXHAUSTED"}
WRITE_GIVE_UP = 300.0  # seconds a write is retried before it is left to the end's settling
TIMEOUT = 10.0  # each call's deadline
SHARED_FRAMES = 3  # frames every agent of a context revises: conflicts and rebases
# An agent keeps its newest frames and inputs and retires older ones (a few per commit):
# its encodings stay within their budget however long the soak.
KEPT_FRAMES, KEPT_REFS, RETIRE_AT_ONCE = 8, 30, 6
WORDS = ("deploy", "rollback", "latency", "budget", "invoice", "schema", "migration",
         "incident", "release", "canary", "quota", "replica", "lease", "backup")


@dataclass
class Ledger:
    lock: threading.Lock = field(default_factory=threading.Lock)
    acked: dict[str, list[dict]] = field(default_factory=dict)
    rejected: dict[str, list[dict]] = field(default_factory=dict)
    unsettled: list[tuple] = field(default_factory=list)  # (context, resend) given up on
    writes: list[tuple[float, float]] = field(default_factory=list)  # (sent, acked)
    ops: list[tuple[str, float, float]] = field(default_factory=list)  # (op, sent, s)
    errors: Counter = field(default_factory=Counter)
    internal: list[str] = field(default_factory=list)
    ryw: Counter = field(default_factory=Counter)  # found / missed
    ryw_missed: list[str] = field(default_factory=list)
    audits: Counter = field(default_factory=Counter)  # match / mismatch
    audit_problems: list[str] = field(default_factory=list)
    resends: int = 0

    def error(self, e: MorphzError, where: str) -> None:
        with self.lock:
            self.errors[e.reason] += 1
            if e.reason in ("INTERNAL", "UNKNOWN") and len(self.internal) < 50:
                self.internal.append(f"{where}: {e.reason} {e.message[:300]}")

    def op(self, name: str, sent: float) -> None:
        with self.lock:
            self.ops.append((name, sent, time.monotonic() - sent))

    def wrote(self, sent: float) -> None:
        with self.lock:
            self.writes.append((sent, time.monotonic()))

    def wrote_since(self, t: float) -> float:
        """When the first write sent at or after `t` was acknowledged (0: none yet)."""
        with self.lock:
            found = [acked for sent, acked in reversed(self.writes[-20000:]) if sent >= t]
        return min(found) if found else 0.0


class Clients:
    """Channels and clients of one principal (`who`, procs.Principals); the transaction
    client follows NOT_OWNER to the owner and moves to the next instance when its own
    does not answer."""

    def __init__(self, topo: Topology, who: str, timeout: float = TIMEOUT) -> None:
        self._topo, self._turn, self._timeout = topo, 0, timeout
        self._auth = topo.principals.auth(who)
        self._channels: list[grpc.Channel] = []
        self.tx = self._tx(topo.transaction[0])
        self.recall = RecallClient(self._channel(topo.recall), timeout=timeout)
        self.encoding = EncodingClient(self._channel(topo.encoding), timeout=timeout)

    def _channel(self, address: str) -> grpc.Channel:
        ch = self._auth.channel(address, options=[
            ("grpc.max_receive_message_length", 64 << 20),
            ("grpc.initial_reconnect_backoff_ms", 200), ("grpc.max_reconnect_backoff_ms", 1000)])
        self._channels.append(ch)
        return ch

    def _tx(self, address: str) -> TransactionClient:
        return TransactionClient(self._channel(address), timeout=self._timeout,
                                 connect=self._channel)

    def tx_address(self) -> str:
        return self._topo.transaction[self._turn]

    def next_instance(self) -> None:
        addresses = self._topo.transaction
        if len(addresses) > 1:
            self._turn = (self._turn + 1) % len(addresses)
            self.tx = self._tx(addresses[self._turn])

    def close(self) -> None:
        for ch in self._channels:
            ch.close()


class Agent:
    """One worker of the normal principal in `session` of `context`."""

    def __init__(self, n: int, context: str, session: str, others: list[str], topo: Topology,
                 ledger: Ledger, rng: random.Random, stop: threading.Event) -> None:
        self.n, self.context, self.session, self.others = n, context, session, others
        self.c, self.ledger, self.rng, self.stop = Clients(topo, "agent"), ledger, rng, stop
        self.count = 0
        self.last_write_seq = 0
        # What this agent wrote that it later retires, as an agent keeps its context
        # bounded: its frames, and its inputs (observations), oldest first.
        self.frames: list[str] = []
        self.refs: list[str] = []

    def run(self) -> None:
        choices = [(self.append, 28), (self.transact, 24), (self.encode, 10),
                   (self.search, 14), (self.import_batch, 4), (self.list_pages, 6),
                   (self.message, 4), (self.audit, 1)]
        steps, weights = zip(*choices)
        try:
            while not self.stop.is_set():
                step = self.rng.choices(steps, weights)[0]
                try:
                    step()
                except MorphzError as e:
                    self.ledger.error(e, f"agent {self.n} {step.__name__}")
                    if e.reason == "UNAVAILABLE":
                        self.c.next_instance()
                    self.stop.wait(0.2)
                self.stop.wait(self.rng.uniform(0.1, 0.4))
        except ValueError:  # its channels closed under it: the soak is over
            pass

    def rid(self) -> str:
        self.count += 1
        return f"a{self.n}-{self.count}-{self.rng.getrandbits(40):x}"

    # -- writes, each until its outcome is known --------------------------------------
    def write(self, name: str, send: Callable[[], dict], record: Callable[[dict], None],
              refused: Callable[[MorphzError], None]) -> Optional[dict]:
        first = time.monotonic()
        while True:
            sent = time.monotonic()
            try:
                reply = send()
            except MorphzError as e:
                self.ledger.error(e, f"agent {self.n} {name}")
                if e.reason in UNKNOWN or e.reason in LATER:
                    if e.reason == "UNAVAILABLE":
                        self.c.next_instance()
                    if time.monotonic() - first > WRITE_GIVE_UP or self.stop.is_set():
                        with self.ledger.lock:
                            self.ledger.unsettled.append((self.context, send, record, refused))
                        return None
                    with self.ledger.lock:
                        self.ledger.resends += 1
                    time.sleep(0.3)
                    continue
                refused(e)
                return None
            self.ledger.op(name, sent)
            self.ledger.wrote(sent)
            record(reply)
            return reply

    def _acked(self, rid: str, text: str = "") -> Callable[[dict], None]:
        def record(receipt: dict) -> None:
            self.last_write_seq = max(self.last_write_seq, receipt.get("commit_seq", 0))
            if "ref" in receipt and not receipt.get("replayed"):
                self.refs.append(receipt["ref"])
            with self.ledger.lock:
                self.ledger.acked[self.context].append(
                    {"request_id": rid, "receipt": receipt, **({"text": text} if text else {})})
        return record

    def _refused(self, rid: str, text: str, kind: str) -> Callable[[MorphzError], None]:
        def refused(e: MorphzError) -> None:
            with self.ledger.lock:
                self.ledger.rejected[self.context].append(
                    {"request_id": rid, "text": text, "kind": kind, "reason": e.reason})
        return refused

    def append(self) -> None:
        rid, token = self.rid(), f"tok{self.rng.getrandbits(48):x}"
        kind = self.rng.choice(["user-message", "tool-result", "external"])
        text = f"{self.rng.choice(WORDS)} {token} {self.rng.choice(WORDS)} from agent {self.n}"
        reply = self.write("append", lambda: self.c.tx.append_event(
            self.context, self.session, kind, text, request_id=rid),
            self._acked(rid), self._refused(rid, text, "event"))
        if reply is not None and self.rng.random() < 0.5:
            self.read_own_write(token, reply)

    def message(self) -> None:
        rid = self.rid()
        target = self.rng.choice(self.others)
        text = f"note {self.rng.choice(WORDS)} for {target}"
        self.write("message", lambda: self.c.tx.append_event(
            self.context, self.session, "message", text, request_id=rid,
            target_session=target), self._acked(rid), self._refused(rid, text, "event"))

    def import_batch(self) -> None:
        items = [{"session": f"{self.session}-import", "kind": "external",
                  "text": f"imported {self.rng.choice(WORDS)} {i}", "request_id": self.rid()}
                 for i in range(20)]

        def record(reply: dict) -> None:
            for item, receipt in zip(items, reply["events"]):
                self._acked(item["request_id"])(receipt)

        def refused(e: MorphzError) -> None:
            for item in items:
                self._refused(item["request_id"], item["text"], "event")(e)
        self.write("import", lambda: self.c.tx.append_events(self.context, items),
                   record, refused)

    def transact(self) -> None:
        rid = self.rid()
        sent = time.monotonic()
        base = self.c.tx.status(self.context)["revision"]
        self.ledger.op("status", sent)
        shared = f"shared-{self.rng.randrange(SHARED_FRAMES)}"
        ops = [f"(create f-{rid} (agent {self.n}) (step {self.count}))"]
        if self.rng.random() < 0.5:
            ops.append(f"(revise {shared} (by {self.n}) (step {self.count}))")
        if self.rng.random() < 0.3:
            ops.append(f"(relate f-{rid} supports {shared})")
        retired = self.frames[:-KEPT_FRAMES] + self.refs[:-KEPT_REFS][:RETIRE_AT_ONCE]
        ops += [f"(retire {x})" for x in retired]
        reason = ' (reason "handled")' if retired else ""
        text = f"(context-tx (base-version {base}){reason} {' '.join(ops)})"
        done = self.write("commit", lambda: self.c.tx.commit(self.context, text,
                                                              request_id=rid),
                          self._acked(rid, text), self._refused(rid, text, "tx"))
        gone = set(retired)  # retired, or refused: either way not asked again
        self.frames = [f for f in self.frames if f not in gone]
        self.refs = [r for r in self.refs if r not in gone]
        if done is not None:
            self.frames.append(f"f-{rid}")

    def encode(self) -> None:
        sent = time.monotonic()
        compiled = self.limited(lambda: self.c.encoding.compile(
            self.context, self.session, budget_bytes=256 << 10))
        self.ledger.op("encode", sent)
        if compiled.get("activation"):  # delivered: its root request may retire later
            self.c.tx.deliver(self.context, compiled["activation"])

    # -- reads ------------------------------------------------------------------------
    def read_own_write(self, token: str, receipt: dict) -> None:
        mode = self.rng.choice(["lexical", "hybrid"])
        sent = time.monotonic()
        try:
            found = self.c.recall.search(self.context, token, mode=mode, limit=5,
                                         min_commit_seq=receipt["commit_seq"])
        except MorphzError as e:
            self.ledger.error(e, f"agent {self.n} search (own write)")
            return
        self.ledger.op("search", sent)
        hit = any(h["ref"] == receipt["ref"] for h in found["results"])
        with self.ledger.lock:
            self.ledger.ryw["found" if hit else "missed"] += 1
            if not hit and len(self.ledger.ryw_missed) < 20:
                self.ledger.ryw_missed.append(f"{self.context} {receipt['ref']} {mode} "
                                              f"{found.get('empty')} lag {found.get('lag')}")

    def search(self) -> None:
        mode = self.rng.choice(["lexical", "vector", "hybrid"])
        query = " ".join(self.rng.sample(WORDS, 2))
        sent = time.monotonic()
        page = self.c.recall.search(self.context, query, mode=mode, limit=5)
        self.ledger.op("search", sent)
        for _ in range(2):  # the next pages, from the first one's set
            if not page["next_cursor"]:
                break
            page = self.c.recall.search(self.context, query, mode=mode, limit=5,
                                        cursor=page["next_cursor"])

    def limited(self, call: Callable[[], dict]) -> dict:
        """An expensive call, tried again a few times while the principal's budget is
        spent (the agents share one principal, as one runtime's workers do)."""
        for attempt in range(4):
            try:
                return call()
            except MorphzError as e:
                if not e.reason.endswith("_RPC_LIMIT") or attempt == 3:
                    raise
                self.ledger.error(e, f"agent {self.n} (budget)")
                time.sleep(0.3)

    def list_pages(self) -> None:
        cursor, sent = "", time.monotonic()
        for _ in range(3):
            page = self.limited(lambda c=cursor: self.c.tx.list_frames(
                self.context, max_bytes=4096, cursor=c))
            cursor = page.get("next_cursor", "")
            if not cursor:
                break
        self.ledger.op("list", sent)

    def audit(self) -> None:
        report = self.c.tx.audit(self.context)
        with self.ledger.lock:
            self.ledger.audits["match" if report["match"] else "mismatch"] += 1
            if not report["match"]:
                self.ledger.audit_problems.append(f"{self.context}: {str(report)[:400]}")


class Abuser:
    """A principal that spends, in its own context ("abuse", filled with imported
    history at the start): audits, broad hybrid searches and big encodings without pause,
    and readers that never read a 1 MiB event (held until the server drops them). Its
    expensive calls draw on its own budgets, not the agents'."""

    def __init__(self, topo: Topology, ledger: Ledger, rng: random.Random,
                 stop: threading.Event) -> None:
        self.topo, self.ledger = topo, ledger
        self.rng, self.stop = rng, stop
        self.c = Clients(topo, "abuser")
        self.calls = Counter()
        self.big_ref = ""
        self.resting = threading.Event()  # set: the soak measures its quiet baseline

    def run(self) -> None:
        try:
            self.big_ref = self.c.tx.append_event("abuse", "s", "tool-result",
                                                  "x" * (1 << 20))["ref"]
            for k in range(10):  # a history worth auditing and searching
                self.c.tx.append_events("abuse", [
                    {"session": "history", "kind": "external",
                     "text": f"{' '.join(self.rng.sample(WORDS, 5))} {k}-{i}"}
                    for i in range(200)])
        except MorphzError as e:
            self.ledger.error(e, "abuser setup")
        stalled: list[tuple[float, StalledCall]] = []
        try:
            while not self.stop.is_set():
                if self.big_ref and (not stalled or stalled[-1][0] < time.monotonic() - 60):
                    stalled += self.stall(4)
                while stalled and stalled[0][0] < time.monotonic() - 20:
                    stalled.pop(0)[1].close()
                if self.resting.is_set():
                    self.stop.wait(0.5)
                    continue
                try:
                    self.spend()
                except MorphzError as e:
                    self.calls[f"refused {e.reason}"] += 1
                    if e.reason in ("INTERNAL", "UNKNOWN"):
                        self.ledger.error(e, "abuser")
                    self.stop.wait(0.5)
        finally:
            for _, s in stalled:
                s.close()
            self.c.close()

    def stall(self, count: int) -> list[tuple[float, StalledCall]]:
        request = tpb.GetEventRequest(context="abuse", ref=self.big_ref).SerializeToString()
        out = []
        for _ in range(count):
            try:
                out.append((time.monotonic(), StalledCall(
                    self.c.tx_address(), "/morphz.api.transaction.v1.TransactionService/"
                    "GetEvent", request, metadata=(self.topo.principals.header("abuser"),))))
                self.calls["stalled reader"] += 1
            except OSError:
                self.calls["stalled reader not connected"] += 1
        return out

    def spend(self) -> None:
        what = self.rng.choice(["audit", "search", "encode"])
        if what == "audit":
            self.c.tx.audit("abuse")
        elif what == "search":
            self.c.recall.search("abuse", " ".join(WORDS[:6]), mode="hybrid", limit=100)
        else:
            self.c.encoding.compile("abuse", "s", budget_bytes=4 << 20)
        self.calls[what] += 1

