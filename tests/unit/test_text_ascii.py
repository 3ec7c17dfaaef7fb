"""RECALL-01 text analysis fast paths: the ASCII segmenter yields exactly ICU's words,
ASCII normalization is exactly NFKC_Casefold, and the cached joined terms (index and
queries) equal the highlight's per-chunk terms."""
from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from morphz.shared.text import analyze as A

ASCII = [chr(i) for i in range(128) if not chr(i).isspace()]
TRICKY = "a1_@.',;-:/#Z"  # the characters ICU's word rules treat specially, and others
ascii_text = st.text(st.sampled_from(ASCII + list("a1_@.',;") * 8), min_size=1, max_size=40)
mixed_text = st.text(st.sampled_from(ASCII + list(" \t\u3000沙箱权限配置失败の가ＡＢé\u0301ﬁ·—")),
                     max_size=60)


def test_recall_01_ascii_fast_path_is_on_for_this_icu():
    assert A._ASCII_FAST


def test_recall_01_ascii_words_match_icu_on_identifiers():
    for s in ("cn-hangzhou", "@e42", "e42@x", "v1.2.3", "don't", "rock'n'roll", "3.14", "1,000",
              "1;2", "a;b", "a:b", "http://x.com/a?b=1&c=2", "user_id", "_", "__", "__init__",
              "x@y.com", "1.a", "a.1", "'a'", "5%", "$5", ".5", "x.", "1e10", "a..b", "#12",
              "@@", "...", "a.b.c.", "ab12cd-3"):
        assert A._ascii_words(s) == A._icu_words(s), s


def test_recall_01_ascii_words_match_icu_on_every_short_string():
    for n in (1, 2, 3, 4):
        for chars in itertools.product(TRICKY, repeat=n):
            s = "".join(chars)
            assert A._ascii_words(s) == A._icu_words(s), s


@settings(max_examples=3000, deadline=None)
@given(ascii_text)
def test_recall_01_ascii_words_match_icu_on_random_text(s):
    assert A._ascii_words(s) == A._icu_words(s)


def test_recall_01_ascii_normalization_is_nfkc_casefold():
    every = "".join(map(chr, range(128)))
    assert A.normalize(every) == A._NORMALIZER.normalize(every)


@settings(max_examples=1000, deadline=None)
@given(mixed_text)
def test_recall_01_index_terms_equal_highlight_terms(text):
    by_chunk = [t for _, c in A.chunks(A.normalize(text)) for t in A.chunk_spans(c)[0]]
    assert A.terms(text) == by_chunk
    # The cached joined form equals the analysis computed afresh (no cache involved).
    fresh = [t for c in A.normalize(text).split() for t in A._segment_chunk(c, True)[0]]
    assert A.terms(text) == fresh


cjk_chunk = st.text(st.sampled_from(list("沙箱权限配置失败超时重试数据库の가ー・") + ["\U00020000"]),
                    min_size=1, max_size=80)


@settings(max_examples=1000, deadline=None)
@given(st.one_of(cjk_chunk, st.text(st.sampled_from("abcXYZ019"), min_size=1, max_size=80)))
def test_recall_01_chunk_shortcuts_equal_full_analysis(chunk):
    for bigrams in (True, False):
        assert A._chunk_texts(chunk, bigrams) == list(A._segment_chunk(chunk, bigrams)[0])
