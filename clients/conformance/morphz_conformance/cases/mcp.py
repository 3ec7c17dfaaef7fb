"""The MCP extension (MCP-*): the implementation's MCP server, reached with the MCP SDK's
own client over stdio (`run --mcp-cmd`, morphz-conformance[mcp]): its named tools and
their input schemas, errors as tool errors led by their reason code, the same
authorization as the gRPC API, secrets redacted, outputs past the byte limit paged."""
from __future__ import annotations

from morphz_conformance.driver import Rejected
from morphz_conformance.registry import CaseFailed, CaseRun, case

# The tools these cases call (Morphz's MCP vocabulary: an implementation claiming the
# extension names them so); each takes the context as its `context` argument.
TOOLS = ("morphz_observe", "morphz_transact", "morphz_frame", "morphz_frames",
         "morphz_status", "morphz_recall_search", "morphz_recall_read")
PAGE_BOUND = 1000  # pages a listing may take before the case calls it endless


def _ok(t: CaseRun, result, what: str):
    t.check(not result.is_error, f"{what} failed: {result.text[:300]}")
    try:
        return result.json()
    except ValueError:
        raise CaseFailed(f"{what}: its output is not whole JSON: {result.text[-200:]!r}") from None


@case("MCP-01", "named tools with input schemas; the gRPC API's authorization; an error is a "
      "tool error led by its reason code", needs=("mcp",))
def mcp_01_tools_schemas_errors_authorization(t: CaseRun):
    d, ctx = t.driver, t.context()
    m = d.mcp_session()
    try:
        tools = {tool.name: tool for tool in m.list_tools()}
        t.eq(sorted(set(TOOLS) - set(tools)), [], "tools missing from the listing")
        for tool in tools.values():
            schema = tool.input_schema
            t.check(schema.get("type") == "object" and isinstance(schema.get("properties"), dict),
                    f"{tool.name}: no object input schema")
            t.check(tool.description, f"{tool.name}: no description")
        ref = _ok(t, m.call("morphz_observe", context=ctx, kind="user-message",
                            text="observed through MCP"), "morphz_observe")["ref"]
        t.eq(d.event(ctx, ref).text, "observed through MCP", "the MCP observation, read by gRPC")
        missing = m.call("morphz_frame", context=ctx, id="no-such-frame")
        t.check(missing.is_error and missing.text.startswith("FRAME_NOT_FOUND"),
                f"a missing frame: {missing.is_error} {missing.text[:200]!r}")
        t.tx(ctx, "(create plan (goal ship))")
        base = t.revision(ctx)
        t.tx(ctx, "(revise plan (goal ship-v2))")  # the plan changed since `base`
        stale = m.call("morphz_transact", context=ctx,
                       tx=f"(context-tx (base-version {base}) (revise plan (goal stale)))")
        t.check(stale.is_error and stale.text.startswith("TX_CONFLICT"),
                f"a stale transaction: {stale.is_error} {stale.text[:200]!r}")
    finally:
        m.close()
    if "principals" not in d.capabilities():
        return  # one principal only: the authorization half needs a second one
    before = d.status(ctx).event_count
    for who in ("other", "anonymous"):
        caller = d.as_principal(who)
        calls = {"morphz_status": ({}, lambda x: x.status(ctx)),
                 "morphz_observe": ({"kind": "user-message", "text": "intruder"},
                                    lambda x: x.append(ctx, "s1", "user-message", "intruder")),
                 "morphz_frame": ({"id": "plan"}, lambda x: x.frame(ctx, "plan"))}
        other = d.mcp_session(who)
        try:
            for tool, (args, grpc_call) in calls.items():
                try:
                    grpc_call(caller)
                    raise CaseFailed(f"{who}: the gRPC API let {tool}'s call through")
                except Rejected as e:
                    reason = e.reason
                got = other.call(tool, context=ctx, **args)
                t.check(got.is_error and got.text.startswith(reason),
                        f"{who} {tool}: gRPC refuses {reason}, MCP answers "
                        f"{got.is_error} {got.text[:120]!r}")
        finally:
            other.close()
            caller.close()
    t.eq(d.status(ctx).event_count, before, "events after the refused callers")


@case("MCP-02", "secrets stay redacted in tool outputs; an output over the byte limit is "
      "paged with a cursor, never cut", needs=("mcp",))
def mcp_02_secrets_redacted_outputs_paged(t: CaseRun):
    d, ctx = t.driver, t.context()
    secret = t.secret("sk-live-PLANTED-3f9a7c61 for db1")
    ev = d.append(ctx, "s1", "user-message", secret, secret=True)
    frames = [f"note-{i:03d}" for i in range(100)]  # ~100 KB of listing
    for i in range(0, len(frames), 20):
        t.tx(ctx, " ".join(f'(create {f} (topic release) (detail "{"x" * 1000}"))'
                           for f in frames[i:i + 20]))
    m = d.mcp_session()
    try:
        for tool, args in (("morphz_recall_search", {"query": "db1"}),
                           ("morphz_recall_read", {"ref": ev.ref}),
                           ("morphz_status", {})):
            out = m.call(tool, context=ctx, **args)
            _ok(t, out, tool)
            t.check("PLANTED" not in out.text, f"{tool} shows the secret")
        seen, cursor, pages = [], "", 0
        while True:
            page = _ok(t, m.call("morphz_frames", context=ctx,
                                 **({"cursor": cursor} if cursor else {})), "morphz_frames")
            seen += [f["id"] for f in page["frames"]]
            for f in page["frames"]:
                t.check("PLANTED" not in str(f), "morphz_frames shows the secret")
            cursor, pages = page.get("next_cursor") or "", pages + 1
            if not cursor:
                break
            t.check(pages < PAGE_BOUND, "the listing never ends")
        t.eq(seen, frames, "every frame once, in order, across the pages")
        t.check(pages > 1, "100 KB of frames came in one output: no byte limit applied")
    finally:
        m.close()
