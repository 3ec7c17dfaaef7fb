"""Text analysis for recall: the ONE function that turns text into index terms,
used for documents and for queries alike (so both always agree).

Pipeline: Unicode NFKC + case folding (ICU's nfkc_cf), ICU word segmentation
(BreakIterator, root locale, with ICU's CJK dictionary), then two additions the
ranking needs:
- identifiers: `cn-hangzhou`, `@e42`, `v1.2.3` are indexed whole *and* by their
  parts, so a query for either form finds them;
- overlapping bigrams of CJK runs beside the ICU words: ICU cuts many words
  (沙箱, 超时, 重试) into single characters, and bigrams bring them back.
"""
from __future__ import annotations

import functools
import re
import threading
from typing import NamedTuple

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
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
                      r"\U00020000-\U0002fa1f]{2,}")


class Term(NamedTuple):
    text: str
    start: int  # offsets into the normalized text
    end: int


def normalize(text: str) -> str:
    """NFKC + case folding (Unicode's NFKC_Casefold, as ICU implements it)."""
    return _NORMALIZER.normalize(text)


class _Local(threading.local):
    """BreakIterators are stateful; one per thread."""

    def __init__(self) -> None:
        self.words = icu.BreakIterator.createWordInstance(icu.Locale.getRoot())


_local = _Local()


_CHUNK = re.compile(r"\S+")
CACHE_CHUNKS = 1 << 18


Spans = tuple[tuple[int, int], ...]


def _segment_chunk(chunk: str, bigrams: bool) -> tuple[tuple[str, ...], Spans]:
    """Terms of one whitespace-free chunk: (texts, chunk-relative spans), in step."""
    texts: list[str] = []
    spans: list[tuple[int, int]] = []
    words = _local.words
    words.setText(chunk)
    start = words.first()
    whole = set()
    for end in words:
        if words.getRuleStatus() != 0:  # 0: punctuation, symbols
            tok = chunk[start:end]
            texts.append(tok[:MAX_TERM_CHARS])
            spans.append((start, end))
            if not tok.isalnum():  # ICU kept it whole (@e42, v1.2.3): add its parts
                whole.add((start, end))
                for p in _PART.finditer(tok):
                    texts.append(p.group()[:MAX_TERM_CHARS])
                    spans.append((start + p.start(), start + p.end()))
        start = end
    if not chunk.isalnum():
        for m in _COMPOUND.finditer(chunk):
            if m.span() not in whole:  # spans several ICU words (cn-hangzhou)
                texts.append(m.group()[:MAX_TERM_CHARS])
                spans.append(m.span())
    if bigrams:
        for m in _CJK_RUN.finditer(chunk):
            run, base = m.group(), m.start()
            texts.extend([run[i:i + 2] for i in range(len(run) - 1)])
            spans.extend([(base + i, base + i + 2) for i in range(len(run) - 1)])
    return tuple(texts), tuple(spans)


# Words repeat (Zipf): segmenting each distinct chunk once makes indexing several times
# faster. No term spans whitespace (ICU breaks there; identifiers and CJK runs hold
# none), so chunk by chunk gives the terms of the whole text.
_segment_cached = functools.lru_cache(maxsize=CACHE_CHUNKS)(_segment_chunk)


def _cached(chunk: str, bigrams: bool):
    return (_segment_cached(chunk, bigrams) if len(chunk) <= 256
            else _segment_chunk(chunk, bigrams))


def chunk_spans(chunk: str, *, bigrams: bool = True) -> tuple[tuple[str, ...], tuple]:
    """(term texts, their (start, end) spans) of one whitespace-free chunk."""
    return _cached(chunk, bigrams)


def chunk_terms(chunk: str, *, bigrams: bool = True) -> list[Term]:
    """Terms of one whitespace-free piece of normalized text, offsets relative to it."""
    texts, spans = _cached(chunk, bigrams)
    return [Term(t, s, e) for t, (s, e) in zip(texts, spans)]


def chunks(normalized: str, start: int = 0, end: int = -1):
    """(offset, chunk) of each whitespace-free piece of normalized text[start:end]."""
    found = _CHUNK.finditer(normalized, start, len(normalized) if end < 0 else end)
    return ((m.start(), m.group()) for m in found)


def segment(normalized: str, *, bigrams: bool = True) -> list[Term]:
    """Terms of already-normalized text, with offsets into it."""
    out: list[Term] = []
    for base, chunk in chunks(normalized):
        texts, spans = _cached(chunk, bigrams)
        out.extend(Term(t, s + base, e + base) for t, (s, e) in zip(texts, spans))
    return out


def terms(text: str, *, bigrams: bool = True) -> list[str]:
    """Index/query terms of `text` (with repeats: term frequency counts)."""
    out: list[str] = []
    for chunk in normalize(text).split():
        out.extend(_cached(chunk, bigrams)[0])
    return out


def query_terms(text: str, *, bigrams: bool = True) -> list[str]:
    """Distinct terms of a query, in first-seen order."""
    return list(dict.fromkeys(terms(text, bigrams=bigrams)))
