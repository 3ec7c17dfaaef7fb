"""What the index holds for an event or a frame (terms, time, filters). Secret text is
never indexed: a document holds what readers are shown (shared/mind/secrets.py). The
vector leg embeds exactly the text the lexical leg analyzes (event_text, frame_text)."""
from __future__ import annotations

from typing import Optional

from morphz.services.recall.core.timeparse import event_time_us
from morphz.services.recall.index.tantivy_docs import Doc
from morphz.shared.mind import records as R, secrets
from morphz.shared.text.analyze import terms, terms_text


# Words past this many characters of one text are not indexed (bounded work per
# document); `read` still returns every character.
MAX_INDEXED_CHARS = 1 << 20
# What the index holds of events and frames (event_text/frame_text, indexed); both legs'
# meta hold it, so a change here has an index built with the old texts rebuilt
# (indexer.py) instead of mixed. 2: recall observations are no longer indexed (RECALL-12).
TEXT_VERSION = 2


def event_key(seq: int) -> str:
    return f"e:{seq}"


def frame_key(frame_id: str) -> str:
    return f"f:{frame_id}"


def event_text(ev: R.Event) -> str:
    """An erased event's is '' (content an erasure took has no words, nor its marker)."""
    if secrets.erasure_of(ev.data) and ev.kind != R.CONTEXT_TX:
        return ""
    return secrets.shown_text(ev)[:MAX_INDEXED_CHARS]


def raw_event_text(ev: dict) -> str:
    """event_text of an event decoded by event_dict."""
    if secrets.erasure_of(ev.get("data") or {}) and ev["kind"] != R.CONTEXT_TX:
        return ""
    return secrets.shown_dict_text(ev)[:MAX_INDEXED_CHARS]


def frame_text(f: R.Frame) -> str:
    """Its id, and its body unless an erasure took it."""
    body = "" if f.erased else secrets.frame_body(f.id, f.body)
    return f"{f.id}\n{body}"[:MAX_INDEXED_CHARS]


def indexed(kind: str) -> bool:
    """Whether events of this kind are indexed: a recall observation is not (its text is
    a search's results; indexed, later searches would find them as evidence). It stays
    readable by ref."""
    return kind not in R.UNINDEXED_KINDS


def event_doc(ev: R.Event) -> Doc:
    return Doc(event_key(ev.seq), "event", terms_text(event_text(ev)),
               event_time_us(ev.time, ev.data), ev.session)


def frame_doc(f: R.Frame, changed: Optional[R.Event]) -> Doc:
    """A frame's words are its id and its current body; its time is the time of the
    event that last changed it (the transaction or the activation that matured it)."""
    return Doc(frame_key(f.id), "frame", terms(frame_text(f)),
               event_time_us(changed.time) if changed else None)
