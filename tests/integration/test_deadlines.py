"""The cores' long loops stop at their call's Deadline (shared/deadline.py) with
DEADLINE_EXCEEDED or CANCELLED and leave nothing half-done (SEC-07): audit, rebuild,
compile, traversal, the recall index's rebuild and a commit, on real LMDB in this
process (tests/integration/test_availability.py holds the same over gRPC with a
server's CPU time)."""
from __future__ import annotations

import itertools
import os

import pytest

from morphz.services.encoding.core.engine import EncodingCore
from morphz.services.recall.runtime import tokenpool
from morphz.services.recall.core.engine import RecallCore
from morphz.services.recall.core.request import SearchRequest
from morphz.services.recall.runtime.pins import SearchPins
from morphz.services.recall.runtime.indexer import Indexer
from morphz.services.recall.embedding.lsa import LsaEmbedder
from morphz.services.recall.index.index_directory import IndexDirectory
from morphz.services.storage.lmdb import LmdbStore
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.auth import IN_PROCESS_CALLER as CALLER
from morphz.shared.deadline import Deadline
from morphz.shared.errors import MorphzError

EVENTS = 40


def after_checks(n: int) -> Deadline:
    """A deadline that passes at its n-th check (a clock counting the checks)."""
    ticks = itertools.count()
    return Deadline(expires_at=n, clock=lambda: next(ticks))


CANCELLED = Deadline(cancelled=lambda: True)


@pytest.fixture
def store(tmp_path):
    store = LmdbStore(str(tmp_path / "lmdb"), sync=False)
    yield store
    store.close()


@pytest.fixture
def core(store):
    core = TransactionCore(store)
    core.create_context("c", caller=CALLER)
    for i in range(EVENTS):
        core.append_event("c", "s1", "user-message", f"event {i}", caller=CALLER)
    core.commit("c", '(context-tx (base-version 0) (create a (goal "a")) '
                '(create b (goal "b")) (relate b supersedes a))', caller=CALLER)
    return core


def stopped(reason: str, fn, *args, **kwargs) -> MorphzError:
    with pytest.raises(MorphzError) as e:
        fn(*args, **kwargs)
    assert e.value.reason == reason, e.value
    return e.value


def test_sec_07_audit_stops_mid_history_at_its_deadline(core):
    err = stopped("DEADLINE_EXCEEDED", core.audit, "c", caller=CALLER,
                  deadline=after_checks(EVENTS // 2))
    assert err.status.value == "DEADLINE_EXCEEDED"
    stopped("CANCELLED", core.audit, "c", caller=CALLER, deadline=CANCELLED)
    assert core.audit("c", caller=CALLER).match  # without one it runs through


def test_sec_07_rebuild_past_its_deadline_writes_nothing(core, store):
    status = core.status("c", caller=CALLER)
    before = status.commit_seq
    # Mid-replay, and at the check after the replay (one per event before it).
    for late in (after_checks(EVENTS // 2), after_checks(status.event_count), CANCELLED):
        stopped(late.cancelled() and "CANCELLED" or "DEADLINE_EXCEEDED",
                core.rebuild_projections, "c", caller=CALLER, deadline=late)
        assert core.status("c", caller=CALLER).commit_seq == before


def test_sec_07_a_listing_stops_at_its_deadline(core):
    assert len(core.list_frames("c", caller=CALLER).frames) == 2
    stopped("DEADLINE_EXCEEDED", core.list_frames, "c", caller=CALLER,
            deadline=after_checks(1))
    stopped("CANCELLED", core.list_frames, "c", caller=CALLER, deadline=CANCELLED)


def test_sec_07_compile_past_its_deadline_claims_and_writes_nothing(core, store):
    enc = EncodingCore(store, core)
    before = core.status("c", caller=CALLER).commit_seq
    stopped("DEADLINE_EXCEEDED", enc.compile, "c", "s1", caller=CALLER,
            deadline=after_checks(0))
    stopped("CANCELLED", enc.compile, "c", "s1", caller=CALLER, deadline=CANCELLED)
    assert core.status("c", caller=CALLER).commit_seq == before  # no activation claimed


def test_sec_07_traversal_stops_at_its_deadline(core, store, tmp_path):
    recall = RecallCore(store, core, Indexer(store, IndexDirectory(str(tmp_path / "idx"))),
                        pins=SearchPins())
    assert len(recall.traverse("c", "b", direction="ancestors", caller=CALLER).nodes) == 2
    stopped("DEADLINE_EXCEEDED", recall.traverse, "c", "b", direction="ancestors",
            caller=CALLER, deadline=after_checks(1))
    stopped("CANCELLED", recall.traverse, "c", "b", caller=CALLER, deadline=CANCELLED)


def cancelled_at(n: int) -> tuple[Deadline, list[int]]:
    """A deadline its caller cancels at its n-th check (0: never); the list counts the
    checks made."""
    checks = [0]

    def cancelled() -> bool:
        checks[0] += 1
        return checks[0] == n
    return Deadline(cancelled=cancelled), checks


def generations(root) -> list[str]:
    return sorted(os.path.relpath(d, root) for d, _, _ in os.walk(root)
                  if os.path.basename(d)[:1] == "g" and os.path.basename(d)[1:].isdigit())


@pytest.fixture
def recall(core, store, tmp_path):
    # Ten events per read chunk: the rebuild of EVENTS looks at its deadline between them.
    indexer = Indexer(store, IndexDirectory(str(tmp_path / "idx")), rebuild_read_chunk=10)
    recall = RecallCore(store, core, indexer, pins=SearchPins())
    recall.rebuild("c", caller=CALLER)
    return recall


def index_answers(recall) -> tuple:
    """What the live index answers: a search's results, its position, its last rebuild."""
    status = recall.inspect("c", caller=CALLER)
    found = recall.search(SearchRequest.parse("c", "event", limit=100), caller=CALLER).results
    return found, status.position, status.last_rebuild, status.documents


def test_sec_07_index_rebuild_past_its_deadline_leaves_the_live_index(recall, tmp_path):
    before, live = index_answers(recall), generations(tmp_path / "idx")
    # A rebuild that went through would leave another generation and last_rebuild.
    assert before[1] == recall.inspect("c", caller=CALLER).head
    assert len(before[0]) == EVENTS and len(live) == 1
    stopped("DEADLINE_EXCEEDED", recall.rebuild, "c", caller=CALLER,
            deadline=Deadline.after(-1))
    assert index_answers(recall) == before
    assert generations(tmp_path / "idx") == live  # its new generation removed
    assert not recall.inspect("c", caller=CALLER).rebuild.running


@pytest.mark.parametrize("pooled", [False, True], ids=["here", "worker-processes"])
def test_sec_07_index_rebuild_cancelled_midway_leaves_the_live_index(recall, tmp_path,
                                                                     pooled, monkeypatch):
    if pooled:  # tokenized in the rebuild's own worker processes, which stop with it
        monkeypatch.setattr(tokenpool, "MIN_PARALLEL", 0)
        monkeypatch.setattr(tokenpool, "BATCH", 5)
    counting, checks = cancelled_at(0)
    recall.rebuild("c", caller=CALLER, deadline=counting)  # how many checks a rebuild makes
    last = checks[0]
    before, live = index_answers(recall), generations(tmp_path / "idx")
    events = recall.inspect("c", caller=CALLER).events
    assert last == -(-events // 10) + 1  # one per read chunk and one before the swap
    for at in (2, last):  # among the read chunks, and just before the swap
        deadline, checks = cancelled_at(at)
        stopped("CANCELLED", recall.rebuild, "c", caller=CALLER, deadline=deadline)
        assert checks[0] == at  # stopped at that check, not later
        assert index_answers(recall) == before
        assert generations(tmp_path / "idx") == live
        progress = recall.inspect("c", caller=CALLER).rebuild
        assert not progress.running and progress.total == before[3]
        # Mid-way: some chunks left unread; at the swap: everything indexed first.
        assert (progress.done == progress.total) == (at == last)


def test_sec_07_an_index_rebuild_stops_in_its_fit_sample_read(core, store, tmp_path):
    """With an embedder that learns from the context's text (LSA), a rebuild also reads a
    fit sample, a chunk per read transaction: it looks at its deadline before each chunk
    and once read, before the fit, and stops there with nothing swapped in."""
    indexer = Indexer(store, IndexDirectory(str(tmp_path / "idx")), embedder=LsaEmbedder(),
                      rebuild_read_chunk=10)
    recall = RecallCore(store, core, indexer, pins=SearchPins())
    recall.rebuild("c", caller=CALLER)
    counting, checks = cancelled_at(0)
    recall.rebuild("c", caller=CALLER, deadline=counting)
    events = recall.inspect("c", caller=CALLER).events
    chunks = -(-events // 10)
    # the lexical read's chunks, the fit sample's chunks, before the fit, before the swap
    assert checks[0] == 2 * chunks + 2
    before, live = index_answers(recall), generations(tmp_path / "idx")
    for at in (chunks + 2, 2 * chunks + 1):  # in the fit sample's read; before the fit
        deadline, checks = cancelled_at(at)
        stopped("CANCELLED", recall.rebuild, "c", caller=CALLER, deadline=deadline)
        assert checks[0] == at  # stopped at that check, not later
        assert index_answers(recall) == before
        assert generations(tmp_path / "idx") == live


def test_sec_07_commit_past_its_deadline_is_not_submitted(core):
    big = "(context-tx (base-version 1) " + " ".join(
        f'(create n{i} (goal "goal {i}"))' for i in range(200)) + ")"
    before = core.status("c", caller=CALLER)
    stopped("DEADLINE_EXCEEDED", core.commit, "c", big, caller=CALLER,
            deadline=Deadline.after(-1))
    assert core.status("c", caller=CALLER) == before
    # Parsed in time, past it once validated: still nothing submitted.
    deadline, checks = cancelled_at(2)
    stopped("CANCELLED", core.commit, "c", big, caller=CALLER, deadline=deadline)
    assert checks[0] == 2
    assert core.status("c", caller=CALLER) == before
    assert core.commit("c", big, caller=CALLER).revision == before.revision + 1
