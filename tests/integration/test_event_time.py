"""Event time from the source (RECALL-11) and recall observations kept out of the index
(RECALL-12), over real gRPC, a real LMDB store and a real index."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import grpc
import pytest

from morphz.services.encoding.client import EncodingClient
from morphz.services.recall.client import RecallClient
from tests.integration.test_recall import caught_up, found, search

CST = timezone(timedelta(hours=8))
OLD = datetime(2019, 3, 1, 9, 30, tzinfo=CST)  # long before any event is recorded


@pytest.fixture(scope="module")
def recall(endpoints):
    channel = grpc.insecure_channel(endpoints.recall)
    yield RecallClient(channel, timeout=30)
    channel.close()


@pytest.fixture(scope="module")
def enc(endpoints):
    channel = grpc.insecure_channel(endpoints.encoding)
    yield EncodingClient(channel, timeout=30)
    channel.close()


# -- RECALL-11 ---------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["2019-03-01T09:30:00", "2019-03-01", "yesterday", "12:00"])
def test_recall_11_an_occurred_time_without_an_offset_is_refused(mind, expect_rejected, value):
    err = expect_rejected("CONTEXT_INPUT_INVALID", mind.event, "imported", occurred_at=value)
    assert err.details["field"] == "occurred_at"
    assert mind.status()["event_count"] == 1  # nothing appended (only context-created)


def test_recall_11_an_occurred_time_without_an_offset_is_refused_in_a_batch(
        mind, expect_rejected):
    good = {"session": "s1", "kind": "user-message", "text": "fine",
            "occurred_at": OLD.isoformat()}
    err = expect_rejected("CONTEXT_INPUT_INVALID", mind.client.append_events, mind.context,
                          [good, dict(good, occurred_at="2019-03-01T09:30:00")])
    assert err.details["field"] == "occurred_at" and err.details["index"] == 1
    assert mind.status()["event_count"] == 1  # the good one was not applied either


def test_recall_11_time_range_search_uses_occurred_time_else_recorded(recall, mind):
    old = mind.event("migrated transcript line", occurred_at=OLD.isoformat())
    new = mind.event("fresh transcript line")
    recorded = datetime.fromisoformat(mind.client.get_event(mind.context, new["ref"])["time"])

    def hits(since, until):
        reply = search(recall, mind, "transcript", since=since.isoformat(),
                       until=until.isoformat(), kinds=["event"])
        return {h["ref"]: h for h in reply["results"]}
    # The old event is found in its own window, under its occurred time...
    around_old = hits(OLD - timedelta(minutes=1), OLD + timedelta(minutes=1))
    assert list(around_old) == [old["ref"]]
    h = around_old[old["ref"]]
    assert h["time_basis"] == "occurred"
    assert datetime.fromisoformat(h["occurred_at"]) == OLD
    assert datetime.fromisoformat(h["time"]) > OLD + timedelta(days=365)  # recorded today
    # ...and not in the window it was recorded in, where the event without one is.
    around_now = hits(recorded - timedelta(minutes=5), recorded + timedelta(minutes=5))
    assert list(around_now) == [new["ref"]]
    assert around_now[new["ref"]]["time_basis"] == "recorded"
    assert around_now[new["ref"]]["occurred_at"] == ""
    # Offsets are compared as instants: the same bound in UTC finds the same event.
    utc = OLD.astimezone(timezone.utc)
    assert found(search(recall, mind, "", since=utc.isoformat(),
                        until=(utc + timedelta(seconds=1)).isoformat())) == [old["ref"]]


def test_recall_11_reads_and_encodings_show_the_occurred_time(recall, enc, mind):
    old = mind.event("the deploy failed on host-7", occurred_at="2019-03-01T09:30:00Z")
    new = mind.event("the deploy succeeded")
    ev = mind.client.get_event(mind.context, old["ref"])
    # Normalized as `time` is (microseconds), its own offset kept.
    assert ev["occurred_at"] == "2019-03-01T09:30:00.000000+00:00"
    assert ev["time"] != ev["occurred_at"]
    assert mind.client.get_event(mind.context, new["ref"])["occurred_at"] == ""
    caught_up(recall, mind.context)
    assert recall.read(mind.context, old["ref"])["occurred_at"] == ev["occurred_at"]
    assert recall.read(mind.context, new["ref"])["occurred_at"] == ""
    e = enc.compile(mind.context, "s1")
    text = e["text"]
    obs = {it["key"]: text[it["start"]:it["end"]] for it in e["items"]
           if it["kind"] == "observation"}
    assert f'(time "{ev["time"]}") (occurred "{ev["occurred_at"]}")' in obs[old["ref"]]
    assert "(occurred" not in obs[new["ref"]]
    # The snapshot the compile wrote replays byte-exact, occurred time included.
    assert enc.replay(mind.context, e["snapshot"])["match"]


def test_recall_11_an_encodings_scope_time_range_uses_occurred_time_else_recorded(enc, mind):
    old = mind.event("imported from the old tracker", occurred_at=OLD.isoformat())
    new = mind.event("written just now")
    recorded = datetime.fromisoformat(mind.client.get_event(mind.context, new["ref"])["time"])

    def compiled(since: datetime, until: datetime) -> tuple[dict, set, dict]:
        e = enc.compile(mind.context, "s1", scope={"since": since.isoformat(),
                                                   "until": until.isoformat()})
        shown = {it["key"] for it in e["items"] if it["kind"] == "observation"}
        omitted = {o["key"]: o["reason"] for o in e["omitted"]}
        return e, shown, omitted
    # Around the old event's occurred time: it is in, the one recorded today is not.
    e, shown, omitted = compiled(OLD - timedelta(minutes=1), OLD + timedelta(minutes=1))
    assert old["ref"] in shown and new["ref"] not in shown
    assert omitted[new["ref"]] == "outside scope: at or after until"
    assert enc.read(mind.context, e["snapshot"], old["ref"])["text"] == \
        "imported from the old tracker"
    assert enc.replay(mind.context, e["snapshot"])["match"]
    # Around today: the event without an occurred time is judged by its recorded time;
    # the old one, recorded in this window too, is not in it.
    e, shown, omitted = compiled(recorded - timedelta(minutes=5),
                                 recorded + timedelta(minutes=5))
    assert new["ref"] in shown and old["ref"] not in shown
    assert omitted[old["ref"]] == "outside scope: before since"
    assert enc.replay(mind.context, e["snapshot"])["match"]


# -- RECALL-12 ---------------------------------------------------------------------------
def test_recall_12_a_search_never_finds_its_own_earlier_results(recall, mind):
    target = mind.event("the sandbox quota is 40 GiB per tenant")
    act = mind.activate("s1")
    evaluation = {"session": "s1", "activation": act["id"]}
    first = search(recall, mind, "sandbox quota", evaluation=evaluation)
    assert found(first) == [target["ref"]]
    obs = first["observation_ref"]
    # The observation holds the hit's preview (so its words), and stays readable by ref.
    assert "sandbox" in mind.client.get_event(mind.context, obs)["text"]
    assert "sandbox" in recall.read(mind.context, obs)["text"]
    second = search(recall, mind, "sandbox quota", evaluation=evaluation)
    assert found(second) == [target["ref"]]  # not the first search's observation
    # Neither by its own words, nor by time, nor after a rebuild of the index.
    assert obs not in found(search(recall, mind, "recall", kinds=["event"]))
    recall.rebuild(mind.context)
    assert found(search(recall, mind, "sandbox quota")) == [target["ref"]]
    assert obs not in found(search(recall, mind, "", since="2000-01-01T00:00:00Z", limit=100))


def test_recall_11_events_without_an_occurred_time_are_stored_as_before(mind, storage):
    """Backward compatible: the field lives in the event's data only where given, so an
    event appended without it is the record it always was; audit replays both kinds."""
    plain = mind.event("no source time", request_id="plain-1")
    dated = mind.event("with a source time", occurred_at=OLD.isoformat())
    with storage.reader(mind.context) as r:
        raw_plain = r.get("events", (int(plain["ref"][2:]),))
        raw_dated = r.get("events", (int(dated["ref"][2:]),))
    assert b'"occurred_at"' not in raw_plain
    assert b'"occurred_at":"2019-03-01T09:30:00.000000+08:00"' in raw_dated
    # The same request again is a replay (its payload hash is the one it always had).
    assert mind.event("no source time", request_id="plain-1")["replayed"] is True
    report = mind.client.audit(mind.context)
    assert report["match"], report
    assert mind.client.rebuild_projections(mind.context)["rewritten"] == {}


def test_a_batch_is_bounded_and_names_the_item_it_refuses(mind, expect_rejected):
    expect_rejected("CONTEXT_INPUT_INVALID", mind.client.append_events, mind.context, [])
    ok = {"session": "s1", "kind": "user-message", "text": "fine"}
    err = expect_rejected("EVENT_KIND_INVALID", mind.client.append_events, mind.context,
                          [ok, ok, dict(ok, kind="no-such-kind")])
    assert err.details["index"] == 2
    err = expect_rejected("CONTEXT_NOT_FOUND", mind.client.append_events,
                          mind.context + "-missing", [ok])
    assert "index" not in err.details  # the whole batch's refusal names no item
    assert mind.status()["event_count"] == 1
