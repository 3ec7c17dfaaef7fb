"""Encoding snapshots belong to the encoding service: written beside the Mind without
moving its version, and read back checked, so a record that is not what the service
writes (stored by an older server's RecordSnapshot, which took any JSON, or damaged
since) is SNAPSHOT_CORRUPT on every RPC that reads it, never INTERNAL (SEC-03).
Real server, real gRPC, real LMDB; bad records go in through the storage service."""
from __future__ import annotations

import json

import grpc
import pytest

from morphz.services.encoding.client import EncodingClient
from morphz.shared.errors import MorphzError
from tests.unit.test_encoding_snapshot import schema_1_body


@pytest.fixture(scope="module")
def enc(endpoints):
    channel = grpc.insecure_channel(endpoints.encoding)
    yield EncodingClient(channel, timeout=30)
    channel.close()


@pytest.fixture(scope="module")
def good(client, enc, storage):
    """One context with a real snapshot: its id and its stored record."""
    ctx = "sec-03-snapshots"
    client.create_context(ctx)
    client.append_event(ctx, "s1", "user-message", "ship v1 once the tests pass")
    client.commit(ctx, "(context-tx (base-version 0) (create release (goal ship-v1)))")
    e = enc.compile(ctx, "s1")
    with storage.reader(ctx) as r:
        head, body = r.get("snapshots", (e["snapshot"],)).split(b"\n")
    return {"context": ctx, "snapshot": e["snapshot"], "stored": json.loads(head),
            "body": json.loads(body)}


def _record(good: dict, sid: str, **head) -> bytes:
    """A record of one line, its body as text under "packed" (as records were stored
    before bodies followed their heads): readers still read this form."""
    return json.dumps(dict(good["stored"], id=sid,
                           **{"packed": json.dumps(good["body"]), **head})).encode()


def _packed(good: dict, sid: str, change) -> bytes:
    """The stored form a compile writes (its head line, then its body), body changed."""
    body = json.loads(json.dumps(good["body"]))
    change(body)
    return _two_lines(good, sid, json.dumps(body).encode())


def _two_lines(good: dict, sid: str, body: bytes) -> bytes:
    return json.dumps(dict(good["stored"], id=sid)).encode() + b"\n" + body


def _set(path: list, value):
    def change(body: dict) -> None:
        node = body
        for p in path[:-1]:
            node = node[p]
        node[path[-1]] = value
    return change


# The RPCs that must refuse a record, by where it is wrong: its head (what every reader
# uses), its packed body (which a scoped read and a compile narrowing the scope never
# unpack), or only in what replaying it looks up in the store.
EVERY = ("show", "replay", "check", "search", "read", "compile-narrowing-it")
HEAD, BODY, LOOKUP = EVERY, EVERY[:4], EVERY[1:4]
RECORDS = {
    "not-json": (HEAD, lambda g, sid: b'{"schema": 1,'),
    "not-utf8": (HEAD, lambda g, sid: b"\xff\xfe{}"),
    "null": (HEAD, lambda g, sid: b"null"),
    "array": (HEAD, lambda g, sid: b"[]"),
    "nested-100k": (HEAD, lambda g, sid: b"[" * 100_000 + b"]" * 100_000),
    "session-not-text": (HEAD, lambda g, sid: _record(g, sid, session=7)),
    "scope-not-object": (HEAD, lambda g, sid: _record(g, sid, scope=[1, 2])),
    "scope-time-without-offset": (HEAD, lambda g, sid: _record(
        g, sid, scope=dict(g["stored"]["scope"], since="2026-01-01T00:00:00"))),
    "budget-zero": (HEAD, lambda g, sid: _record(
        g, sid, budget=dict(g["stored"]["budget"], bytes=0))),
    "lone-surrogate": (HEAD, lambda g, sid: _record(g, sid, hash="\ud800")),
    "unknown-field": (HEAD, lambda g, sid: _record(g, sid, extra={"a": [[[[]]]]})),
    "names-another-snapshot": (HEAD, lambda g, sid: json.dumps(g["stored"]).encode()),
    "session-not-a-name": (HEAD, lambda g, sid: _record(g, sid, session="s1\x00")),
    "packed-nested-100k": (BODY, lambda g, sid: _record(g, sid, packed="[" * 100_000)),
    "body-line-not-json": (BODY, lambda g, sid: _two_lines(g, sid, b'{"inputs": [')),
    "body-line-not-utf8": (HEAD, lambda g, sid: _two_lines(g, sid, b"\xff")),
    "body-line-and-packed": (HEAD, lambda g, sid: _two_lines(g, sid, b"{}").replace(
        b"}\n", b', "packed": "{}"}\n', 1)),
    "packed-rows-short": (BODY, lambda g, sid: _packed(g, sid, _set(["item_rows", 0], [1]))),
    "frame-revision-text": (BODY, lambda g, sid: _packed(
        g, sid, _set(["inputs", "frames", 0, "revision"], "one"))),
    "observation-ref-not-a-ref": (BODY, lambda g, sid: _packed(
        g, sid, _set(["inputs", "observations", 0, "ref"], "e1"))),
    "inputs-missing": (BODY, lambda g, sid: _packed(g, sid, lambda b: b.pop("inputs"))),
    # Fits a key alone, not under the context and beside a revision: the store says so.
    "frame-id-no-store-can-key": (LOOKUP, lambda g, sid: _packed(
        g, sid, _set(["inputs", "frames", 0, "id"], "f" * 470))),
    "relation-of-two": (BODY, lambda g, sid: _packed(
        g, sid, _set(["inputs", "relations"], [["a", "b"]]))),
}


def _readers(enc: EncodingClient, ctx: str, sid: str) -> dict:
    """Every RPC that reads a snapshot record (EVERY), each as a call."""
    return {"show": lambda: enc.show(ctx, sid), "replay": lambda: enc.replay(ctx, sid),
            "check": lambda: enc.check(ctx, sid), "search": lambda: enc.search(ctx, sid, "v1"),
            "read": lambda: enc.read(ctx, sid, "release"),
            "compile-narrowing-it": lambda: enc.compile(ctx, "s1", parent_snapshot=sid)}


@pytest.mark.parametrize("kind", list(RECORDS))
def test_sec_03_a_corrupt_snapshot_record_is_snapshot_corrupt_on_every_rpc_reading_it(
        kind, good, enc, storage):
    refusing, make = RECORDS[kind]
    sid = f"bad-{kind}"
    storage.put_record(good["context"], "snapshots", (sid,), make(good, sid))
    failed = {}
    for rpc, attempt in _readers(enc, good["context"], sid).items():
        try:
            attempt()
        except MorphzError as e:
            failed[rpc] = (e.reason, e.to_dict()["code"], e.details.get("snapshot"))
    assert failed == {rpc: ("SNAPSHOT_CORRUPT", "DATA_LOSS", sid) for rpc in refusing}, failed
    # The server keeps serving, and the good snapshot still replays.
    assert enc.replay(good["context"], good["snapshot"])["match"]


def test_sec_03_the_record_a_compile_writes_reads_back_on_every_rpc(good, enc, storage):
    """The reference for the test above: the same RPCs on the record as written, and on
    it in the one-line form records had before; an id naming nothing (one too long to be
    a storage key included) is not found on each."""
    storage.put_record(good["context"], "snapshots", ("one-line",),
                       _record(good, "one-line"))
    for sid in (good["snapshot"], "one-line"):
        for rpc, attempt in _readers(enc, good["context"], sid).items():
            assert attempt(), (rpc, sid)
    assert enc.replay(good["context"], "one-line")["match"]
    for sid in ("enc-missing", "\U0001f600" * 128):
        for rpc, attempt in _readers(enc, good["context"], sid).items():
            with pytest.raises(MorphzError) as e:
                attempt()
            assert e.value.reason == "SNAPSHOT_NOT_FOUND", (rpc, sid[:8])


def test_a_compile_writes_its_snapshot_without_moving_the_context_version(client, enc,
                                                                          storage):
    """A snapshot is a side record: the compile of an already claimed activation moves
    nothing a transaction is computed on, so none in flight goes stale over it."""
    ctx = "snapshot-beside-the-mind"
    client.create_context(ctx)
    client.append_event(ctx, "s1", "user-message", "hello")
    act = client.activate(ctx, "s1")
    with storage.reader(ctx) as r:
        before = r.commit_seq
    e = enc.compile(ctx, "s1", activation=act["id"])
    with storage.reader(ctx) as r:
        assert r.commit_seq == before
        assert r.get("snapshots", (e["snapshot"],)) is not None
    assert enc.show(ctx, e["snapshot"])["hash"] == e["hash"]


def test_asm_03_a_record_of_schema_1_reads_and_replays_and_a_newer_schema_is_invalid(
        good, enc, storage):
    """Schema 1 stored every item as one row of absolute offsets; a server of schema 2
    reads such a record on every RPC as it was written, and replays it byte for byte. A
    record of a schema it does not know is SNAPSHOT_INVALID, not corrupt."""
    ctx = good["context"]
    record = enc.show(ctx, good["snapshot"])
    body = schema_1_body(good["body"], record["items"])
    old = json.dumps(dict(good["stored"], id="schema-1", schema=1)).encode() + b"\n" + \
        json.dumps(body).encode()
    storage.put_record(ctx, "snapshots", ("schema-1",), old)
    for rpc, attempt in _readers(enc, ctx, "schema-1").items():
        assert attempt(), rpc
    shown = enc.show(ctx, "schema-1")
    assert shown["items"] == record["items"] and shown["schema"] == 1
    assert enc.replay(ctx, "schema-1")["match"]
    # A newer schema, and one past any schema (4,000 digits), which the error never echoes.
    for sid, schema in (("schema-3", b"3"), ("schema-huge", b"9" * 4000)):
        newer = _two_lines(good, sid, json.dumps(good["body"]).encode()).replace(
            b'"schema": 2', b'"schema": ' + schema, 1)
        assert b'"schema": ' + schema in newer
        storage.put_record(ctx, "snapshots", (sid,), newer)
        for rpc, attempt in _readers(enc, ctx, sid).items():
            with pytest.raises(MorphzError) as e:
                attempt()
            assert e.value.reason == "SNAPSHOT_INVALID", (rpc, sid)
            assert len(e.value.message) < 300, (rpc, sid)
