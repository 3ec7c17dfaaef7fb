"""Tests for the context-tx S-expression reader/writer."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from morphz.shared import sexpr
from morphz.shared.sexpr import reader
from morphz.shared.sexpr import Limits, Ref, SexprError, Symbol, parse_many, parse_one, render, render_items

KNOWN_REASONS = {
    "SEXPR_INVALID_UTF8",
    "SEXPR_TOO_LARGE",
    "SEXPR_TOO_DEEP",
    "SEXPR_TOO_MANY_NODES",
    "SEXPR_UNBALANCED",
    "SEXPR_UNTERMINATED_STRING",
    "SEXPR_BAD_ESCAPE",
    "SEXPR_INTEGER_RANGE",
    "SEXPR_EMPTY",
    "SEXPR_EXPECTED_ONE_FORM",
    "SEXPR_INVALID_CHARACTER",
}

RELEASE_TX = """(context-tx
  (base-version 12)
  (reason "测试结果已吸收，继续准备发布")
  (derive test-result (from @e42) (tests passed))
  (revise release (goal ship-v1) (stage packaging))
  (relate test-result supports release)
  (retire @e42))"""

OTHER_EXAMPLES = [
    "(derive deployment/current (from @e42) (fact (region cn-hangzhou)))",
    '(steps "测试通过后构建，核验本次产物，再打包。")',
    '(artifact "apps/web/dist/")',
    "(place a (before b))",
]

S = Symbol
MIB = 1024 * 1024


def reason_of(text, limits=sexpr.DEFAULT_LIMITS, one=False) -> str:
    with pytest.raises(SexprError) as info:
        (parse_one if one else parse_many)(text, limits)
    return info.value.reason


# --- examples ----------------------------------------------------------------


def test_release_transaction_parses_to_expected_structure():
    tx = parse_one(RELEASE_TX)
    assert tx == [
        S("context-tx"),
        [S("base-version"), 12],
        [S("reason"), "测试结果已吸收，继续准备发布"],
        [S("derive"), S("test-result"), [S("from"), Ref(42)], [S("tests"), S("passed")]],
        [S("revise"), S("release"), [S("goal"), S("ship-v1")], [S("stage"), S("packaging")]],
        [S("relate"), S("test-result"), S("supports"), S("release")],
        [S("retire"), Ref(seq=42)],
    ]


def test_other_example_forms_parse():
    derive, steps, artifact, place = (parse_one(text) for text in OTHER_EXAMPLES)
    assert derive[1] == Symbol("deployment/current")
    assert derive[2] == [S("from"), Ref(42)]
    assert derive[3] == [S("fact"), [S("region"), S("cn-hangzhou")]]
    assert steps == [S("steps"), "测试通过后构建，核验本次产物，再打包。"]
    assert artifact == [S("artifact"), "apps/web/dist/"]
    assert place == [S("place"), S("a"), [S("before"), S("b")]]
    assert parse_many("\n".join(OTHER_EXAMPLES)) == [derive, steps, artifact, place]


def test_bytes_input_parses_like_str_input():
    assert parse_many(RELEASE_TX.encode()) == parse_many(RELEASE_TX)


def test_symbol_and_ref_str_and_equality():
    assert str(Symbol("ship-v1")) == "ship-v1"
    assert str(Ref(42)) == "@e42"
    assert Ref(42) == Ref(seq=42) != Symbol("@e42")
    with pytest.raises(AttributeError):
        Ref(1).seq = 2  # type: ignore[misc]


# --- atoms ---------------------------------------------------------------------


def test_string_escapes_are_decoded():
    text = r'"q\"b\\n\n t\t r\r \u{4E2D}\u{1f600}\u{0}"'
    assert parse_one(text) == 'q"b\\n\n t\t r\r 中😀\x00'


def test_string_allows_raw_newlines_semicolons_and_any_unicode():
    assert parse_one('"line1\nline2 ; not a comment (\t) 发布 ☃"') == "line1\nline2 ; not a comment (\t) 发布 ☃"


@pytest.mark.parametrize(
    "escape", [r"\q", r"\'", r"\x41", r"\u1234", r"\u{}", r"\u{1234567}", r"\u{D800}", r"\u{dfff}", r"\u{110000}", "\\\n"]
)
def test_invalid_escapes_are_rejected_with_position(escape):
    with pytest.raises(SexprError) as info:
        parse_many(f'(a\n  "ok {escape} x")')
    err = info.value
    assert err.reason == "SEXPR_BAD_ESCAPE"
    assert (err.line, err.column, err.offset) == (2, 7, 9)


@pytest.mark.parametrize("text", ['(a "bc', '"abc\\"', '"abc\\', '"'])
def test_unterminated_string(text):
    assert reason_of(text) == "SEXPR_UNTERMINATED_STRING"


def test_comments_are_ignored():
    text = "; leading comment\n(a ; trailing ( \" unbalanced\n b) ; end"
    assert parse_many(text) == [[S("a"), S("b")]]
    assert parse_many("; only a comment") == []


def test_integers_including_negative_and_range_limits():
    assert parse_one("(0 -5 42 007 -0 999999999999999999 -999999999999999999)") == [
        0, -5, 42, 7, 0, 10**18 - 1, -(10**18 - 1)
    ]
    assert reason_of("1234567890123456789") == "SEXPR_INTEGER_RANGE"
    assert reason_of("(a -1234567890123456789)") == "SEXPR_INTEGER_RANGE"
    assert reason_of("9" * 5000) == "SEXPR_INTEGER_RANGE"  # never reaches int()'s digit limit


def test_refs_versus_symbols():
    assert parse_many("@e42 @e0 @e007") == [Ref(42), Ref(0), Ref(7)]
    assert parse_many("@e @x1 @E42 @e42a @e-1 @") == [S("@e"), S("@x1"), S("@E42"), S("@e42a"), S("@e-1"), S("@")]
    assert reason_of("@e" + "1" * 19) == "SEXPR_INTEGER_RANGE"


def test_symbol_tokens():
    tokens = "deployment/current release-case-a cn-hangzhou v1.2.3 发布 - +x -x [a] 1.5 a\\b"
    assert parse_many(tokens) == [S(name) for name in tokens.split(" ")]


def test_delimiters_split_tokens_without_whitespace():
    assert parse_many('(a"b"c)(d)') == [[S("a"), "b", S("c")], [S("d")]]


def test_unicode_whitespace_separates_tokens():
    assert parse_many("a\u3000b\u00a0c\x0bd") == [S("a"), S("b"), S("c"), S("d")]


# --- render --------------------------------------------------------------------


def test_render_release_body_is_canonical():
    revise = parse_one(RELEASE_TX)[4]
    assert render_items(revise[2:]) == "(goal ship-v1) (stage packaging)"


def test_render_whole_transaction_is_single_line_canonical():
    rendered = render(parse_one(RELEASE_TX))
    assert rendered.startswith('(context-tx (base-version 12) (reason "测试结果已吸收，继续准备发布") (derive')
    assert "\n" not in rendered and "  " not in rendered
    assert render(parse_one(rendered)) == rendered


def test_render_escapes_quote_and_backslash():
    assert render('a"b\\c') == '"a\\"b\\\\c"'


def test_render_escapes_control_characters():
    assert render("a\nb\tc\rd\x00\x01\x1f\x7fé") == '"a\\nb\\tc\\rd\\u{0}\\u{1}\\u{1f}\\u{7f}é"'


def test_render_atoms_and_empty_list():
    assert render([S("x"), Ref(7), -3, [], ""]) == '(x @e7 -3 () "")'
    assert render_items([]) == ""


@pytest.mark.parametrize(
    "node, error",
    [
        (Symbol(""), ValueError),
        (Symbol("a b"), ValueError),
        (Symbol("a(b"), ValueError),
        (Symbol("12"), ValueError),
        (Symbol("@e1"), ValueError),
        (10**18, ValueError),
        (Ref(-1), ValueError),
        ("\ud800", ValueError),
        (True, TypeError),
        ((1, 2), TypeError),
        (1.5, TypeError),
    ],
)
def test_render_rejects_nodes_that_cannot_round_trip(node, error):
    with pytest.raises(error):
        render([node])


def test_render_rejects_cyclic_lists():
    cyclic: list = [S("a")]
    cyclic.append(cyclic)
    with pytest.raises(ValueError):
        render(cyclic)


def test_render_and_parse_are_iterative_for_very_deep_structures():
    deep: list = [S("x")]
    for _ in range(100_000):
        deep = [deep]
    text = render(deep)
    assert text == "(" * 100_000 + "(x)" + ")" * 100_000
    back = parse_one(text, Limits(max_depth=200_000))
    for _ in range(100_000):
        back = back[0]
    assert back == [S("x")]


# --- errors and limits ----------------------------------------------------------


def test_reason_codes_are_exported():
    assert sexpr.REASONS == KNOWN_REASONS


def test_missing_close_paren_reports_innermost_open_paren():
    with pytest.raises(SexprError) as info:
        parse_many("(context-tx\n  (a b)\n  (c d")
    err = info.value
    assert (err.reason, err.line, err.column, err.offset) == ("SEXPR_UNBALANCED", 3, 3, 22)
    assert err.to_dict() == {
        "reason": "SEXPR_UNBALANCED",
        "message": err.message,
        "offset": 22,
        "line": 3,
        "column": 3,
    }
    assert "SEXPR_UNBALANCED" in str(err)


def test_stray_close_paren_is_unbalanced():
    with pytest.raises(SexprError) as info:
        parse_many("(a)\n  )")
    assert (info.value.reason, info.value.line, info.value.column) == ("SEXPR_UNBALANCED", 2, 3)


def test_invalid_utf8_bytes():
    assert reason_of(b"\xff\xfe(a)") == "SEXPR_INVALID_UTF8"
    with pytest.raises(SexprError) as info:
        parse_many("(发)\n".encode() + b"x\xc3")
    assert (info.value.reason, info.value.line, info.value.column, info.value.offset) == (
        "SEXPR_INVALID_UTF8", 2, 2, 5
    )


def test_nul_and_lone_surrogates_are_invalid_characters():
    assert reason_of("(a\x00)") == "SEXPR_INVALID_CHARACTER"
    assert reason_of('"a\x00"') == "SEXPR_INVALID_CHARACTER"
    assert reason_of('"a\ud800"') == "SEXPR_INVALID_CHARACTER"
    assert reason_of(b'"a\xed\xa0\x80"') == "SEXPR_INVALID_UTF8"  # encoded surrogate
    assert parse_one(r'"\u{0}"') == "\x00"


def test_parse_one_requires_exactly_one_form():
    assert reason_of("", one=True) == "SEXPR_EMPTY"
    assert reason_of(b"  ; nothing\n", one=True) == "SEXPR_EMPTY"
    with pytest.raises(SexprError) as info:
        parse_one("(a) (b)")
    assert (info.value.reason, info.value.offset) == ("SEXPR_EXPECTED_ONE_FORM", 4)
    assert parse_one("  (a) ; trailing comment\n") == [S("a")]


def test_nesting_depth_limit_boundary():
    assert parse_one("(" * 64 + ")" * 64) is not None
    assert reason_of("(" * 65 + ")" * 65) == "SEXPR_TOO_DEEP"


def test_100k_open_parens_fail_fast_with_too_deep():
    with pytest.raises(SexprError) as info:
        parse_many("(" * 100_000)
    # The refusal names the paren past the depth limit (speed: scripts/bench, not here).
    assert (info.value.reason, info.value.offset) == ("SEXPR_TOO_DEEP", 64)


def test_ten_megabyte_string_literal_parses_and_round_trips():
    payload = "release notes; 发布 " * 500_000 + 'with "quotes"\nand \\ lines\n' * 1000
    text = render([S("steps"), payload])
    assert len(text.encode()) > 10_000_000
    node = parse_one(text)
    assert node == [S("steps"), payload]
    assert render(node) == text


def test_seventeen_mib_input_is_too_large():
    text = "(a " + "x" * (17 * MIB) + ")"
    assert reason_of(text) == "SEXPR_TOO_LARGE"
    assert reason_of(text.encode()) == "SEXPR_TOO_LARGE"


def test_size_limit_counts_utf8_bytes_not_characters():
    limits = Limits(max_bytes=11)
    assert parse_one("(发发发)", limits) == [S("发发发")]  # 5 characters, 11 bytes
    assert reason_of("发发发发", limits) == "SEXPR_TOO_LARGE"  # 4 characters, 12 bytes
    assert reason_of("发发发发".encode(), limits) == "SEXPR_TOO_LARGE"


def test_300k_atoms_exceed_node_limit():
    assert reason_of("a " * 300_000) == "SEXPR_TOO_MANY_NODES"
    assert reason_of("(" + "1 " * 300_000 + ")") == "SEXPR_TOO_MANY_NODES"


def test_node_limit_counts_lists_and_atoms():
    limits = Limits(max_nodes=3)
    assert parse_one("(a b)", limits) == [S("a"), S("b")]
    assert reason_of("(a (b))", limits) == "SEXPR_TOO_MANY_NODES"


# --- properties -----------------------------------------------------------------

SYMBOL_ALPHABET = "abcxyzABZ0123456789/-._[]@+*?!<>=:&%发布测试部署环境结果"
LOOKS_NUMERIC = re.compile(r"-?[0-9]+|@e[0-9]+")

symbols = st.text(SYMBOL_ALPHABET, min_size=1, max_size=12).filter(lambda s: not LOOKS_NUMERIC.fullmatch(s)).map(Symbol)
strings = st.text(st.characters(exclude_categories=("Cs",)), max_size=30) | st.text('"\\\n\t\r\x00\x7fu{}a发', max_size=30)
integers = st.integers(-(10**18) + 1, 10**18 - 1)
refs = st.integers(0, 10**18 - 1).map(Ref)
atoms = symbols | strings | integers | refs
trees = st.recursive(atoms, lambda children: st.lists(children, max_size=6), max_leaves=40)


@settings(max_examples=150, deadline=None)
@given(st.lists(trees, max_size=6))
def test_render_items_round_trips_generated_trees(nodes):
    text = render_items(nodes)
    assert parse_many(text) == nodes
    assert "\n" not in text
    assert parse_many(text.encode()) == nodes
    for node in nodes:
        assert parse_one(render(node)) == node


VALID_TEXTS = [RELEASE_TX, *OTHER_EXAMPLES, '(a "x\\"y\\\\z\\u{1F600}\\n" -12 @e3) ; done\n(b)']
SYNTAX_CHARS = '()"\\;@e-0123456789 \n\tu{}aZ发\x00\ud800'


@st.composite
def mutated_transactions(draw):
    text = draw(st.sampled_from(VALID_TEXTS))
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["delete", "insert", "truncate", "duplicate"]))
        pos = draw(st.integers(0, len(text)))
        if op == "delete":
            text = text[:pos] + text[pos + draw(st.integers(1, 5)) :]
        elif op == "insert":
            text = text[:pos] + draw(st.text(SYNTAX_CHARS, min_size=1, max_size=4)) + text[pos:]
        elif op == "truncate":
            text = text[:pos]
        else:
            text = text[:pos] + text[pos:] * draw(st.integers(2, 4))
    return text


hostile_inputs = st.one_of(
    st.text(),
    st.text(st.characters(), max_size=200),
    st.text(SYNTAX_CHARS, max_size=200),
    st.binary(max_size=200),
    mutated_transactions(),
    mutated_transactions().map(lambda t: t.encode("utf-8", "surrogatepass")),
)
tiny_limits = st.sampled_from([sexpr.DEFAULT_LIMITS, Limits(max_bytes=40, max_depth=2, max_nodes=8)])


def check_outcome(call, data, limits):
    start = time.monotonic()
    try:
        result = call(data, limits)
    except SexprError as err:
        assert err.reason in KNOWN_REASONS
        assert isinstance(err.message, str) and err.message
        assert err.line >= 1 and err.column >= 1 and err.offset >= 0
        result = None
    assert time.monotonic() - start < 2.0
    return result


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_inputs, tiny_limits)
def test_core_04_parser_never_crashes_on_hostile_input(data, limits):
    nodes = check_outcome(parse_many, data, limits)
    check_outcome(parse_one, data, limits)
    if nodes is not None:
        # Whatever parses must render canonically and read back identically.
        assert parse_many(render_items(nodes)) == nodes


# The fast reader (findall, or finditer for a long text) must read exactly what the exact one reads, and give up
# (None) on whatever the exact one refuses: texts made of the tokens that matter.
_PIECES = ["(", ")", " ", "\n", "\t", "\u3000", ";c\n", "a", "-", "-0", "007", "12", "@e5",
           "@e", "@x1", "9" * 19, '"', '"s"', '"\\n\\\\"', '"\\u{41}"', '"\\q"', '"\\\\\\"x"',
           "\\", "é", "中"]


_ATOMS = st.sampled_from([p for p in _PIECES if p not in ("(", ")")])
# Forms nested to a few levels (balanced), then pieces spliced in.
_FORMS = st.recursive(_ATOMS, lambda inner: st.lists(inner, max_size=4).map(
    lambda xs: "(" + " ".join(xs) + ")"), max_leaves=10)


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.one_of(_FORMS, st.sampled_from(_PIECES)), max_size=8), st.integers(1, 4),
       st.integers(4, 14))
def test_the_fast_reader_reads_what_the_exact_reader_reads(pieces, depth, nodes):
    text = "".join(pieces)
    limits = sexpr.Limits(max_depth=depth, max_nodes=nodes)
    fast = [_fast_or_none(text, limits, chars) for chars in (reader.FAST_CHARS, 0)]
    try:
        exact = reader._parse(text, limits)[0]
    except sexpr.SexprError as e:
        # None, or past the node limit the exact reader's own error, where it says
        assert all(f is None or f == e.to_dict() for f in fast), (text, fast, e)
        return
    assert fast[0] == fast[1] and fast[0] in (None, exact), text  # findall, then finditer
    assert sexpr.render_read(exact) == render_items(exact)  # what the reader made, unchecked


def _fast_or_none(text: str, limits: sexpr.Limits, findall_chars: int):
    try:
        return reader._parse_fast(text, limits, findall_chars)
    except sexpr.SexprError as e:  # past the node limit: the error, to compare
        return e.to_dict() if e.reason == "SEXPR_TOO_MANY_NODES" else None


def test_the_fast_reader_reads_a_transaction_and_forms_at_the_limits():
    tx = '(context-tx (base-version 3) (revise f0 (v 17) (note "a\\nb")) (retire @e4))'
    assert reader._parse_fast(tx, sexpr.DEFAULT_LIMITS) == reader._parse(tx, sexpr.DEFAULT_LIMITS)[0]
    at_limits = sexpr.Limits(max_depth=3, max_nodes=6)
    text = "(a (b (c)))"  # depth 3, six nodes (three lists, three symbols)
    assert reader._parse_fast(text, at_limits) == [[Symbol("a"), [Symbol("b"), [Symbol("c")]]]]
    assert reader._parse_fast("(a (b (c (d))))", at_limits) is None
    with pytest.raises(SexprError) as info:  # seven nodes: the exact reader's error
        reader._parse_fast("(a b c d e f)", at_limits)
    assert info.value.reason == "SEXPR_TOO_MANY_NODES" and info.value.offset == 11


class _CountingTokens:
    """sexpr's token pattern, counting the tokens its iterators hand out (work units)."""

    def __init__(self, pattern) -> None:
        self._pattern, self.tokens = pattern, 0

    def findall(self, text: str) -> list:
        found = self._pattern.findall(text)
        self.tokens += len(found)
        return found

    def finditer(self, text: str):
        for m in self._pattern.finditer(text):
            self.tokens += 1
            yield m


@pytest.mark.parametrize("shape", ["a ", "(a) ", '"s" '])
def test_sec_06_a_text_past_the_node_limit_is_read_once_and_no_further_than_the_limit(
        monkeypatch, shape):
    """A transaction of 300k nodes (600 KB) was read twice to be refused: by the fast
    reader up to the limit, then again by the exact one. Now once, up to the limit, the
    same work for 10x the input; the error is the exact reader's, at the same place."""
    limits = sexpr.Limits(max_nodes=20_000)
    counted = _CountingTokens(reader._FAST_TOKEN)
    monkeypatch.setattr(reader, "_FAST_TOKEN", counted)
    exact_reads = []
    exact = reader._parse
    monkeypatch.setattr(reader, "_parse", lambda *a: exact_reads.append(1) or exact(*a))
    work = []
    for copies in (100_000, 1_000_000):  # longer than FAST_CHARS (findall reads it all)
        text = "(context-tx (x " + shape * copies + "))"
        counted.tokens = 0
        with pytest.raises(sexpr.SexprError) as info:
            sexpr.parse_one(text, limits)
        with pytest.raises(sexpr.SexprError) as expected:
            exact(text, limits)
        assert info.value.to_dict() == expected.value.to_dict()
        assert info.value.reason == "SEXPR_TOO_MANY_NODES"
        work.append(counted.tokens)
    assert exact_reads == []  # the exact reader never ran
    assert work[0] == work[1] <= 3 * limits.max_nodes, work  # the limit's, not the input's
