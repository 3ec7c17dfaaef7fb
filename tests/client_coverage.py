"""The clients' RPC coverage walk (test_client_coverage.py): a recording proxy in front of
each public service of a real server, the Python client's steps (one per public method
of morphz.client.Client; the TypeScript client's are clients/typescript/test/coverage.ts),
and the table of which method reaches which RPC, as docs/clients.md shows it."""
from __future__ import annotations

import os
import threading
from typing import Callable


from morphz.api.encoding.v1 import encoding_pb2
from morphz.api.recall.v1 import recall_pb2
from morphz.api.transaction.v1 import transaction_pb2
from morphz.client import Client, Evaluation, Tx  # noqa: F401 (Evaluation: the steps' type)

from tests.conformance_proxy import Fault

SERVICES = [transaction_pb2.DESCRIPTOR.services_by_name["TransactionService"],
            recall_pb2.DESCRIPTOR.services_by_name["RecallService"],
            encoding_pb2.DESCRIPTOR.services_by_name["EncodingService"]]
START, END = "<!-- coverage table: start -->", "<!-- coverage table: end -->"


def public_rpcs() -> list[str]:
    """Every RPC of the public services, as `Service.Method`, in the protos' order."""
    return [f"{s.name}.{m.name}" for s in SERVICES for m in s.methods]


class Recorder(Fault):
    """Forwards every call unchanged and notes each one the server answered."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: list[str] = []

    def call(self, method: str, request: bytes, forward) -> bytes:
        reply = forward(method, request)
        service, name = method.strip("/").split("/")
        with self._lock:
            self._seen.append(f"{service.rsplit('.', 1)[-1]}.{name}")
        return reply

    def take(self) -> list[str]:
        with self._lock:
            seen, self._seen = self._seen, []
        return seen


def python_steps(mz: Client, ctx: str) -> dict[str, Callable[[], object]]:
    """One step per public method of Client, in an order that gives each what it needs."""
    state: dict[str, str] = {}

    def append_event():
        state["secret"] = mz.append_event(ctx, session="main", kind="user-message",
                                          text="ship v1 (key sk-cov)", secret=True).ref

    def activate():
        state["act"] = mz.activate(ctx, session="main").id

    def record_action():
        state["call"] = mz.record_action(ctx, session="main", activation=state["act"],
                                         text="run: npm test").ref

    def compile_():
        enc = mz.compile(ctx, session="main")
        state["snapshot"], state["evaluation"] = enc.snapshot, enc.activation

    def start_job():
        state["tx_job"] = mz.start_job(ctx, "audit").id
        state["recall_job"] = mz.start_job(ctx, "rebuild-index").id

    snap = lambda: state["snapshot"]  # noqa: E731
    return {
        "create_context": lambda: mz.create_context(ctx),
        "status": lambda: mz.status(ctx),
        "append_event": append_event,
        "append_events": lambda: mz.append_events(ctx, [
            {"session": "main", "kind": "tool-result", "text": "tests passed"},
            {"session": "side", "kind": "user-message", "text": "hello from side"}]),
        "send_message": lambda: mz.send_message(ctx, session="main", to="side",
                                                text="release soon"),
        "activate": activate,
        "record_action": record_action,
        "tool_result": lambda: mz.tool_result(ctx, call=state["call"], text="npm test: ok"),
        "event": lambda: mz.event(ctx, state["secret"], reveal_secrets=True),
        "commit": lambda: mz.commit(ctx, Tx(0).create("release", "(goal ship-v1)"),
                                    session="main", activation=state["act"]),
        "frame": lambda: mz.frame(ctx, "release"),
        "frames": lambda: mz.frames(ctx),
        "frame_pages": lambda: list(mz.frame_pages(ctx)),
        "deliver": lambda: mz.deliver(ctx, state["act"]),
        "grant": lambda: mz.grant(ctx, "dave", ["read"]),
        "revoke": lambda: mz.revoke(ctx, "dave", ["read"]),
        "policy": lambda: mz.policy(ctx),
        "set_retention": lambda: mz.set_retention(
            ctx, "(retention (kinds tool-result) (days 30))"),
        "contexts": lambda: mz.contexts(),
        "search": lambda: mz.search(ctx, "release"),
        "read": lambda: mz.read(ctx, "release"),
        "traverse": lambda: mz.traverse(ctx, "release"),
        "walk": lambda: list(mz.walk(ctx, "release")),
        "inspect_index": lambda: mz.inspect_index(ctx),
        "rebuild_index": lambda: mz.rebuild_index(ctx),
        "compile": compile_,
        "show_snapshot": lambda: mz.show_snapshot(ctx, snap()),
        "replay_snapshot": lambda: mz.replay_snapshot(ctx, snap()),
        "check_snapshot": lambda: mz.check_snapshot(ctx, snap()),
        "read_snapshot": lambda: mz.read_snapshot(ctx, snap(), "release"),
        "search_snapshot": lambda: mz.search_snapshot(ctx, snap(), "release"),
        "list_snapshots": lambda: mz.list_snapshots(ctx, session="main"),
        "snapshot_pages": lambda: list(mz.snapshot_pages(ctx, limit=1)),
        "evaluation": lambda: mz.evaluation(ctx, state["evaluation"]),
        "audit": lambda: mz.audit(ctx),
        "rebuild_projections": lambda: mz.rebuild_projections(ctx),
        "start_job": start_job,
        "job": lambda: (mz.job(state["tx_job"]), mz.job(state["recall_job"])),
        "jobs": lambda: mz.jobs(ctx),
        "cancel_job": lambda: (mz.cancel_job(state["tx_job"]),
                               mz.cancel_job(state["recall_job"])),
        "export": lambda: list(mz.export(ctx)),
        "erase": lambda: mz.erase(ctx, refs=[state["secret"]], reason="coverage walk"),
        "delete_context": lambda: mz.delete_context(ctx, reason="coverage walk"),
        "close": lambda: mz.close(),
    }


def table(python: dict[str, list[str]], typescript: dict[str, list[str]]) -> str:
    """The markdown table: each public RPC, and the methods of each client that reach it
    (`python`/`typescript`: method -> the RPCs it sent); then the methods that send none."""
    def reaching(walk: dict[str, list[str]], rpc: str) -> str:
        names = [m for m, sent in walk.items() if rpc in sent]
        return ", ".join(f"`{m}`" for m in names) or "—"
    lines = ["| RPC | Python `morphz.client.Client` | TypeScript `Client` |",
             "| --- | --- | --- |"]
    lines += [f"| `{rpc}` | {reaching(python, rpc)} | {reaching(typescript, rpc)} |"
              for rpc in public_rpcs()]
    local = lambda walk: ", ".join(f"`{m}`" for m, sent in walk.items() if not sent)  # noqa
    lines += ["", f"Methods that send no RPC: Python {local(python) or 'none'}; "
              f"TypeScript {local(typescript) or 'none'}."]
    return "\n".join(lines)


def docs_table(path: str) -> str:
    text = open(path, encoding="utf-8").read()
    return text.split(START, 1)[1].split(END, 1)[0].strip()


def write_docs_table(path: str, generated: str) -> None:
    text = open(path, encoding="utf-8").read()
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"{head}{START}\n{generated}\n{END}{tail}")


UPDATE = os.environ.get("MORPHZ_UPDATE_DOCS") == "1"
