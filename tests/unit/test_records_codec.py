"""The record codec (shared/mind/records.py) writes and reads exactly what json did: stored
bytes are hashed into the history's chain and compared by audit, so a faster codec must not
change one byte, nor what a stored row decodes to."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings, strategies as st

from morphz.shared.mind import records as R


def json_dumps(rec) -> bytes:
    """The encoding as it was written before msgspec (the stored format). A meta or a
    session of a context that keeps no waiting counts is stored without their fields, as
    before they existed; a meta's `links_from` and a frame's `erased` are written once set,
    so rows of a store written before keep their bytes."""
    plain = R.plain(rec)
    if isinstance(rec, R.Meta) and not rec.counts:
        del plain["counts"]
    if isinstance(rec, R.Session) and rec.pending is None:
        del plain["pending"], plain["waiting"]
    if isinstance(rec, R.Meta) and rec.links_from is None:
        del plain["links_from"]
    # a frame's `erased` is written once set (an erasure's), so frame rows keep their bytes
    for frame in [plain] if isinstance(rec, R.Frame) else \
            plain["frames"] if isinstance(rec, R.Checkpoint) else []:
        if frame.get("erased") == "":
            del frame["erased"]
    return json.dumps(plain, ensure_ascii=False, separators=(",", ":"),
                      sort_keys=True).encode()


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
_scalars = st.one_of(st.none(), st.booleans(), _text,
                     st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
                     st.floats(allow_nan=True, allow_infinity=True))
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.tuples(inner, inner),
    st.dictionaries(st.one_of(_text, st.integers(-5, 5)), inner, max_size=4)), max_leaves=12)


def _outcome(fn, arg):
    try:
        return "value", repr(fn(arg))
    except RecursionError:
        return "error", "RecursionError"
    except (ValueError, TypeError) as e:  # TypeError: keys of two types cannot be sorted
        return "error", f"{type(e).__name__}: {e}"


@settings(max_examples=400, deadline=None)
@given(_values)
def test_dumps_writes_the_bytes_json_wrote(value):
    assert _outcome(R.dumps, value) == _outcome(json_dumps, value)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_text, _values, max_size=5), _text, st.integers(0, 2 ** 64))
def test_dumps_of_records_writes_the_bytes_json_wrote(data, text, seq):
    records = [R.Event(seq, "id", "context-tx", "t", "c", text=text, data=data),
               R.Frame(text or "f", seq, text, [text], retire=R.RetireRequest(1, 2, 3, text, 4)),
               R.Frame(text or "f", seq, "", [text], erased=text),
               R.Checkpoint(text, seq, [R.Frame("f", 1, text), R.Frame("g", 2, "", erased=text)],
                            [], []),
               R.Meta(text, revision=seq), R.Meta(text, links_from=seq),
               R.Meta(text, revision=seq, counts=True), R.Observation(reason=text),
               R.Session(text), R.Session(text, pending=seq, waiting=1)]
    for rec in records:
        assert _outcome(R.dumps, rec) == _outcome(json_dumps, rec)


def test_dumps_of_a_record_with_an_extra_attribute_keeps_it_as_json_did():
    f = R.Frame("a", 1, "(x)")
    f.note = 1.5  # an attribute that is no field: json wrote it, msgspec would not
    assert R.dumps(f) == json_dumps(f)
    assert b'"note":1.5' in R.dumps(f)


@dataclass
class _WithFloat:
    score: float = 1e16
    tags: list = field(default_factory=lambda: [1e-05])


def test_dumps_writes_floats_as_json_did():
    assert R.dumps(_WithFloat()) == b'{"score":1e+16,"tags":[1e-05]}'


@settings(max_examples=400, deadline=None)
@given(_values)
def test_decode_json_reads_what_json_reads(value):
    raw = json.dumps(value, ensure_ascii=False).encode()
    assert repr(R.decode_json(raw)) == repr(json.loads(raw))


@pytest.mark.parametrize("raw", [
    b'123456789012345678901234567890', b'1E400', b'NaN', b'-Infinity', b'"\\ud800"',
    b'{"a":1,"a":2}', b'\xef\xbb\xbf{"a":1}', '{"a":"\u00e9"}'.encode("utf-16"), b'-0',
    b'[' * 2000 + b']' * 2000, b'{"a":', b'"\xff"', b'', b'[1,]'])
def test_decode_json_reads_edge_cases_as_json_does(raw):
    assert _outcome(R.decode_json, raw) == _outcome(json.loads, raw)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([R.ACTIVE, R.RETIRING, R.RETIRED]), _text, st.booleans())
def test_frame_state_reads_the_state_loads_reads(state, body, retiring):
    """status counts frames by state without decoding them: the same state as the whole
    record's, and through json where msgspec refuses a row (a lone surrogate escaped)."""
    frame = R.Frame(id="f", revision=3, body=body, sources=["a"], state=state,
                    retire=R.RetireRequest(1, 2, 4, "done", 3) if retiring else None)
    raw = R.dumps(frame)
    assert R.frame_state(raw) == R.loads(R.Frame, raw).state == state
    odd = ('{"body":"\\ud800","id":"f","revision":1,"state":"%s"}' % state).encode()
    assert R.frame_state(odd) == R.loads(R.Frame, odd).state == state
