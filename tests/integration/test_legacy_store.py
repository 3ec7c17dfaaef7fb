"""A store written by an earlier main (tests/fixtures/legacy_store: datadir/ and the
receipts of its requests, made by make.py there) opened by today's server: every
context audits `match`, a retry of each recorded request gets its original receipt, and
the store accepts new commits (issue 41: stored formats are versioned and upcast on
read, and event bytes stored before keep their hash)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.topology import ServerProcess

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "legacy_store"
RECORDED = json.loads((FIXTURE / "receipts.json").read_text())


@pytest.fixture(scope="module")
def legacy(tmp_path_factory):
    """The fixture's data, copied (the committed files stay as written), served."""
    data = tmp_path_factory.mktemp("legacy") / "data"
    shutil.copytree(FIXTURE / "datadir", data)
    server = ServerProcess(data).start()
    yield server
    server.kill()


@pytest.fixture(scope="module")
def client(legacy):
    c = legacy.client()
    yield c
    c.close()


def _audit_matches(client, context: str) -> None:
    report = client.audit(context)
    assert report["match"], report
    assert report["chain"]["match"], report


@pytest.mark.parametrize("context", RECORDED["contexts"])
def test_audit_01_dur_05_a_store_written_before_audits_match(client, context):
    _audit_matches(client, context)


def _retried(reply: dict, again: dict) -> dict:
    """A reply as its retry answers it: the same fields, marked replayed. A batch's
    retry in which every item was applied before answers the context's commit_seq now
    (writer.py, _commit_seq_of: a batch reply names no one event), a position at or past
    the original: read-your-writes holds for it as for the original (RECALL-13)."""
    if "events" in reply:
        seqs = {e["commit_seq"] for e in again["events"]}
        assert len(seqs) == 1 and seqs.pop() >= reply["events"][0]["commit_seq"]
        return dict(reply, events=[dict(e, replayed=True, commit_seq=a["commit_seq"])
                                   for e, a in zip(reply["events"], again["events"])])
    return dict(reply, replayed=True) if "replayed" in reply else reply


@pytest.mark.parametrize("request_", RECORDED["requests"],
                         ids=[r["kwargs"].get("request_id") or r["method"]
                              for r in RECORDED["requests"]])
def test_dur_04_a_retry_recorded_before_gets_its_original_receipt(client, request_):
    again = getattr(client, request_["method"])(*request_["args"], **request_["kwargs"])
    assert again == _retried(request_["reply"], again)


def test_audit_01_a_store_written_before_accepts_new_commits(client):
    context = RECORDED["contexts"][0]
    status = client.status(context)
    ev = client.append_event(context, "s1", "user-message", "after the upgrade",
                             request_id="req-after-upgrade")
    client.activate(context, "s1")
    receipt = client.commit(context, f"(context-tx (base-version {status['revision']}) "
                            f"(derive upgraded (from {ev['ref']}) (still works)))",
                            request_id="req-tx-after-upgrade")
    assert receipt["revision"] == status["revision"] + 1
    assert client.get_frame(context, "upgraded")["sources"] == [ev["ref"]]
    _audit_matches(client, context)


def test_priv_02_envelope_links_begin_where_the_meta_records_after_a_store_written_before(
        tmp_path):
    """The store's events link by their predecessor's stored bytes (`prev`); the first
    event written since links to its predecessor's envelope (`link`), the meta records
    that seq, and audit verifies both kinds in one chain."""
    from morphz.services.storage.lmdb import LmdbStore
    from morphz.shared.mind import envelope, records as R

    shutil.copytree(FIXTURE / "datadir", tmp_path / "data")
    server = ServerProcess(tmp_path / "data").start()
    context = RECORDED["contexts"][2]
    try:
        c = server.client()
        before = c.status(context)["event_count"]
        c.append_event(context, "s1", "user-message", "after the upgrade")
        c.append_event(context, "s1", "user-message", "and once more")
        report = c.audit(context)
        assert report["match"] and report["chain"]["checked"] == before + 1, report
        c.close()
    finally:
        assert server.stop() == 0, server.stderr()
    store = LmdbStore(str(tmp_path / "data" / "store"))
    try:
        with store.reader(context) as r:
            rows = [raw for _, raw in r.scan("events")]
            meta = R.loads(R.Meta, r.get("meta", ()))
    finally:
        store.close()
    data = [json.loads(raw)["data"] for raw in rows]
    assert all("prev" in d and "link" not in d for d in data[1:before])
    assert meta.links_from == before and data[before]["link"] == envelope.next_link(
        json.loads(rows[before - 1]), rows[before - 1], True)
    assert data[before + 1]["link"] == envelope.next_link(json.loads(rows[before]),
                                                          rows[before], True)
    assert meta.chain == envelope.next_link(json.loads(rows[-1]), rows[-1], True)
