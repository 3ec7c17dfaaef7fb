"""The stops of a commit and of a hybrid search: the Morphz functions on the stack when a
commit reaches LMDB's write, and when a hybrid search reaches tantivy's searcher; and how
many distinct Morphz functions each call enters (issue 56's evidence of the layers).

    .venv/bin/python scripts/benchmarks/_stops.py [--json FILE]

Run with a checkout's own Python from its root, so it measures that checkout's code: an
all-in-one server in this process (LMDB, hashing embedder), one context with 50 events,
then one commit and one hybrid search through real gRPC, each traced by a profile hook
on the server's threads."""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading

import grpc
import lmdb
import tantivy

from morphz.services.recall.client import RecallClient
from morphz.services.server.app import AllInOne, ServerConfig
from morphz.services.transaction.client import TransactionClient

import os

ROOT = os.getcwd().replace("\\", "/").rstrip("/") + "/"  # the checkout, its code at services/, shared/


# The C types whose first method call ends the walk: LMDB's write transaction (a commit's
# write), tantivy's searcher (a search's index lookup).
TARGETS = {"lmdb": (lmdb.Transaction,), "tantivy": (tantivy.Searcher,)}


class Tracer:
    """Records the Morphz frames entered while armed, and the Morphz stack at the first
    call into the C function named by `target` (module prefix)."""

    def __init__(self) -> None:
        self.target, self.entered, self.stack, self.thread, self.begun = "", {}, None, 0, 0

    def arm(self, target: str) -> None:
        self.target, self.entered, self.stack, self.thread = target, {}, None, 0
        self.begun = 0  # LMDB transactions begun (read or write) during the call

    def mine(self) -> list[str]:
        """The functions entered by the thread that reached the store (the caller's: other
        threads, the index followers among them, run at the same time)."""
        return sorted(self.entered.get(self.thread, ()))

    def hook(self, frame, event, arg) -> None:
        if not self.target:
            return
        if event == "call":
            where = _where(frame)
            if where:
                self.entered.setdefault(threading.get_ident(), set()).add(where)
        elif event == "c_call":
            owner = type(getattr(arg, "__self__", None))
            if owner is lmdb.Environment and getattr(arg, "__name__", "") == "begin":
                self.begun += 1
            if self.stack is None and owner in TARGETS[self.target]:
                stack, f = [], frame
                while f is not None:
                    where = _where(f)
                    if where:
                        stack.append(where)
                    f = f.f_back
                self.stack, self.thread = stack[::-1], threading.get_ident()


def _where(frame) -> str:
    path = frame.f_code.co_filename.replace("\\", "/")
    if not path.startswith(ROOT):
        return ""
    rel = path[len(ROOT):]
    if not rel.startswith(("services/", "shared/")):
        return ""
    return f"{rel}:{getattr(frame.f_code, 'co_qualname', frame.f_code.co_name)}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    tracer = Tracer()
    threading.setprofile(tracer.hook)
    server = AllInOne(ServerConfig(tempfile.mkdtemp(), "127.0.0.1:0", embedder="hashing",
                                   recall_idle_seconds=0)).start()
    channel = grpc.insecure_channel(server.address)
    tx, recall = TransactionClient(channel), RecallClient(channel)
    try:
        tx.create_context("c")
        for i in range(50):
            tx.append_event("c", "main", "user-message", f"note {i} about the lantern {i % 7}")
        base = tx.commit("c", "(context-tx (base-version 0) (create f1 (v 1)))")["revision"]
        recall.search("c", "lantern", mode="hybrid")  # warm: indexes caught up, caches
        out = {}
        tracer.arm("lmdb")
        tx.commit("c", f"(context-tx (base-version {base}) (revise f1 (v 2)))")
        out["commit"] = {"stack": tracer.stack, "entered": tracer.mine(),
                         "lmdb_transactions": tracer.begun}
        tracer.arm("tantivy")
        recall.search("c", "lantern", mode="hybrid")
        out["hybrid_search"] = {"stack": tracer.stack, "entered": tracer.mine(),
                                "lmdb_transactions": tracer.begun}
        tracer.arm("")
    finally:
        channel.close()
        server.stop(grace=1)
    for name, got in out.items():
        stack = got["stack"] or []
        files = {s.split(":")[0] for s in stack}
        entered_files = {s.split(":")[0] for s in got["entered"]}
        print(f"{name}: {len(stack)} Morphz frames in {len(files)} files on the stack at the "
              f"store ({'lmdb' if name == 'commit' else 'tantivy'}); {len(got['entered'])} "
              f"distinct Morphz functions entered in {len(entered_files)} files; "
              f"{got['lmdb_transactions']} LMDB transactions begun")
        for s in stack:
            print(f"  {s}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
