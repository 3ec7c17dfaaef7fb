"""A short preview of a text around its first query match, matches marked «like this».

Matching uses the same analysis as the index (shared/text/analyze.py), run on a
bounded window, so previews stay cheap for large texts.
"""
from __future__ import annotations

import re
from typing import Optional

from morphz.shared.text.analyze import chunk_spans, normalize

SCAN_CHARS = 8192   # look for a match this far into the text
PREVIEW_CHARS = 200
OPEN, CLOSE = "«", "»"


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


def matcher(query: set[str]) -> Optional[re.Pattern]:
    """One pattern finding any query term as a substring (longest first); build it
    once per search and pass it to every preview."""
    if not query:
        return None
    return re.compile("|".join(map(re.escape, sorted(query, key=len, reverse=True))))


def preview(text: str, query: set[str], *, width: int = PREVIEW_CHARS,
            pattern: Optional[re.Pattern] = None) -> str:
    """Up to `width` chars of text around the first match, matches marked; the start
    of the text when nothing matches (or no query)."""
    window = text[:SCAN_CHARS]
    spans: list[tuple[int, int]] = []
    pattern = pattern if pattern is not None else matcher(query)
    if pattern is not None:
        norm, where = _offset_map(window)
        # Locate by substring, then segment only the chunks that hold one in the
        # region shown: a term must also be a whole term there to be marked.
        first = pattern.search(norm)
        if first is not None:
            lo, hi = max(0, first.start() - width // 4), min(len(norm), first.start() + width)
            done: set[int] = set()
            for occ in pattern.finditer(norm, lo, hi):
                base = occ.start()
                while base > 0 and not norm[base - 1].isspace():
                    base -= 1
                if base in done:
                    continue
                done.add(base)
                end = occ.end()
                while end < len(norm) and not norm[end].isspace():
                    end += 1
                texts, offsets = chunk_spans(norm[base:end])
                for term, (s, e) in zip(texts, offsets):
                    if term in query:
                        s, e = base + s, base + e
                        spans.append((s, e) if where is None else
                                     (where[s], where[min(e, len(where) - 1)]))
    if not spans:
        return text[:width] + ("…" if len(text) > width else "")
    spans.sort()
    first = spans[0][0]
    begin = max(0, first - width // 4)
    end = min(len(text), begin + width)
    out, pos = [], begin
    for s, e in _merge(spans):
        if s < pos or e > end:
            continue
        out += [text[pos:s], OPEN, text[s:e], CLOSE]
        pos = e
    out.append(text[pos:end])
    return ("…" if begin else "") + "".join(out) + ("…" if end < len(text) else "")


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(e, merged[-1][1]))
        else:
            merged.append((s, e))
    return merged
