"""What each tool does: one or two morphz.client calls, their reply as JSON, paged to the
output limit (paging.py). Arguments arrive validated against tool_specs' schemas.

Nothing here asks Morphz to reveal a secret unless the caller's arguments do (then Morphz
refuses FORBIDDEN without the reveal right), so secrets are redacted exactly as in the
gRPC API."""
from __future__ import annotations

from typing import Any, Awaitable, Callable

from morphz.client import AsyncClient
from morphz.client.errors import make_error

from morphz.services.mcp import paging, tool_specs as T
from morphz.services.mcp.paging import Position
from morphz.services.mcp.settings import Binding
from morphz.services.mcp.views import hit, plain, size

Handler = Callable[[AsyncClient, str, dict], Awaitable[dict]]
SERVER_PAGE_SHARE = 2  # ask a Morphz page for 1/this of the limit: edges, envelope fit too


class ToolCalls:
    """The tools of one `morphz mcp`, bound to its Binding."""

    def __init__(self, binding: Binding) -> None:
        self.binding = binding
        self.limit = binding.max_output_bytes
        self._handlers: dict[str, Handler] = {
            T.OBSERVE.name: self.observe, T.SEARCH.name: self.search, T.READ.name: self.read,
            T.TRAVERSE.name: self.traverse, T.FRAMES.name: self.frames,
            T.FRAME.name: self.frame, T.TRANSACT.name: self.transact,
            T.ENCODING.name: self.encoding, T.STATUS.name: self.status}
        if set(self._handlers) != set(T.BY_NAME):
            raise RuntimeError("every tool spec needs its handler, and only those")

    async def call(self, name: str, client: AsyncClient, args: dict) -> dict:
        context = self.binding.context_of(args)
        return await self._handlers[name](client, context, args)

    # -- writes --------------------------------------------------------------------------------
    async def observe(self, mz: AsyncClient, context: str, a: dict) -> dict:
        reply = await mz.append_event(context, session=self.binding.session,
                                      kind=a.get("kind", "tool-result"), text=a["text"],
                                      secret=bool(a.get("secret")),
                                      occurred_at=a.get("occurred_at", ""))
        view = plain(reply)
        view.pop("commit_seq", None)  # the client's own read-your-writes position
        return view

    async def transact(self, mz: AsyncClient, context: str, a: dict) -> dict:
        receipt = plain(await mz.commit(context, a["tx"], session=self.binding.session,
                                        activation=a.get("activation", "")))
        receipt.pop("commit_seq", None)
        if size(receipt) > self.limit:
            # A receipt cannot be fetched again in pages: say how many op results are not
            # shown and where the whole transaction is (its event), never drop them quietly.
            total = len(receipt["results"])
            shown = paging.fit_list(receipt, "results", self.limit)
            receipt["results_not_shown"] = {
                "count": total - shown, "why": "over this server's output limit",
                "whole_transaction": receipt.get("event_ref", ""),
                "read_with": "morphz_recall_read"}
        return receipt

    # -- reads ----------------------------------------------------------------------------------
    async def status(self, mz: AsyncClient, context: str, a: dict) -> dict:
        view = plain(await mz.status(context))
        view.pop("commit_seq", None)
        view["bound"] = {"context": self.binding.context or None,
                         "session": self.binding.session,
                         "max_output_bytes": self.limit}
        if size(view) > self.limit:  # thousands of sessions: say how many are not shown
            total = len(view["sessions"])
            view["sessions_not_shown"] = total - paging.fit_list(view, "sessions", self.limit,
                                                                 at_least_one=False)
        return view

    async def frame(self, mz: AsyncClient, context: str, a: dict) -> dict:
        view = plain(await mz.frame(context, a["id"], at_revision=a.get("at_revision", 0),
                                    reveal_secrets=bool(a.get("reveal_secrets"))))
        paging.shorten_to_fit(view, None, self.limit)
        return view

    async def frames(self, mz: AsyncClient, context: str, a: dict) -> dict:
        reveal = bool(a.get("reveal_secrets"))
        at = paging.decode(a.get("cursor"), T.FRAMES.name)
        reply = await mz.frames(context, reveal_secrets=reveal, cursor=at.server,
                                max_bytes=self.limit // SERVER_PAGE_SHARE)
        page = {"revision": reply.revision, "frames": [plain(f) for f in reply.frames][at.skip:]}
        return self._list_page(page, "frames", at, len(reply.frames), reply.next_cursor)

    async def search(self, mz: AsyncClient, context: str, a: dict) -> dict:
        at = paging.decode(a.get("cursor"), T.SEARCH.name)
        reply = await mz.search(context, a.get("query", ""), since=a.get("since", ""),
                                until=a.get("until", ""), limit=a.get("limit", 0),
                                mode=a.get("mode", ""), cursor=at.server)
        page: dict[str, Any] = {"hits": [hit(h) for h in reply.results][at.skip:]}
        if reply.empty:
            page["empty"] = reply.empty  # empty_index or no_match
        if reply.lag or reply.vector_lag:
            page["index_lag"] = {"lexical": reply.lag, "vector": reply.vector_lag}
        return self._list_page(page, "hits", at, len(reply.results), reply.next_cursor)

    async def read(self, mz: AsyncClient, context: str, a: dict) -> dict:
        offset = a.get("offset", 0)
        reply = await mz.read(context, a["ref"], offset=offset, limit=a.get("limit", 0))
        page = plain(reply)
        page.pop("observation_ref", None)
        shown = paging.fit_text(page, "text", self.limit)
        page["next_offset"] = offset + shown
        page["has_more"] = page["next_offset"] < reply.total_chars
        return page

    async def traverse(self, mz: AsyncClient, context: str, a: dict) -> dict:
        at = paging.decode(a.get("cursor"), T.TRAVERSE.name)
        reply = await mz.traverse(context, a["frame"], depth=a.get("depth", 2),
                                  direction=a.get("direction", "ancestors"),
                                  include_bodies=True,
                                  include_events=bool(a.get("include_events")),
                                  max_bytes=self.limit // SERVER_PAGE_SHARE,
                                  cursor=at.server)
        # A Morphz page holds at least one node with all its edges, which may pass the
        # limit: its nodes, then its edges, are shown in as many pages as they need
        # (at.skip nodes and at.offset edges of it already shown).
        page = {"root": reply.root, "direction": reply.direction, "depth": reply.depth,
                "version": reply.version, "nodes": [plain(n) for n in reply.nodes][at.skip:],
                "edges": []}
        nodes = paging.fit_list(page, "nodes", self.limit)
        edges = 0
        if at.skip + nodes == len(reply.nodes):
            page["edges"] = [plain(e) for e in reply.edges][at.offset:]
            edges = paging.fit_list(page, "edges", self.limit, at_least_one=nodes == 0)
        if at.skip + nodes < len(reply.nodes) or at.offset + edges < len(reply.edges):
            nxt = Position(at.tool, at.server, at.skip + nodes, offset=at.offset + edges)
        else:
            nxt = Position(at.tool, reply.next_cursor) if reply.next_cursor else None
        page["next_cursor"] = paging.encode(nxt) if nxt else ""
        return page

    async def encoding(self, mz: AsyncClient, context: str, a: dict) -> dict:
        at = paging.decode(a.get("cursor"), T.ENCODING.name)
        if at.snapshot:  # a later page of a compiled encoding: its snapshot, replayed
            replay = await mz.replay_snapshot(context, at.snapshot)
            if replay.replay_hash != at.hash or at.offset > len(replay.text):
                raise make_error("SNAPSHOT_INVALID", "the snapshot no longer replays to the "
                                 "text its first page came from: compile a new encoding",
                                 "FAILED_PRECONDITION", {"snapshot": at.snapshot})
            page = {"snapshot": at.snapshot, "hash": at.hash, "offset": at.offset,
                    "text": replay.text[at.offset:]}
            return self._text_page(page, at, len(replay.text))
        enc = await mz.compile(context, session=self.binding.session,
                               budget_bytes=a.get("budget_bytes", 0),
                               budget_tokens=a.get("budget_tokens", 0),
                               preview_bytes=a.get("preview_bytes", 0),
                               must_read=a.get("must_read", ()))
        page = {"snapshot": enc.snapshot, "hash": enc.hash, "revision": enc.revision,
                "tick": enc.tick, "activation": enc.activation, "claimed": list(enc.claimed),
                "bytes": enc.bytes, "pressure": plain(enc.pressure),
                "omitted": [plain(o) for o in enc.omitted], "omitted_total": enc.omitted_total,
                "offset": 0, "text": enc.text}
        return self._text_page(page, Position(T.ENCODING.name, snapshot=enc.snapshot,
                                              hash=enc.hash), len(enc.text))

    # -- paging ---------------------------------------------------------------------------------
    def _list_page(self, page: dict, key: str, at: Position, page_items: int,
                   server_next: str) -> dict:
        """page[key]: the Morphz page's items from at.skip on; keep what fits and point the
        cursor at the first item not shown (in this Morphz page, else the next one)."""
        shown = paging.fit_list(page, key, self.limit)
        if at.skip + shown < page_items:
            nxt = Position(at.tool, at.server, at.skip + shown)
        else:
            nxt = Position(at.tool, server_next) if server_next else None
        page["next_cursor"] = paging.encode(nxt) if nxt else ""
        return page

    def _text_page(self, page: dict, at: Position, total: int) -> dict:
        shown = paging.fit_text(page, "text", self.limit)
        end = at.offset + shown
        page["next_offset"] = end
        page["next_cursor"] = paging.encode(Position(at.tool, snapshot=at.snapshot,
                                                     hash=at.hash, offset=end)) \
            if end < total else ""
        return page
