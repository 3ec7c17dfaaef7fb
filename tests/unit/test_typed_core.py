"""The transaction core's typed seams (issue 41): its entry points take and answer
records, not dicts; every stored event's payload decodes to its kind's type and writes
back the very data it was read from (stored bytes are hashed into the chain); an
idempotency record of either stored version reads as the same typed receipt."""
from __future__ import annotations

import collections.abc
import inspect
import shutil
import typing
from pathlib import Path

import pytest

from morphz.services.storage.lmdb import LmdbStore
from morphz.services.transaction.core import payloads as P
from morphz.services.transaction.core.engine import TransactionCore
from morphz.services.transaction.core.results import Result
from morphz.shared.mind import receipts, records as R
from morphz.shared.mind.view import MindView

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "legacy_store" / "datadir"
ENTRY_POINTS = [name for name, _ in inspect.getmembers(TransactionCore, inspect.isfunction)
                if not name.startswith("_") and name != "startup_check"]


def _bare_dict(hint) -> bool:
    """Whether a type hint is or holds a bare dict (dict, dict[...], list[dict], ...)."""
    if hint is dict or typing.get_origin(hint) is dict:
        return True
    return any(_bare_dict(a) for a in typing.get_args(hint))


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_core_entry_point_takes_and_answers_records(name):
    hints = typing.get_type_hints(getattr(TransactionCore, name))
    answer = hints.pop("return")
    if typing.get_origin(answer) is collections.abc.Iterator:  # a stream of them (export)
        (answer,) = typing.get_args(answer)
    assert inspect.isclass(answer) and issubclass(answer, Result), (name, answer)
    assert not [p for p, h in hints.items() if _bare_dict(h)], (name, hints)


def test_core_entry_points_are_all_walked():
    # the 14 of issue 41, list_contexts, and issue 55's erase, delete_context, export,
    # apply_retention and retention_policy
    assert len(ENTRY_POINTS) == 20, ENTRY_POINTS


@pytest.fixture(scope="module")
def legacy_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("legacy") / "store"
    shutil.copytree(FIXTURE / "store", path)
    store = LmdbStore(str(path), sync=False)
    yield store
    store.close()


def test_audit_01_stored_event_payloads_decode_typed_and_write_back_their_data(legacy_store):
    kinds = set()
    for context in legacy_store.contexts():
        with legacy_store.reader(context) as reader:
            for (_seq,), raw in MindView(reader).event_rows():
                ev = R.loads(R.Event, raw)
                payload = P.decode(ev)
                kinds.add(type(payload))
                stored = {k: v for k, v in ev.data.items() if k != "prev"}  # chain.py's
                assert payload.to_data() == stored, ev
                assert R.dumps(ev) == raw  # the record rewritten is the bytes read
    assert kinds == {P.Created, P.Activation, P.Delivery, P.Commit, P.Policy, P.Input}


def test_dur_04_idempotency_records_of_v1_read_as_typed_receipts(legacy_store):
    found = {}
    for context in legacy_store.contexts():
        with legacy_store.reader(context) as reader:
            for (request_id,), raw in reader.scan("idempotency"):
                assert b'"v":' not in raw  # written before records were versioned
                record = receipts.loads(raw)
                assert record.v == receipts.VERSION and record.hash
                found[request_id] = record.receipt
                assert receipts.loads(receipts.canonical(raw)) == record
    assert isinstance(found["req-tx-rebased"], receipts.TxReceipt)
    assert found["req-tx-rebased"].rebased and found["req-tx-rebased"].rebased_from == 1
    call = found["req-result-1"]
    assert isinstance(call, receipts.AppendReceipt) and call.scoped
    assert (call.call, call.returned_to) == ("@e7", "activation")
    assert not found["req-user-1"].scoped
