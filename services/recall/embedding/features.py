"""Text -> the surface features the learned embedders count.

Meaning is learned from co-occurrence, so the features favour recall over precision:
- CJK runs give every character and every overlapping bigram (no dictionary: words
  ICU cuts apart, 沙箱 or 超时, still meet as bigrams, and single characters let
  发布/发版 or 暂停/停止 share something);
- other words (Latin, digits, identifiers' parts) give the word and, for words of five
  letters or more, a four-letter prefix marked with "~", a crude stem that lets
  retry/retried, deploy/deployment, timed/timeout meet without a language's stemmer.

Text is normalized exactly as the lexical leg normalizes it (NFKC + case folding).
"""
from __future__ import annotations

import re
from collections import Counter

from morphz.shared.text.analyze import CJK_CHARS, normalize

PREFIX_CHARS = 4
_WORD = re.compile(r"[^\W_]+")
_CJK_RUN = re.compile(f"[{CJK_CHARS}]+")


def _latin(word: str, out: list[str]) -> None:
    out.append(word)
    if len(word) > PREFIX_CHARS and not word[0].isdigit():
        out.append(word[:PREFIX_CHARS] + "~")


def _cjk(run: str, out: list[str]) -> None:
    out.extend(run)
    out.extend([run[i:i + 2] for i in range(len(run) - 1)])


def features(text: str) -> list[str]:
    """The features of `text`, with repeats (counts matter), in text order: those of
    its normalized chunks (no feature spans whitespace)."""
    return chunk_features(normalize(text))


def chunk_features(normalized: str) -> list[str]:
    """The features of already normalized text (a chunk of it or all of it)."""
    out: list[str] = []
    for word in _WORD.findall(normalized):
        if word.isascii():
            _latin(word, out)
            continue
        start = 0
        for m in _CJK_RUN.finditer(word):
            if m.start() > start:
                _latin(word[start:m.start()], out)
            _cjk(m.group(), out)
            start = m.end()
        if start < len(word):
            _latin(word[start:], out)
    return out


def counts(text: str) -> Counter[str]:
    return Counter(features(text))
