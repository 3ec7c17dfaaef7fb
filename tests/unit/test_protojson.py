"""from_plain builds messages through their constructors, falling back to assignment
and then json_format; it must give what json_format gives. to_plain must give what a
plain walk of the descriptor gives, key order included (the CLI prints it)."""
from google.protobuf import json_format

from morphz.api.encoding.v1 import encoding_pb2
from morphz.api.transaction.v1 import transaction_pb2 as pb
from morphz.shared.grpc.protojson import _drop_none, from_plain, to_plain


def reference(d: dict, msg):
    return json_format.ParseDict(_drop_none(d), msg)


CASES = [
    (pb.Receipt, {"revision": 7, "rebased": True, "rebased_from": 3,
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
        fast, ref = from_plain(d, cls), reference(d, cls())
        assert fast == ref, (cls.__name__, d)
        assert fast.SerializeToString(deterministic=True) == \
            ref.SerializeToString(deterministic=True)


def test_from_plain_round_trips_to_plain():
    msg = from_plain(CASES[0][1], pb.Receipt)
    assert from_plain(to_plain(msg), pb.Receipt) == msg


def test_from_plain_assigns_directly_when_types_match():
    # The fast path must really be taken for replies shaped like the core's (no fallback).
    from morphz.shared.grpc.protojson import _fill
    for cls, d in CASES[:3]:
        msg = cls()
        _fill(msg, d)
        assert msg == reference(d, cls())


def test_from_plain_builds_through_the_constructor_when_types_match(monkeypatch):
    # Replies shaped like the core's take the constructor path; a None for a key the
    # message lacks (CASES[0]'s "extra") is left out by the field-by-field fallback.
    import morphz.shared.grpc.protojson as pj
    calls = []
    real = pj._fill
    monkeypatch.setattr(pj, "_fill", lambda *a: calls.append(a) or real(*a))
    for cls, d in CASES[1:3]:
        assert from_plain(d, cls) == reference(d, cls())
    assert calls == []
    assert from_plain(CASES[0][1], CASES[0][0]) == reference(CASES[0][1], CASES[0][0]())
    assert calls


def descriptor_walk(msg) -> dict:
    """The reference to_plain: every field of the descriptor, walked per message."""
    out = {}
    for f in msg.DESCRIPTOR.fields:
        value = getattr(msg, f.name)
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            vf = f.message_type.fields_by_name["value"]
            out[f.name] = {k: (descriptor_walk(v) if vf.message_type else v)
                           for k, v in value.items()}
        elif f.is_repeated:
            out[f.name] = [descriptor_walk(v) if f.message_type else v for v in value]
        elif f.message_type is not None:
            out[f.name] = descriptor_walk(value) if msg.HasField(f.name) else None
        elif f.containing_oneof is not None and not msg.HasField(f.name):
            continue
        else:
            out[f.name] = value
    return out


def test_to_plain_matches_a_walk_of_the_descriptor():
    from morphz.api.common.v1 import common_pb2
    tx = pb.Transaction(base_version=4, reason="r", ops=[
        pb.Op(create=pb.FrameBody(frame_id="a", body="(goal x)")),
        pb.Op(place=pb.Place(frame_id="a", first=True)),
        pb.Op(checkpoint="c1"), pb.Op()])
    messages = [
        from_plain(CASES[0][1], pb.Receipt),
        from_plain(CASES[1][1], pb.ContextStatus),
        pb.Receipt(),
        tx,
        pb.Transaction(base_version=1, base_tick=0),  # proto3 optional, set to its default
        pb.CommitRequest(context="c", structured=tx),
        pb.CommitRequest(context="c", text="(context-tx)"),
        common_pb2.KeyPart(number=0),
        common_pb2.KeyPart(),
        encoding_pb2.Encoding(text="t", items=[{"region": "mind", "key": "a", "start": 1,
                                                "parts": [{"owner": "agent", "end": 3}]}],
                              pressure={"used_bytes": 5}),
    ]
    for msg in messages:
        plain = to_plain(msg)
        assert plain == descriptor_walk(msg), type(msg).__name__
        assert list(plain) == list(descriptor_walk(msg))  # the same key order
    assert "base_tick" in to_plain(messages[4]) and "base_tick" not in to_plain(tx)
    assert to_plain(messages[7]) == {"number": 0} and to_plain(messages[8]) == {}
