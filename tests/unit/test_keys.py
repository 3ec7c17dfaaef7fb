"""Storage keys (shared/storage/keys.py): decode gives back the tuple encode was given,
behind a context prefix too, whatever the shape (the common ones take a shorter path)."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from morphz.shared.storage import keys

_part = st.one_of(st.integers(0, 2 ** 64 - 1),
                  st.text(alphabet=st.characters(blacklist_categories=("Cs",),
                                                 blacklist_characters="\x00"), max_size=8))


@settings(max_examples=500, deadline=None)
@given(st.lists(_part, max_size=4).map(tuple), st.text(max_size=6).filter(lambda c: "\x00" not in c))
def test_decode_gives_back_the_key_encoded(key, context):
    prefix = keys.context_prefix(context)
    assert keys.decode(keys.encode(key)) == key
    assert keys.decode(keys.encode_in(prefix, key), len(prefix)) == key


def test_decode_of_the_common_shapes():
    for key in [(), (0,), (2 ** 64 - 1,), ("",), ("é",), ("s1", 7), ("s1", "x"), (3, "a"),
                ("a", 1, "b"), ("a", 1, 2)]:
        assert keys.decode(keys.encode(key)) == key
