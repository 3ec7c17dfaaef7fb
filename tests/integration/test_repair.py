"""No write can brick a context: rows planted through the internal storage API (as an
operator's mistake or a restored file would leave them) are found by audit, block
nothing for good, and `rebuild-projections` moves them aside (quarantine) with every
committed event kept. Runs on both topologies."""
from __future__ import annotations

import json
import time

import grpc
import pytest

from morphz.services.recall.client import RecallClient
from morphz.shared.errors import MorphzError
from morphz.shared.storage.api import Write

MARK = "zanzibarquux"  # a word no genuine event holds


@pytest.fixture(scope="module")
def recall(endpoints):
    channel = grpc.insecure_channel(endpoints.recall)
    yield RecallClient(channel, timeout=30)
    channel.close()


def caught_up(recall: RecallClient, context: str) -> None:
    for _ in range(600):
        if recall.inspect(context)["lag"] == 0:
            return
        time.sleep(0.02)
    raise AssertionError(f"the index of {context} did not catch up")


def plant(storage, context: str, writes: list[Write]) -> None:
    with storage.reader(context) as r:
        seq = r.commit_seq
    storage.commit(context, seq, writes)


def rows(storage, context: str, table: str) -> list:
    with storage.reader(context) as r:
        return list(r.scan(table))


def test_sec_03_a_row_planted_at_the_tail_blocks_appends_until_rebuild_moves_it_aside(
        client, storage, recall, mind):
    mind.event("deploy the release")
    mind.tx("(create release (state planned))")
    before = rows(storage, mind.context, "events")
    tail = len(before)
    # A decodable copy of a genuine event at the next sequence, with its own words, and an
    # undecodable event id pointing past the history.
    forged = json.loads(before[1][1])
    forged.update(seq=tail, id="forged-id", text=f"{MARK} approved the release")
    plant(storage, mind.context, [Write("events", (tail,), json.dumps(forged).encode()),
                                  Write("event_ids", ("forged-id",), str(tail).encode())])

    with pytest.raises(MorphzError) as info:
        mind.event("ship it")
    assert info.value.reason == "CONTEXT_DAMAGED"
    audit = client.audit(mind.context)
    assert not audit["match"] and audit["chain"]["first_broken"] == f"@e{tail}"
    caught_up(recall, mind.context)
    assert recall.search(mind.context, MARK)["results"]  # the forged event was indexed

    report = client.rebuild_projections(mind.context)
    assert sorted(report["quarantined"]) == ["event_ids/forged-id", f"events/{tail}"]
    assert report["unrepairable"] == []
    # Nothing committed is lost; the planted rows are kept aside, byte for byte.
    assert rows(storage, mind.context, "events") == before
    aside = {key[1:]: raw for key, raw in rows(storage, mind.context, "quarantine")}
    assert json.loads(aside[("events", tail)])["text"] == f"{MARK} approved the release"
    assert aside[("event_ids", "forged-id")] == str(tail).encode()
    caught_up(recall, mind.context)
    assert recall.search(mind.context, MARK)["results"] == []

    assert mind.event("ship it")["ref"] == f"@e{tail}"  # the sequence goes on
    assert client.audit(mind.context)["match"]
    again = client.rebuild_projections(mind.context)
    assert again["quarantined"] == [] and again["rewritten"] == {}


def test_sec_03_rows_planted_under_a_never_created_name_do_not_break_creating_it(
        client, storage, request):
    name = f"planted-{request.node.name[-20:]}-{time.monotonic_ns()}"
    plant(storage, name, [Write("frames", ("f",), b"not a frame"),
                          Write("events", (0,), b"\xff not an event")])
    status = client.create_context(name)
    assert status["event_count"] == 1 and status["frames_by_state"]["active"] == 0
    assert client.audit(name)["match"]
    aside = sorted(key[1:] for key, _ in rows(storage, name, "quarantine"))
    assert aside == [("events", 0), ("frames", "f")]
