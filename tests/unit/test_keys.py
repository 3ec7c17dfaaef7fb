"""Storage keys (shared/storage/keys.py): decode gives back the tuple encode was given,
behind a context prefix too, whatever the shape (the common ones take a shorter path)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from morphz.shared.errors import MorphzError
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


_str_part = st.text(alphabet=st.characters(blacklist_categories=("Cs",),
                                           blacklist_characters="\x00"), max_size=8)
# Runs as a scan reads them: mostly one shape (the runs decode_run reads in C), parts
# that hold the context's own prefix text, and now and then another shape mixed in.
_run_key = st.one_of(st.integers(0, 2 ** 64 - 1).map(lambda i: (i,)),
                     _str_part.map(lambda s: (s,)),
                     st.sampled_from(["\x02c", "\x02c\x02", "c", "\x01"]).map(lambda s: (s,)),
                     st.lists(_part, max_size=3).map(tuple))


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(["int", "str", "mixed"]).flatmap(lambda shape: st.lists(
    {"int": st.integers(0, 2 ** 64 - 1).map(lambda i: (i,)),
     "str": _str_part.map(lambda s: (s,)), "mixed": _run_key}[shape], max_size=40)),
    st.sampled_from(["c", "", "é", "\x02c"]))
def test_decode_run_gives_back_the_keys_encoded(run, context):
    """The run in store order gives back the keys it was encoded from (not decode's
    answer: the oracle is the keys themselves)."""
    prefix = keys.context_prefix(context)
    encoded = {keys.encode_in(prefix, k): k for k in run}
    raw = sorted(encoded)
    assert keys.decode_run(raw, len(prefix)) == [encoded[e] for e in raw]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=12), max_size=20), st.sampled_from([b"", b"\x02", b"\x01"]))
def test_decode_run_of_damaged_keys_reads_or_fails_as_decode_does(tails, lead):
    """Keys no encode() wrote (a damaged store): decode_run gives what decode gives key by
    key, or raises the error decode raises first."""
    prefix = keys.context_prefix("c")
    raw = [prefix + lead + t for t in tails] * 3  # at least the shortest run decoded in C

    def each():
        return [keys.decode(k, len(prefix)) for k in raw]
    try:
        expected = each()
    except (ValueError, IndexError) as e:
        with pytest.raises(type(e)):
            keys.decode_run(raw, len(prefix))
        return
    assert keys.decode_run(raw, len(prefix)) == expected


def test_decode_run_does_not_take_damaged_keys_for_others_of_the_same_bytes():
    """Two damaged keys whose bytes, joined, are those of two whole (str,) keys: the run
    split at the prefix text would read ("a\x02c",) and ("b",); the keys' lengths say
    the pieces are not the keys, and decode fails on the first as decode does."""
    prefix = keys.context_prefix("c")
    raw = [prefix + b"\x02a", prefix + prefix + b"\x02b\x00"] * 4
    assert b"".join(raw[:2]) == keys.encode_in(prefix, ("a\x02c",)) + keys.encode_in(prefix, ("b",))
    with pytest.raises(ValueError):
        keys.decode(raw[0], len(prefix))
    with pytest.raises(ValueError):
        keys.decode_run(raw, len(prefix))


def test_decode_run_reads_the_common_shapes_in_c(monkeypatch):
    """A run of (int,) or (str,) keys is decoded without decode() of each key."""
    prefix = keys.context_prefix("c")
    ints = [keys.encode_in(prefix, (i,)) for i in range(100)]
    strs = [keys.encode_in(prefix, (f"c{i:03}",)) for i in range(100)]
    calls = []
    real = keys.decode
    monkeypatch.setattr(keys, "decode", lambda *a: calls.append(a) or real(*a))
    assert keys.decode_run(ints, len(prefix)) == [(i,) for i in range(100)]
    assert keys.decode_run(strs, len(prefix)) == [(f"c{i:03}",) for i in range(100)]
    assert not calls
    for odd in [("c050", 1), ("c050", "x"), ("c050", "\x02c", "")]:
        calls.clear()
        mixed = strs[:50] + [keys.encode_in(prefix, odd)] + strs[51:]
        assert keys.decode_run(mixed, len(prefix))[50] == odd
        assert len(calls) == 100  # a run of more than one shape: key by key


def _written_out(prefix: bytes, part) -> bytes:
    """The module docstring's encoding of a one-part key, spelled out."""
    if isinstance(part, str):
        return prefix + b"\x02" + part.encode("utf-8") + b"\x00"
    return prefix + b"\x01" + part.to_bytes(8, "big")


@settings(max_examples=300, deadline=None)
@given(part=st.one_of(st.integers(-2, 2**64 + 1), st.booleans(), st.none(),
                      st.text(st.characters(exclude_categories=("Cs",)), max_size=200)),
       prefix_chars=st.integers(0, 470))
def test_a_one_part_key_encodes_as_written_out_or_fails_as_any_key(part, prefix_chars):
    prefix = b"\x02" + b"p" * prefix_chars + b"\x00" if prefix_chars else b""  # ("p...",)
    valid = (type(part) is str and "\x00" not in part) or \
        (type(part) is int and 0 <= part < 2**64)
    if valid and len(_written_out(prefix, part)) <= keys.MAX_KEY_BYTES:
        assert keys.encode_in(prefix, (part,)) == _written_out(prefix, part)
    else:
        with pytest.raises(MorphzError) as err:
            keys.encode_in(prefix, (part,))
        assert err.value.reason == "STORAGE_KEY_INVALID"
