"""The reply builder never trims a core's result silently: a key the reply message lacks
is an error (the servicer's boundary then answers INTERNAL and logs it)."""
from __future__ import annotations

import pytest

from morphz.api.transaction.v1 import transaction_pb2 as pb
from morphz.shared.grpc.protojson import ReplyShapeError, from_plain


def test_a_key_the_reply_lacks_is_an_error_not_trimmed():
    with pytest.raises(ReplyShapeError) as info:
        from_plain({"context": "c", "revision": 1, "not_in_proto": 2}, pb.ContextStatus)
    assert "not_in_proto" in str(info.value)


def test_a_nested_key_the_reply_lacks_is_an_error_too():
    with pytest.raises(ReplyShapeError):
        from_plain({"context": "c", "sessions": [{"id": "s1", "bogus": True}]},
                   pb.ContextStatus)


def test_none_values_stay_unset_and_known_keys_fill():
    msg = from_plain({"context": "c", "revision": 3, "window": None}, pb.ContextStatus)
    assert msg.context == "c" and msg.revision == 3 and msg.window == 0
