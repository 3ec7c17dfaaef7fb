"""What a pretrained model is given of a text: clean, bounded, or nothing.

- NUL characters are removed: the C engine reads a NUL as the text's end, so
  "a\\0b" would embed as "a" (a silent cut).
- A lone surrogate (a half of a UTF-16 pair, which Python strings may hold) becomes
  U+FFFD: UTF-8 cannot encode it, and the engine's encode would raise.
- A text is cut to MAX_CHARS characters before any tokenizer sees it: a model reads at
  most its window (512 tokens for e5), and a 10,000-token text embedded window by
  window took 28 s. The e5 embedder then cuts further by its own token count (e5.py).
- A text that is empty or only white space has nothing to embed: the caller gives it
  the zero vector, which the index reads as "nothing embedded".
"""
from __future__ import annotations

# A token of e5's tokenizer holds about 4 characters of English, 1-2 of Chinese: 4 x 512
# characters reach the window in English; CJK text is cut again by token count.
MAX_CHARS = 2048


def prepared(text: str, max_chars: int = MAX_CHARS) -> str:
    """The text a model may embed ("" when there is nothing to embed)."""
    text = clean(text[:max_chars])  # cut first: the rest of the work is bounded by it
    return text if text.strip() else ""


def clean(text: str) -> str:
    """The text without NULs and lone surrogates (uncut)."""
    if "\0" in text:
        text = text.replace("\0", " ")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: through UTF-16, which pairs what pairs
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text
