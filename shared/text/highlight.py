"""A short preview of a text around its first query match, matches marked «like this».

Matching uses the same analysis as the index (shared/text/analyze.py), run on a
bounded window, so previews stay cheap for large texts.
"""
from __future__ import annotations

from morphz.shared.text.analyze import chunk_spans, chunks, normalize

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


def preview(text: str, query: set[str], *, width: int = PREVIEW_CHARS) -> str:
    """Up to `width` chars of text around the first match, matches marked; the start
    of the text when nothing matches (or no query)."""
    window = text[:SCAN_CHARS]
    spans: list[tuple[int, int]] = []
    if query:
        norm, where = _offset_map(window)
        # Locate cheaply by substring, then segment only the region shown.
        found = [i for i in (norm.find(t) for t in query) if i >= 0]
        if found:
            first = min(found)
            lo, hi = max(0, first - width // 4), min(len(norm), first + width)
            for base, chunk in chunks(norm, lo, hi):
                texts, offsets = chunk_spans(chunk)
                if query.isdisjoint(texts):
                    continue
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
