"""MCP-01 and MCP-02: `morphz mcp` reached with the MCP SDK's own client, over stdio and
over streamable HTTP (each test runs on both), in front of a real `morphz serve` that
authenticates bearer tokens over TLS (tests/security_servers.py's token_server).

Principals (tests/security_servers.py): alice creates each test's context (its admin:
every right, reveal included); erin is granted read, write, recall and encode but not
reveal; carol has no grant at all. The HTTP `morphz mcp` runs with root's token (a
server-wide admin) in its own environment, so a caller refused there proves the server
acts as the caller's token, never as its own."""
from __future__ import annotations

import itertools
import json
from typing import Callable

import anyio
import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from morphz.client import Client, Credentials

from tests.mcp_clients import HTTP, STDIO, HttpMcp, http_session, stdio_session
from tests.security_servers import TOKENS, in_process_too
from tests.topology import BOUND

pytestmark = in_process_too  # starts `morphz mcp` processes of its own
_names = itertools.count(1)
TOOLS = {  # the tools: name -> (properties, required), for a server bound to a context
    "morphz_observe": ({"text", "kind", "secret", "occurred_at"}, ["text"]),
    "morphz_recall_search": ({"query", "mode", "since", "until", "limit", "cursor"}, None),
    "morphz_recall_read": ({"ref", "offset", "limit"}, ["ref"]),
    "morphz_recall_traverse": ({"frame", "direction", "depth", "include_events", "cursor"},
                               ["frame"]),
    "morphz_frames": ({"cursor", "reveal_secrets"}, None),
    "morphz_frame": ({"id", "at_revision", "reveal_secrets"}, ["id"]),
    "morphz_transact": ({"tx", "activation"}, ["tx"]),
    "morphz_encoding": ({"budget_bytes", "budget_tokens", "preview_bytes", "must_read",
                         "cursor"}, None),
    "morphz_status": (set(), None),
}
USER_REQUEST = "Ship v1 once the regression tests pass."
TEST_REPORT = "regression suite: 120 passed, 0 failed"
RELEASE_TX = """(context-tx
  (base-version 1)
  (reason "测试结果已吸收，继续准备发布")
  (derive test-result (from {report}) (tests passed))
  (revise release (goal ship-v1) (stage packaging))
  (relate test-result supports release)
  (retire {report}))"""
SMALL_LIMIT = 2048  # MCP-02's --max-output-bytes


# -- fixtures -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def morphz_flags(token_server, certs) -> list[str]:
    return ["--server", token_server.address, "--tls-ca", certs.path("ca.crt")]


@pytest.fixture(scope="module")
def http_servers(morphz_flags, tmp_path_factory, token_server):
    """`morphz mcp --transport http` by output limit (None: the default), started once."""
    import os
    started: dict = {}
    log = tmp_path_factory.mktemp("mcp-http") / "stderr.log"
    env = dict(os.environ, PYTHONUNBUFFERED="1", MORPHZ_TOKEN=TOKENS["root"])

    def get(limit):
        if limit not in started:
            flags = morphz_flags + (["--max-output-bytes", str(limit)] if limit else [])
            started[limit] = HttpMcp(flags, env, log)
        return started[limit]
    yield get
    for server in started.values():
        server.stop()


@pytest.fixture(params=[STDIO, HTTP])
def mcp_open(request, morphz_flags, http_servers, tmp_path) -> Callable:
    """open(principal, context, limit=None): an async context manager giving an Mcp
    session acting as that principal, over this test's transport."""
    transport = request.param

    def open_(principal: str, context: str, limit=None):
        if transport == HTTP:
            return http_session(http_servers(limit).url, TOKENS[principal], context)
        flags = morphz_flags + (["--max-output-bytes", str(limit)] if limit else [])
        errlog = open(tmp_path / f"stdio-{principal}.log", "a")
        request.addfinalizer(errlog.close)
        return stdio_session(flags, {"MORPHZ_TOKEN": TOKENS[principal]}, context, errlog)
    open_.transport = transport
    return open_


@pytest.fixture(scope="module")
def alice(token_server, certs):
    """morphz.client as alice: makes the tests' contexts and grants."""
    with Client(token_server.address, credentials=Credentials(
            tls_ca=certs.path("ca.crt"), token=TOKENS["alice"]), timeout=BOUND) as mz:
        yield mz


@pytest.fixture
def context(alice, request) -> str:
    name = f"mcp-{request.node.name[:40]}-{next(_names)}".replace("[", "-").replace("]", "")
    alice.create_context(name)
    return name


def run(scenario) -> None:
    anyio.run(scenario, backend="asyncio")


# -- MCP-01: tools, schemas, errors, authorization ------------------------------------------------
def test_mcp_01_lists_named_tools_with_input_schemas(mcp_open, context):
    async def scenario():
        async with mcp_open("alice", context) as mcp:
            listed = {t.name: t for t in (await mcp.session.list_tools()).tools}
            assert set(listed) == set(TOOLS)
            for name, (properties, required) in TOOLS.items():
                schema, tool = listed[name].input_schema, listed[name]
                want = properties | ({"context"} if not mcp.bound else set())
                want_required = (["context"] if not mcp.bound else []) + (required or [])
                assert schema["type"] == "object" and set(schema["properties"]) == want, name
                assert schema.get("required", []) == want_required, name
                assert schema["additionalProperties"] is False, name
                assert len(tool.description) > 150, f"{name}: one paragraph an LLM can act on"
            assert listed["morphz_recall_search"].input_schema["properties"]["mode"]["enum"] \
                == ["hybrid", "lexical", "vector"]
            assert listed["morphz_recall_traverse"].input_schema["properties"]["direction"][
                "enum"] == ["ancestors", "descendants", "both"]
            templates = (await mcp.session.list_resource_templates()).resource_templates
            assert {t.uri_template for t in templates} == {
                "morphz://{context}/mind", "morphz://{context}/events/{ref}"}
            prompts = (await mcp.session.list_prompts()).prompts
            assert [p.name for p in prompts] == ["morphz_memory_guide"]
            guide = (await mcp.session.get_prompt("morphz_memory_guide")).messages[0]
            assert "(retire @e4)" in guide.content.text and "TX_CONFLICT" in guide.content.text
            # Arguments are checked against the schema before anything is called.
            reason, err = await mcp.error("morphz_recall_search", mode="fuzzy")
            assert reason == "CONTEXT_INPUT_INVALID" and err["details"]["field"] == "mode"
    run(scenario)


def test_mcp_01_release_story_through_tools_alone(mcp_open, context):
    """Seed 002's release, through MCP tools only: observe, transact, retire the digested
    tool result, then recall it back by search, traversal, read and the resources."""
    async def scenario():
        async with mcp_open("alice", context) as mcp:
            request = await mcp.ok("morphz_observe", kind="user-message", text=USER_REQUEST)
            enc = await mcp.ok("morphz_encoding")
            assert request["ref"] in enc["claimed"] and USER_REQUEST in enc["text"]
            plan = await mcp.ok("morphz_transact", activation=enc["activation"], tx=(
                "(context-tx (base-version 0) (create release (goal ship-v1) "
                "(stage waiting-tests)))"))
            assert plan["revision"] == 1
            report = (await mcp.ok("morphz_observe", kind="tool-result", text=TEST_REPORT))["ref"]
            enc = await mcp.ok("morphz_encoding")
            assert enc["revision"] == 1 and TEST_REPORT in enc["text"]
            receipt = await mcp.ok("morphz_transact", activation=enc["activation"],
                                   tx=RELEASE_TX.format(report=report))
            assert receipt["revision"] == 2
            assert [(r["op"], r["outcome"]) for r in receipt["results"]] == [
                ("derive", "derived"), ("revise", "revised"), ("relate", "related"),
                ("retire", "retired")]

            release = await mcp.ok("morphz_frame", id="release")
            assert release["body"] == "(goal ship-v1) (stage packaging)"
            before = await mcp.ok("morphz_frame", id="release", at_revision=1)
            assert before["body"] == "(goal ship-v1) (stage waiting-tests)"
            # Retired: out of the next encoding, still found, traversed and read whole.
            enc = await mcp.ok("morphz_encoding")
            assert TEST_REPORT not in enc["text"] and "test-result" in enc["text"]
            found = await mcp.ok("morphz_recall_search", query="regression suite",
                                 mode="lexical")
            hit = next(h for h in found["hits"] if h["ref"] == report)
            assert hit["state"] == "retired" and "«regression»" in hit["preview"]
            assert {"score", "kind", "lexical_rank", "vector_rank"} <= set(hit)
            walk = await mcp.ok("morphz_recall_traverse", frame="test-result",
                                include_events=True)
            leaf = next(n for n in walk["nodes"] if n["ref"] == report)
            assert leaf["text"] == TEST_REPORT and leaf["state"] == "retired"
            assert {"kind": "source", "from": "test-result", "to": report} in [
                {k: e[k] for k in ("kind", "from", "to")} for e in walk["edges"]]
            up = await mcp.ok("morphz_recall_traverse", frame="release",
                              direction="descendants", depth=1)
            assert "test-result" in {n["id"] for n in up["nodes"]}
            read = await mcp.ok("morphz_recall_read", ref=report)
            assert read["text"] == TEST_REPORT and read["has_more"] is False
            event = await mcp.session.read_resource(f"morphz://{context}/events/{report}")
            assert json.loads(event.contents[0].text)["text"] == TEST_REPORT
            mind = json.loads((await mcp.session.read_resource(
                f"morphz://{context}/mind")).contents[0].text)
            assert {f["id"] for f in mind["frames"]} == {"release", "test-result"}
            status = await mcp.ok("morphz_status")
            assert status["revision"] == 2 and status["bound"]["session"] == "main"
    run(scenario)


def test_mcp_01_stale_transaction_is_tx_conflict_tool_error_with_boundaries(mcp_open,
                                                                            context):
    async def scenario():
        async with mcp_open("alice", context) as mcp:
            report = (await mcp.ok("morphz_observe", text=TEST_REPORT))["ref"]
            await mcp.ok("morphz_transact", tx="(context-tx (base-version 0) "
                         "(create release (goal ship-v1) (stage waiting-tests)))")
            tx = RELEASE_TX.format(report=report)
            await mcp.ok("morphz_transact", tx=tx)
            # Another thread of work wrote from revision 1 too: the same change again.
            reason, err = await mcp.error("morphz_transact", tx=tx.replace(
                "(retire " + report + ")", ""))
            assert reason == "TX_CONFLICT" and err["reason"] == "TX_CONFLICT"
            assert "frame:release" in err["boundaries"]
            assert err["latest_revision"] == 2 and err["details"]["base"] == 1
            frames = await mcp.ok("morphz_frames")
            assert frames["revision"] == 2  # nothing of the stale transaction applied
            reason, _ = await mcp.error("morphz_frame", id="no-such-frame")
            assert reason == "FRAME_NOT_FOUND"
    run(scenario)


# Every tool, with arguments that are valid for it.
EVERY_TOOL = [("morphz_observe", {"text": "hello"}),
              ("morphz_recall_search", {"query": "release"}),
              ("morphz_recall_read", {"ref": "@e1"}),
              ("morphz_recall_traverse", {"frame": "release"}),
              ("morphz_frames", {}),
              ("morphz_frame", {"id": "release"}),
              ("morphz_transact", {"tx": "(context-tx (base-version 0) (create x (y)))"}),
              ("morphz_encoding", {}),
              ("morphz_status", {})]


def test_mcp_01_principal_without_grant_gets_forbidden_from_every_tool(mcp_open, context):
    async def scenario():
        async with mcp_open("carol", context) as mcp:
            for tool, args in EVERY_TOOL:
                reason, err = await mcp.error(tool, **args)
                assert reason == "FORBIDDEN", (tool, err)
                assert err["code"] == "PERMISSION_DENIED"
            for uri in (f"morphz://{context}/mind", f"morphz://{context}/events/@e1"):
                with pytest.raises(MCPError) as info:
                    await mcp.session.read_resource(uri)
                assert info.value.message.startswith("FORBIDDEN"), info.value.message
    run(scenario)


def test_mcp_01_http_refuses_a_client_without_bearer_token(http_servers):
    url = http_servers(None).url
    reply = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                        headers={"Accept": "application/json, text/event-stream"},
                        timeout=BOUND)
    assert reply.status_code == 401
    assert reply.headers["www-authenticate"].lower().startswith("bearer")


def test_mcp_01_http_unknown_bearer_token_is_unauthenticated_by_morphz(http_servers, context):
    async def scenario():
        async with http_session(http_servers(None).url, "not-a-token-of-this-server",
                                context) as mcp:
            reason, err = await mcp.error("morphz_status")
            assert reason == "UNAUTHENTICATED" and err["code"] == "UNAUTHENTICATED"
    run(scenario)


def test_mcp_01_stdio_without_credentials_is_unauthenticated(morphz_flags, context, tmp_path):
    async def scenario():
        with open(tmp_path / "stdio.log", "a") as errlog:
            async with stdio_session(morphz_flags, {}, context, errlog) as mcp:
                reason, _ = await mcp.error("morphz_status")
                assert reason == "UNAUTHENTICATED"
    run(scenario)


def test_mcp_01_unreachable_morphz_is_a_named_fault_not_internal(unused_address, tmp_path):
    async def scenario():
        with open(tmp_path / "stdio.log", "a") as errlog:
            async with stdio_session(["--server", unused_address, "--timeout", "2"], {},
                                     "nowhere", errlog) as mcp:
                reason, err = await mcp.error("morphz_status")
                assert reason == "UNAVAILABLE" and err["code"] == "UNAVAILABLE"
    run(scenario)


# -- MCP-02: secrets and paging -------------------------------------------------------------------
SECRET_TEXT = "api key sk-live-7f3a9c"
SECRET_PART = "hunter2-e41b"


def test_mcp_02_secret_never_in_any_tool_output_without_reveal_right(mcp_open, context,
                                                                     alice):
    alice.grant(context, "erin", ["read", "write", "recall", "encode"])

    async def scenario():
        async with mcp_open("erin", context) as mcp:
            ref = (await mcp.ok("morphz_observe", text=SECRET_TEXT, secret=True))["ref"]
            await mcp.ok("morphz_transact", tx=f'(context-tx (base-version 0) (derive db '
                         f'(from {ref}) (host db1) (password (secret "{SECRET_PART}"))))')
            outputs = [json.dumps(await mcp.ok(tool, **args)) for tool, args in [
                ("morphz_recall_search", {"query": "api key sk-live-7f3a9c db1"}),
                ("morphz_recall_search", {"query": "db1", "mode": "lexical"}),
                ("morphz_recall_read", {"ref": ref}),
                ("morphz_recall_read", {"ref": "db"}),
                ("morphz_recall_traverse", {"frame": "db", "include_events": True}),
                ("morphz_frames", {}), ("morphz_frame", {"id": "db"}),
                ("morphz_frame", {"id": "db", "at_revision": 1}),
                ("morphz_encoding", {}), ("morphz_status", {})]]
            for uri in (f"morphz://{context}/mind", f"morphz://{context}/events/{ref}"):
                outputs.append((await mcp.session.read_resource(uri)).contents[0].text)
            for out in outputs:
                assert SECRET_TEXT not in out and SECRET_PART not in out, out[:500]
            assert any(f"[secret {ref}]" in o for o in outputs)
            assert any("[secret db]" in o for o in outputs)
            for tool, args in (("morphz_frame", {"id": "db", "reveal_secrets": True}),
                               ("morphz_frames", {"reveal_secrets": True})):
                reason, _ = await mcp.error(tool, **args)
                assert reason == "FORBIDDEN"
        async with mcp_open("alice", context) as mcp:  # the reveal right: shown when asked
            frame = await mcp.ok("morphz_frame", id="db", reveal_secrets=True)
            assert SECRET_PART in frame["body"]
    run(scenario)


def test_mcp_02_output_over_byte_limit_is_paged_with_cursor_never_cut(mcp_open, context,
                                                                     alice):
    long_text = " ".join(f"line {i}: 测试 payload {i * 7919 % 1000}" for i in range(600))
    frames = [f"note-{i:02d}" for i in range(30)]
    for i in range(0, 30, 10):
        alice.commit(context, "(context-tx (base-version {}) {})".format(
            alice.status(context).revision, " ".join(
                f"(create {f} (topic release) (detail \"{'x' * 150}\"))"
                for f in frames[i:i + 10])))

    alice.commit(context, "(context-tx (base-version {}) (derive summary (from {}) (all "
                 "notes)))".format(alice.status(context).revision, " ".join(frames)))

    async def scenario():
        async with mcp_open("alice", context, limit=SMALL_LIMIT) as mcp:
            ref = (await mcp.ok("morphz_observe", text=long_text))["ref"]
            # A read: pages of characters that fit, joined back to the whole text.
            got, offset, pages = "", 0, 0
            while True:
                is_error, raw = await mcp.call("morphz_recall_read", ref=ref, offset=offset)
                assert not is_error and len(raw.encode()) <= SMALL_LIMIT
                page = json.loads(raw)
                got += page["text"]
                offset, pages = page["next_offset"], pages + 1
                if not page["has_more"]:
                    break
            assert got == long_text and pages > 5
            # A listing: every frame once, in order, each page within the limit.
            seen, cursor = [], None
            while True:
                args = {"cursor": cursor} if cursor else {}
                is_error, raw = await mcp.call("morphz_frames", **args)
                assert not is_error and len(raw.encode()) <= SMALL_LIMIT
                page = json.loads(raw)
                seen += [f["id"] for f in page["frames"]]
                cursor = page["next_cursor"]
                if not cursor:
                    break
            assert seen == frames + ["summary"]
            # A traversal: every source of `summary` once, across pages.
            nodes, edges, cursor = [], [], None
            while True:
                args = {"cursor": cursor} if cursor else {}
                is_error, raw = await mcp.call("morphz_recall_traverse", frame="summary",
                                               depth=1, **args)
                assert not is_error and len(raw.encode()) <= SMALL_LIMIT
                page = json.loads(raw)
                nodes += [n["id"] for n in page["nodes"]]
                edges += [(e["from"], e["to"]) for e in page["edges"]]
                cursor = page["next_cursor"]
                if not cursor:
                    break
            assert sorted(nodes) == sorted(frames + ["summary"])
            assert sorted(edges) == [("summary", f) for f in frames]
            # Search hits, paged the same way (20 frames match, over the byte limit).
            hits, cursor = [], None
            while True:
                args = {"cursor": cursor} if cursor else {}
                is_error, raw = await mcp.call("morphz_recall_search", query="release",
                                               mode="lexical", limit=100, **args)
                assert not is_error and len(raw.encode()) <= SMALL_LIMIT
                page = json.loads(raw)
                hits += [h["ref"] for h in page["hits"]]
                cursor = page["next_cursor"]
                if not cursor:
                    break
            assert len(hits) == len(set(hits))  # no hit twice across pages
            assert sorted(h for h in hits if not h.startswith("@e")) == frames
            # The encoding: its text in pages of the same snapshot.
            is_error, raw = await mcp.call("morphz_encoding")
            assert not is_error and len(raw.encode()) <= SMALL_LIMIT
            page = json.loads(raw)
            text, snapshot = page["text"], page["snapshot"]
            while page["next_cursor"]:
                is_error, raw = await mcp.call("morphz_encoding", cursor=page["next_cursor"])
                assert not is_error and len(raw.encode()) <= SMALL_LIMIT
                page = json.loads(raw)
                assert page["snapshot"] == snapshot
                text += page["text"]
            for f in frames:
                assert f"{f} " in text or f"{f})" in text or f"{f}\n" in text
            replay = alice.replay_snapshot(context, snapshot)
            assert text == replay.text
    run(scenario)


def test_priv_01_mcp_tools_show_an_erased_item_as_erased_never_its_text(
        mcp_open, context, alice):
    """After an erasure (made through the client: MCP offers none), every tool and
    resource that shows the erased event or the frame derived from it shows the erased
    marker, never the text."""
    planted = "parcel locker 8812 at the station"
    ref = alice.append_event(context, session="main", kind="user-message", text=planted).ref
    alice.commit(context, f"(context-tx (base-version 0) (derive parcel (from {ref}) "
                          f'(where "{planted}")))')
    erasure = alice.erase(context, refs=[ref], reason="asked to forget").erasures[0]
    marker = f"[erased {erasure}]"

    async def scenario():
        async with mcp_open("alice", context) as mcp:
            seen = [await mcp.ok("morphz_recall_read", ref=ref),
                    await mcp.ok("morphz_frame", id="parcel"),
                    await mcp.ok("morphz_recall_search", query="parcel locker station"),
                    await mcp.ok("morphz_recall_traverse", frame="parcel",
                                 include_events=True),
                    await mcp.ok("morphz_encoding"),
                    (await mcp.session.read_resource(
                        f"morphz://{context}/events/{ref}")).contents[0].text,
                    (await mcp.session.read_resource(
                        f"morphz://{context}/mind")).contents[0].text]
            text = json.dumps(seen)
            assert "8812" not in text and "locker" not in text
            assert seen[0]["text"] == marker and seen[1]["body"] == marker
            assert marker in seen[4]["text"]
    run(scenario)
