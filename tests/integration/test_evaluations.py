"""ASM-06 (a session's snapshots listed newest first, paged, each with its hash,
activation, budget use and pressure; a page costs the same however many the context
holds) and the evaluation view UI-03 stands on (ShowEvaluation: an activation's inputs,
snapshots, recall calls, actions, transactions and the Mind's change, previous and next),
through the Python client against the session's real servers, and the store reads a page
costs counted in process."""
from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import msgspec
import pytest

from morphz.client import InvalidInputError, NotFoundError
from morphz.services.encoding.core.engine import EncodingCore
from morphz.services.encoding.core.listing import SnapshotQuery, listing_of
from morphz.services.encoding.core.record import Head
from morphz.services.storage.lmdb import LmdbStore
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.auth import IN_PROCESS_CALLER as ME
from morphz.shared.mind.snapshots import SnapshotRepository
from morphz.shared.storage.api import Reader, Store

from tests import evaluation_loop as loop


@pytest.fixture(scope="module")
def looped(mz):
    """The 20-step loop of tests/evaluation_loop.py, run once for this module."""
    return mz, "evals-loop", loop.run(mz, "evals-loop")


def test_asm_06_a_sessions_snapshots_newest_first_with_hash_activation_budget_pressure(looped):
    mz, ctx, steps = looped
    release = [s for s in steps if s.session == "release"][::-1]
    pages = list(mz.snapshot_pages(ctx, session="release", limit=3))
    assert [len(p.snapshots) for p in pages] == [3, 3, 3, 1]
    listed = [e for p in pages for e in p.snapshots]
    assert [e.snapshot for e in listed] == [s.snapshot for s in release]
    for e, s in zip(listed, release):
        assert (e.hash, e.activation, e.session, e.revision) == \
            (s.hash, s.activation, "release", s.revision_seen)
        assert e.hash == mz.replay_snapshot(ctx, e.snapshot).replay_hash
        assert 0 < e.bytes <= e.limit_bytes and e.tokens > 0 and e.level == "normal"
        assert e.claimed == len(s.claimed) and e.parent == "" and e.time.endswith("+00:00")
    times = [e.time for e in listed]
    assert times == sorted(times, reverse=True)
    whole = [e.snapshot for p in mz.snapshot_pages(ctx, limit=100) for e in p.snapshots]
    assert whole == [s.snapshot for s in steps[::-1]]
    one = mz.list_snapshots(ctx, activation=steps[4].activation)
    assert [e.snapshot for e in one.snapshots] == [steps[4].snapshot] and not one.next_cursor


def test_asm_06_a_recompile_is_listed_first_and_names_its_parent(looped):
    mz, ctx, steps = looped
    again = mz.compile(ctx, session="support", activation=steps[1].activation,
                       parent_snapshot=steps[1].snapshot)
    first = mz.list_snapshots(ctx, session="support", limit=1).snapshots[0]
    assert (first.snapshot, first.activation, first.parent) == \
        (again.snapshot, steps[1].activation, steps[1].snapshot)
    mine = mz.list_snapshots(ctx, activation=steps[1].activation).snapshots
    assert [e.snapshot for e in mine] == [again.snapshot, steps[1].snapshot]


def test_asm_06_a_time_range_lists_what_was_frozen_in_it(endpoints, cx, mz):
    mz.append_event(cx, session="main", kind="user-message", text="first")
    first = mz.compile(cx, session="main")
    after_first = datetime.now(timezone.utc) + timedelta(seconds=1)
    mz.append_event(cx, session="main", kind="user-message", text="second")
    mz.compile(cx, session="main")
    listed = mz.list_snapshots(cx, session="main", until=after_first.isoformat()).snapshots
    assert first.snapshot in [e.snapshot for e in listed]
    later = (after_first + timedelta(hours=1)).isoformat()
    assert mz.list_snapshots(cx, session="main", since=later).snapshots == []


def test_asm_06_bad_listings_are_refused_with_their_field(looped):
    mz, ctx, steps = looped
    page = mz.list_snapshots(ctx, session="release", limit=2)
    cases = [(dict(limit=101), "CONTEXT_INPUT_INVALID", "limit"),
             (dict(since="2026-01-02T00:00:00+00:00", until="2026-01-01T00:00:00+00:00"),
              "CONTEXT_INPUT_INVALID", "since"),
             (dict(since="yesterday"), "CONTEXT_INPUT_INVALID", "since"),
             (dict(until="2026-01-01T00:00:00"), "CONTEXT_INPUT_INVALID", "until"),
             (dict(session="release", cursor="made-up"), "ENCODING_CURSOR_INVALID", None),
             (dict(session="support", cursor=page.next_cursor), "ENCODING_CURSOR_INVALID",
              None),
             (dict(session="no such session"), "CONTEXT_INPUT_INVALID", "session")]
    for asked, reason, field in cases:
        with pytest.raises(InvalidInputError) as info:
            mz.list_snapshots(ctx, **asked)
        assert info.value.reason == reason, asked
        assert info.value.details.get("field") == field, asked
    for asked, reason in ((dict(session="nobody"), "SESSION_NOT_FOUND"),
                          (dict(activation="a999"), "ACTIVATION_NOT_FOUND")):
        with pytest.raises(NotFoundError) as info:
            mz.list_snapshots(ctx, **asked)
        assert info.value.reason == reason


def test_ui_03_the_evaluation_view_ties_a_step_together_by_reference(looped):
    mz, ctx, steps = looped
    s5 = steps[4]
    v = mz.evaluation(ctx, s5.activation)
    assert (v.activation, v.session, v.delivered, v.complete) == \
        (s5.activation, "release", True, True)
    assert [i.ref for i in v.inputs] == s5.claimed == [steps[2].recalls[0], s5.inputs[0]]
    assert v.inputs[1].preview == loop.CHINESE and v.inputs[0].kind == "recall"
    assert [e.snapshot for e in v.snapshots] == [s5.snapshot]
    assert v.snapshots[0].hash == mz.replay_snapshot(ctx, s5.snapshot).replay_hash == s5.hash
    assert [c.ref for c in v.recalls] == s5.recalls
    assert [c.op for c in v.recalls] == ["frame"] and v.recalls[0].query == "release"
    assert "test-result" in v.recalls[0].hits or "release" in v.recalls[0].hits
    assert [(a.ref, a.result) for a in v.actions] == list(zip(s5.actions, s5.results))
    assert [r.ref for r in v.results] == s5.results
    (tx,) = v.transactions
    assert (tx.ref, tx.revision, tx.base_version, tx.reason) == \
        (s5.tx_ref, s5.revision, s5.revision_seen, "测试结果已吸收，继续准备发布")
    assert [(o.op, o.target, o.outcome) for o in tx.results] == [
        ("derive", "test-result", "derived"), ("revise", "release", "revised"),
        ("relate", "test-result supports release", "related"),
        ("retire", s5.inputs[0], "retired")]
    assert (v.mind.from_revision, v.mind.to_revision) == (s5.revision_seen, s5.revision)
    assert [(c.kind, c.key, c.change, c.revision) for c in v.mind.changes] == [
        ("frame", "test-result", "derived", s5.revision),
        ("frame", "release", "revised", s5.revision),
        ("relation", "test-result supports release", "related", s5.revision),
        ("observation", s5.inputs[0], "retired", s5.revision)]
    assert (v.previous, v.next) == (steps[2].activation, steps[6].activation)
    assert mz.evaluation(ctx, steps[0].activation).previous == ""
    last = mz.evaluation(ctx, steps[-1].activation)
    assert last.next == "" and last.previous == steps[-3].activation


def test_ui_03_every_step_of_the_loop_shows_its_own_snapshot_recalls_and_transaction(looped):
    mz, ctx, steps = looped
    for s in steps:
        v = mz.evaluation(ctx, s.activation)
        assert v.snapshots[0].snapshot == s.snapshot and v.snapshots[0].hash == s.hash
        assert [c.ref for c in v.recalls] == s.recalls, s.number
        assert [t.ref for t in v.transactions] == [s.tx_ref], s.number
        assert v.transactions[0].revision == s.revision
        assert v.session == s.session and v.delivered


def test_ui_03_secrets_stay_markers_in_the_evaluation_view(looped):
    mz, ctx, steps = looped
    v = mz.evaluation(ctx, steps[3].activation)
    (secret,) = v.inputs
    assert secret.secret and secret.preview == f"[secret {steps[3].inputs[0]}]"
    assert loop.SECRET not in str(v)


def test_ui_03_an_unknown_activation_is_not_found(looped):
    mz, ctx, _ = looped
    with pytest.raises(NotFoundError) as info:
        mz.evaluation(ctx, "a999")
    assert info.value.reason == "ACTIVATION_NOT_FOUND"
    with pytest.raises(InvalidInputError):
        mz.evaluation(ctx, "")


def test_ui_03_the_cli_lists_snapshots_and_shows_an_evaluation(looped, endpoints):
    mz, ctx, steps = looped

    def cli(*args: str) -> dict:
        done = subprocess.run([sys.executable, "-m", "morphz.services.cli.main", "--server",
                               endpoints.encoding, "--format", "json", "context", *args,
                               "--context", ctx], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        return json.loads(done.stdout)
    listed = cli("encoding", "list", "--session", "support", "--limit", "2")
    assert listed["verb"] == "list" and len(listed["snapshots"]) == 2 and listed["next_cursor"]
    more = cli("encoding", "list", "--session", "support", "--limit", "2",
               "--cursor", listed["next_cursor"])
    assert not {e["snapshot"] for e in more["snapshots"]} & \
        {e["snapshot"] for e in listed["snapshots"]}
    shown = cli("evaluation", "show", steps[4].activation)
    assert shown["transactions"][0]["ref"] == steps[4].tx_ref
    assert [c["change"] for c in shown["mind"]["changes"]][:2] == ["derived", "revised"]


# -- the cost of a page ------------------------------------------------------------------
class CountingReader(Reader):
    """A reader that counts what it reads: calls, and rows (a get's, or a scan's)."""

    def __init__(self, inner: Reader, counts: dict) -> None:
        self._inner, self._counts = inner, counts
        self.commit_seq = inner.commit_seq

    def _note(self, table: str, rows: int) -> None:
        self._counts["calls"] += 1
        self._counts["rows"] += rows
        self._counts["tables"].add(table)

    def get(self, table, key):
        self._note(table, 1)
        return self._inner.get(table, key)

    def get_many(self, table, keys):
        self._note(table, len(keys))
        return self._inner.get_many(table, keys)

    def scan(self, table, prefix=(), after=None, limit=0, reverse=False):
        rows = list(self._inner.scan(table, prefix, after, limit, reverse))
        self._note(table, len(rows))
        return iter(rows)

    def close(self) -> None:
        self._inner.close()


class CountingStore(Store):
    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.counts = {"calls": 0, "rows": 0, "tables": set()}

    def reader(self, context):
        return CountingReader(self.inner.reader(context), self.counts)

    def reset(self) -> None:
        self.counts.update(calls=0, rows=0, tables=set())

    def commit(self, *a, **kw):
        return self.inner.commit(*a, **kw)

    def put_records(self, *a, **kw):
        return self.inner.put_records(*a, **kw)

    def contexts(self):
        return self.inner.contexts()

    def changes(self, *a, **kw):
        return self.inner.changes(*a, **kw)

    def wait_changes(self, *a, **kw):
        return self.inner.wait_changes(*a, **kw)

    def feed_head(self):
        return self.inner.feed_head()


def _more_snapshots(store: LmdbStore, record: tuple[bytes, bytes], count: int,
                    start: int) -> None:
    """`count` copies of a compiled record under new ids and later times, each written as
    a compile writes one (its record and its three index entries in one side write)."""
    head_json, body = record
    head = msgspec.json.decode(head_json, type=Head)
    for i in range(start, start + count):
        sid = f"enc-copy{i:06d}"
        copy = msgspec.structs.replace(head, id=sid)
        SnapshotRepository(store).put("big", sid, msgspec.json.encode(copy), body,
                                      listing_of(copy, 2_000_000_000_000_000 + i, 1))


def test_asm_06_a_page_reads_the_same_rows_for_a_hundred_and_for_ten_thousand(tmp_path):
    """A page of ListSnapshots at 100 and at 10,000 snapshots (the newest page, and a page
    deep in the listing through its cursor): the same store calls and rows read, about
    a page's worth of index rows, and no snapshot record among them."""
    store = CountingStore(LmdbStore(str(tmp_path / "store"), map_size=1 << 30, sync=False))
    tx = TransactionCore(store.inner)
    enc = EncodingCore(store, tx)
    tx.create_context("big", caller=ME)
    tx.append_event("big", "main", "user-message", "ship it", caller=ME)
    first = enc.compile("big", "main", caller=ME)
    with store.inner.reader("big") as r:
        raw = bytes(r.get("snapshots", (first.snapshot,)))
    record = raw.partition(b"\n")[::2]

    def page_cost(cursor: str = "") -> tuple[dict, str]:
        store.reset()
        page = enc.list_snapshots("big", SnapshotQuery.make(session="main", limit=50,
                                                            cursor=cursor), caller=ME)
        assert len(page.entries) == 50
        return dict(store.counts), page.next_cursor

    _more_snapshots(store.inner, record, 99, 0)
    small, cursor = page_cost()
    deep_small, _ = page_cost(cursor)
    _more_snapshots(store.inner, record, 9_900, 99)
    with store.inner.reader("big") as r:
        assert sum(1 for _ in r.scan("snapshots")) == 10_000
    big, cursor = page_cost()
    for _ in range(100):  # a page 100 pages deep
        _, cursor = page_cost(cursor)
    deep_big, _ = page_cost(cursor)
    assert small == big == deep_big
    assert deep_small == dict(small, rows=small["rows"] - 1)  # its last page: no row past it
    assert small["rows"] <= 51 + 4 and "snapshots" not in small["tables"]
    assert "snapshot_index" in small["tables"]


def test_asm_06_over_the_storage_service_a_page_is_the_same_round_trips_at_30_and_300(
        tmp_path):
    """An encoding service whose store is remote (the split deployment): a page of
    ListSnapshots is the same storage RPCs, each reading the same tables, with 30
    snapshots in the context and with 300."""
    from morphz.services.storage.client import StorageClient
    from tests.rpc_count import storage_service

    with storage_service(tmp_path / "server") as (app, channel, count):
        tx = app.transactions
        tx.create_context("big", caller=ME)
        tx.append_event("big", "main", "user-message", "ship it", caller=ME)
        first = EncodingCore(app.store, tx).compile("big", "main", caller=ME)
        with app.store.reader("big") as r:
            record = bytes(r.get("snapshots", (first.snapshot,))).partition(b"\n")[::2]
        remote = EncodingCore(StorageClient(channel, timeout=30), tx)

        def page_calls() -> list[str]:
            count.calls.clear()
            page = remote.list_snapshots("big", SnapshotQuery.make(session="main", limit=20),
                                         caller=ME)
            assert len(page.entries) == 20 and page.next_cursor
            return list(count.calls)
        _more_snapshots(app.store, record, 29, 0)
        small = page_calls()
        _more_snapshots(app.store, record, 270, 29)
        assert page_calls() == small
        assert "Scan:snapshot_index" in small and not any("snapshots" in c.split(":")[-1]
                                                          for c in small)
