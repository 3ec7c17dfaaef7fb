"""A short preview of a text around its first query match, matches marked «like this».

Matching uses the same analysis as the index (shared/text/analyze.py), run on a
bounded window, so previews stay cheap for large texts. A search builds one
Highlighter and previews every hit with it.
"""
from __future__ import annotations

import re

from morphz.shared.text.analyze import CJK_CHARS, MAX_TERM_CHARS, chunk_spans, normalize

SCAN_CHARS = 8192   # look for a match this far into the text
PREVIEW_CHARS = 200
OPEN, CLOSE = "«", "»"
_CHUNK = re.compile(r"\S+")
_CJK_CHAR = re.compile(f"[{CJK_CHARS}]")
# A chunk that is one CJK run: its terms are ICU's words and all its bigrams.
_CJK_CHUNK = re.compile(f"[{CJK_CHARS}]{{2,{MAX_TERM_CHARS}}}")
# An ASCII chunk of letters and digits short enough to be its own, whole, only term.
_ASCII_WORD = re.compile(f"[a-zA-Z0-9]{{1,{MAX_TERM_CHARS}}}")


def preview_reach(width: int = PREVIEW_CHARS) -> int:
    """How far into its text a preview of `width` chars reads at most: a text cut here
    previews exactly as the whole text does."""
    return SCAN_CHARS + width + 1


def _offset_map(window: str) -> tuple[str, list[int] | None]:
    """The normalized window and, per normalized char, its offset in `window` (None
    when folding kept every length, the usual case, and offsets are the same)."""
    whole = normalize(window)
    if len(whole) == len(window):
        return whole, None
    parts, where = [], []
    for i, ch in enumerate(window):
        n = normalize(ch)
        parts.append(n)
        where.extend([i] * len(n))
    where.append(len(window))
    return "".join(parts), where


class Highlighter:
    """The query's terms, built once per search. Occurrences are found with str.find:
    compiling one pattern of all terms cost more than the previews of a page."""

    def __init__(self, query: set[str]) -> None:
        self.query = query
        self.terms = sorted(query)
        # Inside a CJK run of at most MAX_TERM_CHARS, the query's bigrams alone mark
        # what its terms mark (no segmentation needed): a longer CJK query term came
        # from a CJK run of the query, whose bigrams are query terms too. Only a
        # one-character term (ICU cuts 沙箱 into 沙, 箱) needs the run's ICU words.
        self.bigrams_cover = not any(len(t) == 1 and _CJK_CHAR.match(t) for t in query)

    def _chunk_matches(self, chunk: str) -> list[tuple[int, int]]:
        """Spans of the chunk's terms that are query terms."""
        query = self.query
        if chunk.isalnum():
            if chunk.isascii() and _ASCII_WORD.fullmatch(chunk):  # one term: itself
                return [(0, len(chunk))] if chunk in query else []
            if self.bigrams_cover and _CJK_CHUNK.fullmatch(chunk):
                return [(j, j + 2) for j in range(len(chunk) - 1) if chunk[j:j + 2] in query]
        texts, spans = chunk_spans(chunk)
        return [span for term, span in zip(texts, spans) if term in query]

    def _occurrences(self, norm: str, lo: int, hi: int) -> list[int]:
        """Sorted starts of the terms' occurrences lying within norm[lo:hi]."""
        out = []
        for term in self.terms:
            p = norm.find(term, lo, hi)
            while p >= 0:
                out.append(p)
                p = norm.find(term, p + len(term), hi)
        out.sort()
        return out

    def preview(self, text: str, width: int = PREVIEW_CHARS) -> str:
        """Up to `width` chars of text around the first match, matches marked; the
        start of the text when nothing matches (or no query)."""
        spans: list[tuple[int, int]] = []
        if self.terms:
            norm, where = _offset_map(text[:SCAN_CHARS])
            # Locate by substring, then segment only the chunks where one starts in the
            # region shown: a term must also be a whole term there to be marked.
            found = [p for p in map(norm.find, self.terms) if p >= 0]
            if found:
                first = min(found)
                lo = max(0, first - width // 4)
                hi = min(len(norm), first + width)
                occurs = self._occurrences(norm, lo, hi) or [len(norm)]
                start = occurs[0]
                while start > 0 and not norm[start - 1].isspace():
                    start -= 1
                i = 0  # terms hold no whitespace: each occurrence lies in one chunk
                for chunk in _CHUNK.finditer(norm, start):
                    base, end = chunk.span()
                    if occurs[i] >= end:
                        continue
                    for s, e in self._chunk_matches(chunk.group()):
                        s, e = base + s, base + e
                        spans.append((s, e) if where is None else
                                     (where[s], where[min(e, len(where) - 1)]))
                    while i < len(occurs) and occurs[i] < end:
                        i += 1
                    if i == len(occurs):
                        break
        if not spans:
            return text[:width] + ("…" if len(text) > width else "")
        if len(spans) > 1:
            spans = _merge(spans)
        begin = max(0, spans[0][0] - width // 4)
        end = min(len(text), begin + width)
        out, pos = [], begin
        for s, e in spans:
            if s < pos or e > end:
                continue
            out += [text[pos:s], OPEN, text[s:e], CLOSE]
            pos = e
        out.append(text[pos:end])
        return ("…" if begin else "") + "".join(out) + ("…" if end < len(text) else "")


def preview(text: str, query: set[str], *, width: int = PREVIEW_CHARS) -> str:
    """A one-off Highlighter(query).preview(text, width)."""
    return Highlighter(query).preview(text, width)


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, with overlapping or touching spans joined."""
    spans.sort()
    merged = [spans[0]]
    for s, e in spans:
        last_s, last_e = merged[-1]
        if s <= last_e:
            if e > last_e:
                merged[-1] = (last_s, e)
        else:
            merged.append((s, e))
    return merged
