"""Text analysis for recall: the ONE function that turns text into index terms,
used for documents and for queries alike (so both always agree).

Pipeline: Unicode NFKC + case folding (ICU's nfkc_cf), ICU word segmentation
(BreakIterator, root locale, with ICU's CJK dictionary), then two additions the
ranking needs:
- identifiers: `cn-hangzhou`, `@e42`, `v1.2.3` are indexed whole *and* by their
  parts, so a query for either form finds them;
- overlapping bigrams of CJK runs beside the ICU words: ICU cuts many words
  (沙箱, 超时, 重试) into single characters, and bigrams bring them back.

Speed (a rebuild tokenizes every event): text is cut at whitespace into chunks (no
term spans whitespace), each distinct short chunk is analyzed once (words repeat),
and pure-ASCII chunks are segmented by a regular expression that yields exactly
ICU's words (checked against ICU at import and by tests/unit/test_text_ascii.py).
"""
from __future__ import annotations

import functools
import re
import threading

import icu

MAX_TERM_CHARS = 64  # longer "words" (base64 blobs, hashes) are cut, never dropped
_NORMALIZER = icu.Normalizer2.getInstance(None, "nfkc_cf", icu.UNormalizationMode2.COMPOSE)
_CONNECTORS = "-_./:@#"
# A run of word characters joined by connectors, or with a leading sigil (@e42, #12).
# Matches start only where a word starts and never backtrack (possessive), so long
# runs of letters cost linear time.
_COMPOUND = re.compile(r"(?<![^\W_@#])(?:[@#]?[^\W_]++(?:[-_./:@][^\W_]++)+|[@#][^\W_]++)")
_PART = re.compile(r"[^\W_]+")
# Han, kana and Hangul: scripts written without spaces between words.
CJK_CHARS = ("\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
             "\U00020000-\U0002fa1f")  # a regular-expression character class's body
_CJK_RUN = re.compile(f"[{CJK_CHARS}]{{2,}}")
_CJK_ONLY = re.compile(f"[{CJK_CHARS}]+")
# ICU's word rules (UAX #29 as ICU 72 tailors it) restricted to ASCII: letters, digits,
# `_` and `@` join; `.` and `'` join letter-letter and digit-digit; `,` and `;` join
# digit-digit; any other character stands alone and is no word, as is a lone `_`.
_ASCII_WORD = re.compile(r"(?:[a-zA-Z0-9_@]|(?<=[a-zA-Z@])[.'](?=[a-zA-Z@])"
                         r"|(?<=[0-9])[.',;](?=[0-9]))+")
_CHUNK = re.compile(r"\S+")
CACHE_CHUNKS = 1 << 18
CACHE_CHUNK_CHARS = 16  # longer chunks (CJK runs, URLs) rarely repeat: not worth memory

Spans = tuple[tuple[int, int], ...]


def normalize(text: str) -> str:
    """NFKC + case folding (Unicode's NFKC_Casefold, as ICU implements it); for ASCII
    text that is exactly lower-casing."""
    return text.lower() if text.isascii() else _NORMALIZER.normalize(text)


class _Local(threading.local):
    """BreakIterators are stateful; one per thread."""

    def __init__(self) -> None:
        self.words = icu.BreakIterator.createWordInstance(icu.Locale.getRoot())


_local = _Local()


def _icu_words(chunk: str) -> list[tuple[int, int]]:
    """Spans of ICU's words in `chunk` (rule status 0 marks punctuation and symbols)."""
    words = _local.words
    words.setText(chunk)
    status = words.getRuleStatus
    out, start = [], 0
    for end in words:
        if status():
            out.append((start, end))
        start = end
    return out


def _ascii_words(chunk: str) -> list[tuple[int, int]]:
    return [m.span() for m in _ASCII_WORD.finditer(chunk) if m.group() != "_"]


def _ascii_agrees() -> bool:
    """Guard against another ICU version's rules: fall back to ICU if they differ."""
    probe = ("@e42 v1.2.3 cn-hangzhou don't 3.14 1,000 1;2 a;b a:b a_b _ __ e42@x #12 a..b "
             "x@y.com 1.a a.1 'a a' http://x.com/a?b=1 5% $5 .5 x. 1e10 ab12cd").split()
    return all(_ascii_words(p) == _icu_words(p) for p in probe)


_ASCII_FAST = _ascii_agrees()


def _segment_chunk(chunk: str, bigrams: bool) -> tuple[tuple[str, ...], Spans]:
    """Terms of one whitespace-free chunk: (texts, chunk-relative spans), in step."""
    ascii_only = chunk.isascii()
    words = _ascii_words(chunk) if ascii_only and _ASCII_FAST else _icu_words(chunk)
    if chunk.isalnum():  # the usual case: plain words, no identifiers to add
        spans = words
    else:
        spans, whole = [], set()
        for s, e in words:
            spans.append((s, e))
            tok = chunk[s:e]
            if not tok.isalnum():  # ICU kept it whole (@e42, v1.2.3): add its parts
                whole.add((s, e))
                spans.extend([(s + p.start(), s + p.end()) for p in _PART.finditer(tok)])
        # Identifiers that span several ICU words (cn-hangzhou).
        spans.extend([m.span() for m in _COMPOUND.finditer(chunk) if m.span() not in whole])
    if bigrams and not ascii_only:
        for m in _CJK_RUN.finditer(chunk):
            spans.extend([(i, i + 2) for i in range(m.start(), m.end() - 1)])
    return tuple([chunk[s:e][:MAX_TERM_CHARS] for s, e in spans]), tuple(spans)


# For highlighting: spans of the few chunks a preview shows.
_segment_cached = functools.lru_cache(maxsize=4096)(_segment_chunk)

# For indexing and queries: chunk -> its terms joined by spaces, the form the index
# takes. Plain dicts (no locking: a lost entry is only recomputed); cleared when full.
_JOINED: dict[bool, dict[str, str]] = {True: {}, False: {}}


def chunk_spans(chunk: str, *, bigrams: bool = True) -> tuple[tuple[str, ...], Spans]:
    """(term texts, their (start, end) spans) of one whitespace-free chunk."""
    if len(chunk) > 256:
        return _segment_chunk(chunk, bigrams)
    return _segment_cached(chunk, bigrams)


def chunks(normalized: str, start: int = 0, end: int = -1):
    """(offset, chunk) of each whitespace-free piece of normalized text[start:end]."""
    found = _CHUNK.finditer(normalized, start, len(normalized) if end < 0 else end)
    return ((m.start(), m.group()) for m in found)


def _icu_word_texts(chunk: str) -> list[str]:
    """The texts of _icu_words(chunk), without building spans."""
    words = _local.words
    words.setText(chunk)
    status = words.getRuleStatus
    out, start = [], 0
    for end in words:
        if status():
            out.append(chunk[start:end][:MAX_TERM_CHARS])
        start = end
    return out


def _chunk_texts(chunk: str, bigrams: bool) -> list[str]:
    """_segment_chunk(chunk, bigrams)[0] with shortcuts for the two common shapes (a
    rebuild analyzes every distinct chunk): an ASCII word is its only term; a CJK run
    has ICU's words, then its bigrams."""
    if chunk.isalnum():
        if chunk.isascii() and _ASCII_FAST:
            return [chunk[:MAX_TERM_CHARS]]
        if _CJK_ONLY.fullmatch(chunk):
            texts = _icu_word_texts(chunk)
            if bigrams:
                texts += [chunk[i:i + 2] for i in range(len(chunk) - 1)]
            return texts
    return list(_segment_chunk(chunk, bigrams)[0])


def _joined_miss(chunk: str, bigrams: bool) -> str:
    joined = " ".join(_chunk_texts(chunk, bigrams))
    if len(chunk) <= CACHE_CHUNK_CHARS:
        cache = _JOINED[bigrams]
        if len(cache) >= CACHE_CHUNKS:
            cache.clear()
        cache[chunk] = joined
    return joined


def terms_text(text: str, *, bigrams: bool = True) -> str:
    """The index/query terms of `text` joined by spaces (with repeats: term frequency
    counts): the form the index takes. Terms never hold whitespace."""
    get = _JOINED[bigrams].get
    return " ".join([j if (j := get(c)) is not None else _joined_miss(c, bigrams)
                     for c in normalize(text).split()])


def terms(text: str, *, bigrams: bool = True) -> list[str]:
    """Index/query terms of `text` (with repeats: term frequency counts)."""
    return terms_text(text, bigrams=bigrams).split()


def query_terms(text: str, *, bigrams: bool = True) -> list[str]:
    """Distinct terms of a query, in first-seen order."""
    return list(dict.fromkeys(terms(text, bigrams=bigrams)))
