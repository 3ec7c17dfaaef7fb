"""SEC-04: a secret (an event's text appended with --secret, a `(secret ...)` part of a
frame body) is stored as the truth but never shown, indexed, logged, traced or echoed,
unless a request explicitly reveals it. Real servers of the session's topology as child
processes (logging at DEBUG, spans exported over OTLP to a receiver here), the `morphz`
CLI run for every step (its own spans exported too); then every log line, every span
and every CLI output is scanned for the secrets' marker words."""
from __future__ import annotations

import contextlib
import io
import json
import logging
import time
from pathlib import Path

import grpc
import pytest

from morphz.api.transaction.v1 import transaction_pb2 as pb
from morphz.api.transaction.v1 import transaction_pb2_grpc as pb_grpc
from morphz.services.cli.main import main as morphz
from morphz.services.recall.client import RecallClient
from tests.integration.test_tracing import Receiver, spans_of
from tests.topology import SPLIT, ServerProcess, SplitServers

CONTEXT = "vault"
EVENT_SECRET = "quokkasecret7731"   # a word only in the secret event's text
FRAME_SECRET = "wombatsecret4419"   # a word only in the frame's secret part
MARKERS = (EVENT_SECRET, FRAME_SECRET)
HOST = "dbhostalpha"                # a word in the same frame, not secret
TX = (f'(context-tx (base-version 0) (create db (host {HOST}) '
      f'(password (secret "{FRAME_SECRET} rotate monthly"))))')
# Where a request explicitly revealed the secrets: the only outputs that may hold them.
REVEALED = ("read revealed", "frame revealed", "encode revealed", "replay revealed",
            "frame revealed text")


class Run:
    """The scenario's collected evidence: each CLI command's output (by step name) and
    exit code, the servers' log text, the exported OTLP requests, the backup file."""

    def __init__(self) -> None:
        self.outputs: dict[str, str] = {}
        self.codes: dict[str, int] = {}
        self.logs = ""
        self.exports: list = []
        self.backup: Path | None = None

    def json(self, step: str) -> dict:
        return json.loads(self.outputs[step])


@pytest.fixture(scope="module")
def receiver():
    import concurrent.futures

    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
    r = Receiver()
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(r, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield r, f"http://127.0.0.1:{port}"
    server.stop(0)


def _start(topology: str, root: Path, env: dict):
    """The servers as child processes; (them, their log files, the CLI's environment)."""
    if topology == SPLIT:
        servers = SplitServers(root, env=env).start()
        ep = servers.endpoints
        addresses = {"MORPHZ_SERVER": ep.transaction, "MORPHZ_TRANSACTION": ep.transaction,
                     "MORPHZ_RECALL": ep.recall, "MORPHZ_ENCODING": ep.encoding,
                     "MORPHZ_STORAGE": ep.storage}
        return servers, [Path(p.log_path) for p in servers.procs.values()], addresses
    proc = ServerProcess(root / "all", env, ["--storage-listen", "127.0.0.1:0"]).start()
    return proc, [Path(proc.log_path)], {
        "MORPHZ_SERVER": proc.address, "MORPHZ_TRANSACTION": proc.address,
        "MORPHZ_RECALL": proc.address, "MORPHZ_ENCODING": proc.address,
        "MORPHZ_STORAGE": proc.storage_address}


@pytest.fixture(scope="module")
def run(topology, receiver, tmp_path_factory) -> Run:
    r, endpoint = receiver
    tmp = tmp_path_factory.mktemp("secrets")
    otel = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
            "OTEL_TRACES_SAMPLER": "parentbased_always_on", "OTEL_PROPAGATORS": "tracecontext",
            "OTEL_SERVICE_NAME": "", "OTEL_RESOURCE_ATTRIBUTES": "", "OTEL_SDK_DISABLED": ""}
    servers, logs, addresses = _start(topology, tmp, dict(otel, MORPHZ_LOG_LEVEL="DEBUG"))
    out = Run()
    # This process's own log records (the CLI runs here) join the scan too.
    captured = io.StringIO()
    handler = logging.StreamHandler(captured)
    handler.setLevel(logging.DEBUG)
    root_logger = logging.getLogger()
    old_level = root_logger.level
    root_logger.addHandler(handler)
    root_logger.setLevel(logging.DEBUG)
    try:
        with pytest.MonkeyPatch.context() as mp:
            for k, v in {**otel, **addresses}.items():
                mp.setenv(k, v)

            def cli(step: str, *argv: str, ok: bool = True, fmt: str = "json") -> dict:
                buf = io.StringIO()
                with contextlib.redirect_stdout(buf):
                    code = morphz([*argv, "--format", fmt])
                out.outputs[step], out.codes[step] = buf.getvalue(), code
                assert (code == 0) == ok, (step, buf.getvalue())
                return json.loads(buf.getvalue()) if fmt == "json" else {}

            c = ("--context", CONTEXT)
            cli("create", "context", "create", CONTEXT)
            secret = cli("event", "context", "event", *c, "--session", "s1", "--kind",
                         "user-message", "--secret", "--text", f"the api key is {EVENT_SECRET}")
            cli("event plain", "context", "event", *c, "--session", "s1", "--kind",
                "user-message", "--text", "rotate the database credentials")
            (tmp / "tx").write_text(TX, encoding="utf-8")
            tx = cli("tx", "context", "tx", *c, "--file", str(tmp / "tx"))
            ref, tx_ref = secret["ref"], tx["event_ref"]
            _structured_commit(addresses["MORPHZ_TRANSACTION"])
            cli("read", "context", "read", *c, ref)
            cli("read revealed", "context", "read", *c, ref, "--reveal-secrets")
            cli("read tx", "context", "read", *c, tx_ref)
            cli("frame", "context", "frame", *c, "db")
            cli("frame revealed", "context", "frame", *c, "db", "--reveal-secrets")
            cli("frame as of", "context", "frame", *c, "db", "--at-revision", "1")
            cli("frame structured", "context", "frame", *c, "api")
            for step, argv in (("read", ("read", ref)), ("frame", ("frame", "db")),
                               ("frame revealed", ("frame", "db", "--reveal-secrets")),
                               ("search", ("recall", "search", HOST))):
                cli(f"{step} text", "context", *argv[:-1], *c, *argv[-1:], fmt="text")
            enc = cli("encode", "context", "encode", *c, "--session", "s1")
            act = enc["activation"]
            shown = cli("encode revealed", "context", "encode", *c, "--session", "s1",
                        "--activation", act, "--reveal-secrets")
            cli("encode child", "context", "encode", *c, "--session", "s1", "--activation",
                act, "--parent", enc["snapshot"], "--reveal-secrets", ok=False)
            cli("show", "context", "encoding", *c, "show", enc["snapshot"])
            cli("replay", "context", "encoding", *c, "replay", enc["snapshot"])
            cli("replay revealed", "context", "encoding", *c, "replay", shown["snapshot"])
            cli("check", "context", "encoding", *c, "check", shown["snapshot"])
            _caught_up(addresses["MORPHZ_RECALL"])
            # Lexical: a secret's words are in no index term. (Hybrid would also list the
            # vector leg's nearest neighbours, texts embedded with the secret redacted.)
            for word in (EVENT_SECRET, FRAME_SECRET, HOST, "credentials"):
                cli(f"search {word}", "context", "recall", "search", *c, word,
                    "--mode", "lexical")
            # A rebuilt index (the rebuild's own path over stored rows) holds no secret either.
            cli("index rebuild", "context", "recall-index", "rebuild", CONTEXT)
            for word in (EVENT_SECRET, FRAME_SECRET, HOST):
                cli(f"rebuilt search {word}", "context", "recall", "search", *c, word,
                    "--mode", "lexical")
            cli("recall read", "context", "recall", "read", *c, ref)
            cli("recall read frame", "context", "recall", "read", *c, "db")
            cli("recall frame", "context", "recall", "frame", *c, "db", "--include-events",
                "--include-bodies")
            cli("recall for evaluation", "context", "recall", "search", *c, HOST,
                "--for-session", "s1", "--activation", act)
            cli("audit", "context", "audit", *c)
            cli("rebuild", "context", "rebuild-projections", *c)
            cli("status", "context", "status", *c)
            # Error paths that echo what was sent: a secret part where a frame id belongs.
            (tmp / "bad").write_text(f'(context-tx (base-version 1) (create (secret '
                                     f'"{FRAME_SECRET}")))', encoding="utf-8")
            cli("tx echo", "context", "tx", *c, "--file", str(tmp / "bad"), ok=False)
            (tmp / "bad2").write_text(f'(context-tx (base-version 1) ((secret '
                                      f'"{FRAME_SECRET}")))', encoding="utf-8")
            cli("tx echo list", "context", "tx", *c, "--file", str(tmp / "bad2"), ok=False)
            out.backup = tmp / "backup.tar"
            cli("backup", "backup", "--to", str(out.backup), "--server",
                addresses["MORPHZ_STORAGE"])
    finally:
        root_logger.removeHandler(handler)
        root_logger.setLevel(old_level)
        if topology == SPLIT:
            servers.stop()  # SIGTERM: each process exports the spans it holds
        else:
            assert servers.stop() == 0, servers.stderr()
    out.logs = captured.getvalue() + "".join(p.read_text(encoding="utf-8", errors="replace")
                                             for p in logs)
    out.exports = r.requests()
    return out


def _structured_commit(address: str) -> None:
    """A frame whose secret part comes in a structured op's body (the protobuf form)."""
    body = f'(url "https://api.example") (token (secret "{FRAME_SECRET}"))'
    tx = pb.Transaction(base_version=1, ops=[pb.Op(create=pb.FrameBody(frame_id="api",
                                                                       body=body))])
    with grpc.insecure_channel(address) as ch:
        pb_grpc.TransactionServiceStub(ch).Commit(
            pb.CommitRequest(context=CONTEXT, structured=tx), timeout=30)


def _caught_up(address: str) -> None:
    with grpc.insecure_channel(address) as ch:
        recall = RecallClient(ch, timeout=30)
        for _ in range(600):
            if recall.inspect(CONTEXT)["lag"] == 0:
                return
            time.sleep(0.02)
    raise AssertionError("recall did not catch up")


def test_SEC_04_secret_is_stored_and_revealed_only_on_request(run):
    read, revealed = run.json("read"), run.json("read revealed")
    assert read["secret"] and read["text"] == f"[secret {read['ref']}]"
    assert revealed["text"] == f"the api key is {EVENT_SECRET}"
    frame, frame_revealed = run.json("frame"), run.json("frame revealed")
    assert frame["secret"] and frame["body"] == f'(host {HOST}) (password "[secret db]")'
    assert f'(secret "{FRAME_SECRET} rotate monthly")' in frame_revealed["body"]
    assert run.json("frame as of")["body"] == frame["body"]
    assert run.json("frame structured")["body"] == \
        '(url "https://api.example") (token "[secret api]")'
    assert "secret: yes" in run.outputs["frame text"]
    assert "[secret @e1]" in run.outputs["read text"]
    # The transaction event holds the body as written; its text shows the part redacted.
    assert '(password "[secret db]")' in run.json("read tx")["text"]


def test_SEC_04_encoding_shows_secrets_only_when_the_scope_reveals_them(run):
    enc, shown = run.json("encode"), run.json("encode revealed")
    assert "[secret @e1]" in enc["text"] and '"[secret db]"' in enc["text"]
    assert EVENT_SECRET in shown["text"] and FRAME_SECRET in shown["text"]
    assert "(secrets revealed)" in shown["text"] and "(secrets" not in enc["text"]
    # A child scope may not reveal what its parent did not.
    assert run.json("encode child")["error"]["reason"] == "SCOPE_VIOLATION"
    # Each snapshot replays to its own bytes (the scope is part of the record).
    assert run.json("replay")["match"] and run.json("replay revealed")["match"]
    assert run.json("replay revealed")["text"] == shown["text"]


def test_SEC_04_recall_does_not_index_or_preview_secret_text(run):
    for word in MARKERS:
        assert run.json(f"search {word}")["results"] == [], word
        assert run.json(f"rebuilt search {word}")["results"] == [], word
    assert run.json(f"rebuilt search {HOST}")["results"]
    hits = run.json(f"search {HOST}")["results"]
    assert {h["id"] for h in hits if h["kind"] == "frame"} == {"db"}
    assert any(h["kind"] == "event" for h in hits)  # the transaction that created it
    assert run.json("search credentials")["results"]  # the plain event
    assert run.json("recall read")["text"] == "[secret @e1]"
    assert run.json("recall read frame")["text"] == f'(host {HOST}) (password "[secret db]")'


def test_SEC_04_audit_replays_the_stored_truth(run):
    audit = run.json("audit")
    assert audit["match"] and audit["chain"]["match"], audit
    assert run.json("rebuild")["rewritten"] == {}


def test_SEC_04_errors_echo_a_redacted_form(run):
    err = run.json("tx echo")["error"]
    assert err["reason"] == "TX_INVALID" and "[secret]" in err["message"], err
    assert "[secret]" in run.json("tx echo list")["error"]["message"]


def test_SEC_04_backup_holds_the_truth_and_is_sensitive(run):
    # A backup is a byte copy of the store: the secret is in it (documented).
    data = run.backup.read_bytes()
    assert EVENT_SECRET.encode() in data and FRAME_SECRET.encode() in data


def test_SEC_04_no_secret_in_logs_spans_or_outputs(run):
    for step in REVEALED:
        assert any(m in run.outputs[step] for m in MARKERS), step  # the scan can see them
    assert "DEBUG morphz.rpc" in run.logs and "answered TX_INVALID" in run.logs
    assert spans_of(run.exports)
    for marker in MARKERS:
        assert marker not in run.logs, marker
        for request in run.exports:
            assert marker.encode() not in request.SerializeToString(), marker
        for step, text in run.outputs.items():
            if step not in REVEALED:
                assert marker not in text, (step, marker)
