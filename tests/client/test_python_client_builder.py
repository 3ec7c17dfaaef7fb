"""CORE-04 across forms: the same transaction written with the client's Tx builder and as
DSL text commits byte-identical events. The cases live in
tests/fixtures/client_transactions.json, shared with the TypeScript client's tests: each
has the builder calls (snake_case method, arguments), the structured form the calls must
produce (proto3 JSON), the DSL text, and the canonical text the committed event holds."""
from __future__ import annotations

import json
import pathlib
import uuid

import pytest
from google.protobuf import json_format

from morphz.client import Tx
from morphz.services.transaction.convert import tx_to_proto
from morphz.services.transaction.core.txlang import parse_text
from tests.stored_events import event_bytes

FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "client_transactions.json"
CASES = json.loads(FIXTURE.read_text(encoding="utf-8"))


def build(case: dict) -> Tx:
    tx = Tx(case["base_version"], case.get("reason", ""), base_tick=case.get("base_tick"))
    for method, args, kwargs in case["calls"]:
        getattr(tx, method)(*args, **kwargs)
    return tx


@pytest.mark.parametrize("case", CASES["transactions"], ids=lambda c: c["name"])
def test_core_04_client_builder_makes_the_fixtures_structured_form(case):
    structured = json_format.MessageToDict(build(case).to_proto())
    assert structured == case["structured"]
    # The fixture's structured form is the server's own reading of its text, so neither
    # builder (this one, the TypeScript one) is checked against itself.
    assert json_format.MessageToDict(tx_to_proto(parse_text(case["text"]))) == structured


def test_core_04_client_builder_and_dsl_text_commit_byte_identical_events(mz, storage):
    pair = {form: f"py-forms-{form}-{uuid.uuid4().hex[:8]}" for form in ("builder", "text")}
    for context in pair.values():
        mz.create_context(context)
        for step in CASES["setup"]:
            (method, kwargs), = step.items()
            getattr(mz, method)(context, **kwargs)
    for case in CASES["transactions"]:
        # The same request id in both (the event records it), in contexts of their own.
        by_builder = mz.commit(pair["builder"], build(case), session=CASES["session"],
                               request_id=case["name"])
        by_text = mz.commit(pair["text"], case["text"], session=CASES["session"],
                            request_id=case["name"])
        assert by_builder.event_ref == by_text.event_ref
        assert json_format.MessageToDict(by_builder) == json_format.MessageToDict(by_text)
        assert event_bytes(storage, pair["builder"], by_builder.event_ref) == \
            event_bytes(storage, pair["text"], by_text.event_ref)
        assert mz.event(pair["builder"], by_builder.event_ref).text == case["event_text"]
    frames = [json_format.MessageToDict(mz.frames(c)) for c in pair.values()]
    assert frames[0] == frames[1]
