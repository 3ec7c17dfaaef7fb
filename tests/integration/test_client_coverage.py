"""Both clients cover the same API: each public method of the Python client
(morphz.client.Client) and of the TypeScript client (clients/typescript) is called against
the session's real server through a recording proxy per service (tests/client_coverage.py),
one method at a time, so each RPC the server answered is tied to the methods that sent it.
Every public RPC is reached by both; the table of which method reaches which RPC is
generated here and must be docs/clients.md's (MORPHZ_UPDATE_DOCS=1 writes it there)."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from morphz.client import Client, Credentials

from tests import client_coverage as cov
from tests.conformance_proxy import Proxy
from tests.typescript import PACKAGE, build

DOCS = Path(__file__).resolve().parents[2] / "docs" / "clients.md"
STEP_BOUND = 120  # seconds a step of the TypeScript walk may take (a rebuild, loaded)


def _proxies(endpoints) -> tuple[dict[str, str], list[Proxy], cov.Recorder]:
    """A recording proxy per service address: service -> the proxy's address."""
    recorder = cov.Recorder()
    by_backend: dict[str, Proxy] = {}
    for address in {endpoints.transaction, endpoints.recall, endpoints.encoding}:
        by_backend[address] = Proxy(address, recorder).start()
    return ({s: by_backend[getattr(endpoints, s)].address
             for s in ("transaction", "recall", "encoding")},
            list(by_backend.values()), recorder)


def _python_walk(address: dict[str, str], recorder: cov.Recorder) -> dict[str, list[str]]:
    mz = Client(address["transaction"], recall=address["recall"],
                encoding=address["encoding"], credentials=Credentials(), timeout=60)
    steps = cov.python_steps(mz, "cov-py")
    public = {n for n, f in vars(Client).items() if callable(f) and not n.startswith("_")}
    assert set(steps) == public, "a step for every public method of Client"
    walk = {}
    recorder.take()
    for name, step in steps.items():
        step()
        walk[name] = recorder.take()
    return walk


def _typescript_public() -> set[str]:
    """The public methods of the built Client, from its declaration file."""
    text = (PACKAGE / "dist" / "src" / "client.d.ts").read_text()
    body = text.split("export declare class Client {", 1)[1].split("\n}", 1)[0]
    return set(re.findall(r"^    (?!private )(\w+)\(", body, re.MULTILINE)) - {"constructor"}


def _typescript_walk(address: dict[str, str], recorder: cov.Recorder) -> dict[str, list[str]]:
    proc = subprocess.Popen(
        ["node", str(PACKAGE / "dist" / "test" / "coverage.js"), address["transaction"],
         address["recall"], address["encoding"]], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    try:
        steps = json.loads(proc.stdout.readline())
        assert set(steps) == _typescript_public(), "a step for every public method of Client"
        walk = {}
        recorder.take()
        for name in steps:
            proc.stdin.write(name + "\n")
            proc.stdin.flush()
            answer = proc.stdout.readline().strip()
            assert answer == f"ok {name}", (answer, proc.stderr.read() if not answer else "")
            walk[name] = recorder.take()
        proc.stdin.close()
        assert proc.wait(timeout=STEP_BOUND) == 0
        return walk
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_both_clients_reach_every_public_rpc_and_docs_clients_md_holds_their_table(
        endpoints):
    build()  # the TypeScript client, as test_typescript_client builds it
    address, proxies, recorder = _proxies(endpoints)
    try:
        python = _python_walk(address, recorder)
        typescript = _typescript_walk(address, recorder)
    finally:
        for p in proxies:
            p.stop()
    everything = set(cov.public_rpcs())
    reached_py = {rpc for sent in python.values() for rpc in sent}
    reached_ts = {rpc for sent in typescript.values() for rpc in sent}
    assert reached_py == everything, sorted(everything - reached_py)
    assert reached_ts == everything, sorted(everything - reached_ts)
    camel = lambda name: re.sub(r"_(\w)", lambda m: m.group(1).upper(), name)  # noqa: E731
    for rpc in everything:  # the same methods reach each RPC, in each one's spelling
        assert {camel(m) for m, sent in python.items() if rpc in sent} == \
            {m for m, sent in typescript.items() if rpc in sent}, rpc
    generated = cov.table(python, typescript)
    if cov.UPDATE:
        cov.write_docs_table(str(DOCS), generated)
    assert cov.docs_table(str(DOCS)) == generated, \
        "docs/clients.md's table is not the generated one: rerun with MORPHZ_UPDATE_DOCS=1"
