"""DUR-05: every transaction (and activation) event records the rules version that decided
it, and replay applies that version's rules, so old history still audits as matching after a
rule change while new commits follow the new rule."""
from __future__ import annotations

import dataclasses

import grpc
import pytest

from morphz.services.server.app import AllInOne, ServerConfig
from morphz.services.transaction.client import TransactionClient
from morphz.services.transaction.core import rules
from morphz.services.transaction.core.replay import replay
from morphz.shared.mind.state import MindState

CTX = "pinned"
pytestmark = pytest.mark.all_in_one(
    reason="configures an all-in-one server of its own (rules_version) and reads its store")


def _serve(data_dir, **config):
    app = AllInOne(ServerConfig(str(data_dir), "127.0.0.1:0", **config)).start()
    channel = grpc.insecure_channel(f"127.0.0.1:{app.port}")
    return app, channel, TransactionClient(channel, timeout=30)


def _tx(client, base: int, ops: str, reason: str = "") -> dict:
    why = f' (reason "{reason}")' if reason else ""
    return client.commit(CTX, f"(context-tx (base-version {base}){why} {ops})")


def _stored_events(app):
    with app.store.reader(CTX) as reader:
        return list(MindState(reader).events())


def test_dur_05_old_history_replays_under_its_own_rules(tmp_path, expect_rejected):
    assert rules.CURRENT == 2
    # A small history decided under version 1, where a rollback stamped only its checkpoint:
    # the stale revise below was rebased over the rolled-back frame.
    app, channel, v1 = _serve(tmp_path / "data", rules_version=1)
    try:
        v1.create_context(CTX, window=1)
        _tx(v1, 0, "(create a (v original)) (create b (x))")
        _tx(v1, 1, "(checkpoint cp)")
        _tx(v1, 2, "(revise a (v changed))")
        _tx(v1, 3, "(rollback cp)")
        assert _tx(v1, 3, "(revise a (v stale))")["rebased"]       # version 1's decision
        _tx(v1, 5, "(retire b)", reason="done")
        v1.append_event(CTX, "s1", "tool-result", "out")
        v1.activate(CTX, "s1")                                      # b's window runs out
        old = _stored_events(app)
        assert all("rules" not in ev.data for ev in old)            # as version 1 wrote them
    finally:
        channel.close()
        app.stop(grace=1)

    # The same store under the current rules: the old history still audits as matching...
    app, channel, v2 = _serve(tmp_path / "data")
    try:
        assert v2.audit(CTX)["match"]
        # ...because replay follows each event's version: under version 2 rules the same
        # events would stamp other boundaries (the rule really changed).
        as_v2 = [dataclasses.replace(ev, data={**ev.data, "rules": 2})
                 if ev.kind in ("context-tx", "activation") else ev for ev in old]
        assert replay(CTX, as_v2)[0]["boundaries"] != replay(CTX, old)[0]["boundaries"]
        # New commits follow the new rule: the same stale revise is now rejected.
        _tx(v2, 6, "(checkpoint cp2)")
        _tx(v2, 7, "(revise a (v newer))")
        _tx(v2, 8, "(rollback cp2)")
        expect_rejected("TX_CONFLICT", _tx, v2, 8, "(revise a (v stale again))")
        assert v2.get_frame(CTX, "a")["body"] == "(v stale)"
        new = _stored_events(app)[len(old):]
        assert {ev.data.get("rules") for ev in new if ev.kind == "context-tx"} == {2}
        assert v2.audit(CTX)["match"]                               # a mixed history too
    finally:
        channel.close()
        app.stop(grace=1)


def test_dur_05_unknown_rules_version_is_refused(tmp_path, expect_rejected):
    expect_rejected("RULES_VERSION_UNSUPPORTED", AllInOne,
                    ServerConfig(str(tmp_path / "data"), "127.0.0.1:0", rules_version=99))
