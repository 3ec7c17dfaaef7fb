"""ListFrames in pages (max_bytes, cursor) over real gRPC and a real LMDB store: the
pages of a listing are the whole listing, in projection order (CORE-18); a listing
that would not fit in one reply is refused with REPLY_TOO_LARGE and read in pages
instead (SEC-06); cursors are bound to their request, context and the Mind's version
(SEC-02)."""
from __future__ import annotations

import time

import grpc
import pytest

from morphz.services.storage.client import StorageClient
from morphz.services.transaction.client import TransactionClient
from morphz.services.transaction.core import frame_pages
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.auth import IN_PROCESS_CALLER as ME
from morphz.shared.errors import MorphzError
from morphz.shared.mind.view import MindView
from morphz.shared.storage.api import Write

from tests import wire
from tests.rpc_count import storage_service

BIG = "y " * ((15 << 20) // 2)  # a body of 15 MiB: five pass what one reply holds


def pages(mind, **kw) -> list[dict]:
    out, cursor = [], ""
    while True:
        page = mind.client.list_frames(mind.context, cursor=cursor, **kw)
        out.append(page)
        cursor = page["next_cursor"]
        if not cursor:
            return out


def ids(listing: list[dict]) -> list[str]:
    return [f["id"] for page in listing for f in page["frames"]]


def create_big(mind, i: int) -> None:
    """Commit frame big{i} of 15 MiB. Split on PostgreSQL under load, a server on the
    write's path was seen still holding the previous big write's bytes and refused this
    one with BYTES_IN_FLIGHT_LIMIT ("retry later", SEC-08). The test does what a client
    should: it retries after a pause that doubles, under one request id (a retry never
    applies it twice), for at most 120 s."""
    text = f'(create big{i} (note "{BIG}"))'
    base = mind.revision()
    give_up, pause = time.monotonic() + 120, 0.05
    while True:
        try:
            mind.tx(text, base=base, request_id=f"big{i}")
            return
        except MorphzError as e:
            if e.reason != "BYTES_IN_FLIGHT_LIMIT" or time.monotonic() > give_up:
                raise
        time.sleep(pause)  # a backoff, not a wait for a condition: the refusal is the signal
        pause = min(pause * 2, 2.0)


def test_core_18_pages_of_a_listing_are_the_whole_listing_in_projection_order(mind):
    mind.tx(" ".join(f"(create f{i:02d} (n {i}))" for i in range(12)))
    mind.tx("(place f07 first) (place f03 (after f07)) (place f11 (after f03))")
    mind.tx("(retire f05)", reason="done")
    whole = mind.client.list_frames(mind.context)
    assert whole["next_cursor"] == ""
    placed = ["f07", "f03", "f11"]  # then the others in the order they were created
    assert [f["id"] for f in whole["frames"]] == \
        placed + [f"f{i:02d}" for i in range(12) if f"f{i:02d}" not in placed]
    assert [f["state"] for f in whole["frames"] if f["id"] == "f05"] == ["retiring"]
    for budget in (1, 200, 700):  # one frame a page (a page holds one at least), and more
        listing = pages(mind, max_bytes=budget)
        assert [f for p in listing for f in p["frames"]] == whole["frames"]
        assert {p["revision"] for p in listing} == {whole["revision"]}
        if budget == 1:
            assert [len(p["frames"]) for p in listing] == [1] * 12


def test_sec_06_frames_past_one_reply_are_refused_whole_and_listed_in_pages(mind, address,
                                                                            expect_rejected):
    for i in range(5):
        create_big(mind, i)
    channel = grpc.insecure_channel(address, options=wire.BIG_MESSAGES)
    mind.client = TransactionClient(channel, timeout=60)  # replies of 32 MiB
    err = expect_rejected("REPLY_TOO_LARGE", mind.client.list_frames, mind.context)
    assert err.details["limit"] == "message_bytes"
    expect_rejected("CONTEXT_INPUT_INVALID", mind.client.list_frames, mind.context,
                    max_bytes=frame_pages.MAX_PAGE_BYTES + 1)
    listing = pages(mind, max_bytes=frame_pages.MAX_PAGE_BYTES)
    assert ids(listing) == [f"big{i}" for i in range(5)]
    assert [len(p["frames"]) for p in listing] == [2, 2, 1]  # 32 MiB: two of 15 MiB a page
    assert all(f["body"] == f'(note "{BIG}")' for p in listing for f in p["frames"])
    channel.close()


def test_sec_02_a_frames_cursor_serves_only_its_listing_and_its_version(mind, client,
                                                                        expect_rejected):
    mind.tx("(create a (x)) (create b (y)) (create c (z))")
    first = mind.client.list_frames(mind.context, max_bytes=1)
    cursor = first["next_cursor"]
    assert [f["id"] for f in first["frames"]] == ["a"] and cursor
    # Another page size, another reveal_secrets, another context: not this cursor's.
    expect_rejected("FRAMES_CURSOR_INVALID", mind.client.list_frames, mind.context,
                    max_bytes=2, cursor=cursor)
    expect_rejected("FRAMES_CURSOR_INVALID", mind.client.list_frames, mind.context,
                    max_bytes=1, cursor=cursor, reveal_secrets=True)
    client.create_context(mind.context + "-other")
    expect_rejected("FRAMES_CURSOR_INVALID", client.list_frames, mind.context + "-other",
                    max_bytes=1, cursor=cursor)
    expect_rejected("FRAMES_CURSOR_INVALID", mind.client.list_frames, mind.context,
                    max_bytes=1, cursor=cursor[:-1] + ("0" if cursor[-1] != "0" else "1"))
    assert [f["id"] for f in mind.client.list_frames(
        mind.context, max_bytes=1, cursor=cursor)["frames"]] == ["b"]
    mind.tx("(create d (w))")  # the Mind moved: the listing starts again
    err = expect_rejected("FRAMES_CURSOR_STALE", mind.client.list_frames, mind.context,
                          max_bytes=1, cursor=cursor)
    assert err.details["current"] != err.details["issued"]


@pytest.mark.all_in_one(reason="an in-process server whose storage channel is counted")
def test_dist_05_a_listing_over_the_storage_service_reads_frames_and_edges_in_batches(tmp_path):
    """100 frames (placed ones and unplaced ones), each with edges, listed by a
    transaction core over the storage service: the same listing as in process, in a
    round trip or two per 16 frames (three per frame, 304 in all, when each frame and
    its two relation scans were read alone)."""
    with storage_service(tmp_path / "server", sync=False) as (app, channel, count):
        tx = app.transactions
        tx.create_context("c", caller=ME)
        creates = " ".join(f"(create f{i:03d} (n {i}))" for i in range(100))
        tx.commit("c", f"(context-tx (base-version 0) {creates})", caller=ME)
        relates = " ".join(f"(relate f{i:03d} next f{i + 1:03d})" for i in range(99))
        tx.commit("c", f"(context-tx (base-version 1) {relates} (place f050 first))",
                  caller=ME)
        here = tx.list_frames("c", caller=ME)
        remote = TransactionCore(StorageClient(channel, timeout=30))
        count.calls.clear()
        there = remote.list_frames("c", caller=ME)
        assert there == here and len(there.frames) == 100
        assert all(f.relations for f in there.frames)
        # A pause past the snapshot's lease (5 s) costs a refused read, an OpenSnapshot
        # and the read again, not round trips of the listing (a loaded CI run counted 21
        # calls where 19 is usual: one such renewal fits).
        renewals = count.methods().count("OpenSnapshot")
        assert len(count.calls) - 2 * renewals <= 20, count.calls
        count.calls.clear()
        pages = _remote_pages(remote, 2000)
        assert [f for page in pages for f in page.frames] == list(here.frames)
        assert len(pages) > 10 and len(count.calls) <= 6 * len(pages), count.calls
        # Frames the order does not name (a damaged projection) come last, by id, found
        # by their keys: the placed frames' bodies are not read again.
        with app.store.reader("c") as r:
            ranked = {k[0]: v for k, v in r.scan("order_rank")}
            seq = r.commit_seq
        unplace = ["f003", "f077", "f050"]
        app.store.commit("c", seq, [w for fid in unplace for w in (
            Write("order_rank", (fid,), None), Write("order", (int(ranked[fid]),), None))])
        here = tx.list_frames("c", caller=ME)
        assert [f.id for f in here.frames][-3:] == sorted(unplace)
        with app.store.reader("c") as r:  # the order an encoding reads, all at once
            assert [f.id for f in here.frames] == \
                [fid for fid, _ in MindView(r).frame_rows_in_order()]
        count.calls.clear()
        assert remote.list_frames("c", caller=ME) == here
        # The unplaced ones: the frames' keys merged with the ranks' keys, a scan each.
        assert "Scan:frames" not in count.calls and len(count.calls) <= 21, count.calls
        assert count.calls.count("Scan:frames(keys)") == 1
        assert count.calls.count("Scan:order_rank(keys)") == 1
        assert [f for page in _remote_pages(remote, 2000) for f in page.frames] == \
            list(here.frames)


def _remote_pages(core: TransactionCore, max_bytes: int) -> list[dict]:
    out, cursor = [], ""
    while True:
        out.append(core.list_frames("c", max_bytes=max_bytes, cursor=cursor, caller=ME))
        cursor = out[-1].next_cursor
        if not cursor:
            return out


class _CountingReader:
    """A store's reader that counts the rows its scans give, by table."""

    def __init__(self, reader, counts: dict) -> None:
        self._reader, self._counts = reader, counts

    def __getattr__(self, name):
        return getattr(self._reader, name)

    def __enter__(self):
        self._reader.__enter__()
        return self

    def __exit__(self, *exc):
        return self._reader.__exit__(*exc)

    def _counted(self, table: str, rows):
        for row in rows:
            self._counts[table] = self._counts.get(table, 0) + 1
            yield row

    def scan(self, table, *args, **kwargs):
        return self._counted(table, self._reader.scan(table, *args, **kwargs))

    def scan_keys(self, table, *args, **kwargs):
        return self._counted(table, self._reader.scan_keys(table, *args, **kwargs))

    def scan_values(self, table, *args, **kwargs):
        return self._counted(table, self._reader.scan_values(table, *args, **kwargs))


class _CountingStore:
    def __init__(self, store) -> None:
        self._store, self.counts = store, {}

    def __getattr__(self, name):
        return getattr(self._store, name)

    def reader(self, context: str):
        return _CountingReader(self._store.reader(context), self.counts)


def test_core_18_a_page_reads_the_order_from_where_the_last_page_ended(tmp_path):
    """A listing of 300 frames, one placed first, a frame a page: the pages are the whole
    listing in projection order, and each reads a batch of the order at most (every page
    read all 300 entries, so a listing's cost grew with the square of its frames)."""
    from morphz.services.storage.lmdb import LmdbStore
    store = LmdbStore(str(tmp_path / "db"), sync=False)
    try:
        counting = _CountingStore(store)
        core = TransactionCore(counting)
        core.create_context("c", caller=ME)
        creates = " ".join(f"(create f{i:03d} (n {i}))" for i in range(300))
        core.commit("c", f"(context-tx (base-version 0) {creates} (place f299 first))",
                    caller=ME)
        whole = list(core.list_frames("c", caller=ME).frames)
        listed, cursor, order_rows = [], "", []
        while True:
            counting.counts.clear()
            page = core.list_frames("c", max_bytes=1, cursor=cursor, caller=ME)
            order_rows.append(counting.counts.get("order", 0))
            listed += page.frames
            cursor = page.next_cursor
            if not cursor:
                break
        assert listed == whole and listed[0].id == "f299" and len(listed) == 300
        assert max(order_rows) <= frame_pages.BATCH + 1, order_rows
    finally:
        store.close()


def test_sec_03_a_made_up_frames_cursor_position_is_refused_as_invalid(mind,
                                                                         expect_rejected):
    """A cursor's check is no secret, so a position no page gives can be sent: a phase
    that is none, a rank that is not a decimal key integer, an id no frame can have. Each
    is FRAMES_CURSOR_INVALID, as a made-up cursor is (not the store's key error, not an
    internal one, and no listing from there)."""
    from morphz.shared import cursor as cursors
    mind.tx("(create a (x)) (create b (y))")
    issued = mind.client.list_frames(mind.context, max_bytes=1)["next_cursor"]
    version = cursors.version_of(issued)  # the Mind's, as the service names it
    params = {"context": mind.context, "reveal": False, "max_bytes": 1}
    for position in ((2, ""), (0, "f001"), (0, "007"), (0, "-1"), (0, str(1 << 64)),
                     (1, "a\x00b"), (1, "x" * 300), (1, "(")):
        forged = cursors.encode("frames", params, version, *position)
        expect_rejected("FRAMES_CURSOR_INVALID", mind.client.list_frames, mind.context,
                        max_bytes=1, cursor=forged)
