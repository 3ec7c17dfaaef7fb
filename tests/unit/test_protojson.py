"""from_plain fills messages by direct assignment; it must give what json_format gives."""
from google.protobuf import json_format

from morphz.api.encoding.v1 import encoding_pb2
from morphz.api.transaction.v1 import transaction_pb2 as pb
from morphz.shared.protojson import _drop_none, from_plain, to_plain


def reference(d: dict, msg):
    return json_format.ParseDict(_drop_none(d), msg, ignore_unknown_fields=True)


CASES = [
    (pb.Receipt, {"revision": 7, "rebased": True, "rebased_from": 3, "unknown_key": [1, 2],
                  "capacity": {"released_now_bytes": 10, "released_after_window_bytes": 0},
                  "results": [{"op": "revise", "target": "a", "outcome": "revised",
                               "frame_revision": 2, "extra": None}]}),
    (pb.ContextStatus, {"context": "c", "revision": 1, "frames_by_state": {"active": 2},
                        "sessions": [{"id": "s", "pending": 0}], "window": None}),
    (pb.Receipt, {"capacity": {}}),            # an empty dict marks the field present
    (pb.Receipt, {"revision": 3.0}),            # float for an int: json_format's conversion
    (encoding_pb2.SnapshotRecord, {"record_json": "e30="}),  # base64 text for bytes
]


def test_from_plain_matches_json_format():
    for cls, d in CASES:
        fast, ref = from_plain(d, cls()), reference(d, cls())
        assert fast == ref, (cls.__name__, d)
        assert fast.SerializeToString(deterministic=True) == \
            ref.SerializeToString(deterministic=True)


def test_from_plain_round_trips_to_plain():
    msg = from_plain(CASES[0][1], pb.Receipt())
    assert from_plain(to_plain(msg), pb.Receipt()) == msg


def test_from_plain_assigns_directly_when_types_match():
    # The fast path must really be taken for replies shaped like the core's (no fallback).
    from morphz.shared.protojson import _fill
    for cls, d in CASES[:3]:
        msg = cls()
        _fill(msg, d)
        assert msg == reference(d, cls())
