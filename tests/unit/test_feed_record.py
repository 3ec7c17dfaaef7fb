"""The stores' change-feed record (shared/storage/feed.py): the bytes they write are the
ones json.dumps wrote before msgspec did (stores written then are read the same), and
they read back; an erasure's adds the keys it rewrote (issue 55)."""
from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from morphz.shared.storage.feed import (Change, pack_change as _pack_change,
                                        unpack_change as _unpack_change)

_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)  # no lone surrogates


def _as_json_wrote(c: Change) -> bytes:
    return json.dumps({"c": c.context, "s": c.commit_seq, "e": c.events, "f": c.frames},
                      ensure_ascii=False, separators=(",", ":")).encode()


@settings(max_examples=300, deadline=None)
@given(context=_TEXT, commit_seq=st.integers(0, 2**63 - 1),
       events=st.lists(st.integers(0, 2**63 - 1), max_size=5),
       frames=st.lists(_TEXT, max_size=5), position=st.integers(1, 2**63 - 1))
def test_a_feed_record_is_the_json_it_always_was_and_reads_back(context, commit_seq, events,
                                                                 frames, position):
    c = Change(position, context, commit_seq, tuple(events), tuple(frames))
    raw = _pack_change(c)
    assert raw == _as_json_wrote(c)
    assert _unpack_change(position, raw) == c


def test_a_record_written_with_spaces_still_reads():
    raw = b'{"c": "ctx", "s": 3, "e": [7, 8], "f": ["a\\u00e9", "\\"q\\""]}'
    assert _unpack_change(9, raw) == Change(9, "ctx", 3, (7, 8), ("a\u00e9", '"q"'))


def test_priv_03_an_erasures_feed_record_names_what_it_rewrote_and_reads_back():
    c = Change(7, "ctx", 3, (1, 4), ("f",), erased=(1,), erased_frames=("f",))
    raw = _pack_change(c)
    assert raw == b'{"c":"ctx","s":3,"e":[1,4],"f":["f"],"x":[1],"y":["f"]}'
    assert _unpack_change(7, raw) == c
