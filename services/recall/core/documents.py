"""What the index holds for an event or a frame (terms, time, filters). Secret text is
never indexed: a document holds what readers are shown (shared/mind/secrets.py)."""
from __future__ import annotations

from typing import Optional

from morphz.services.recall.core.timeparse import event_time_us
from morphz.services.recall.index.tantivy_index import Doc
from morphz.shared.mind import records as R, secrets
from morphz.shared.mind.view import event_dict
from morphz.shared.text.analyze import terms, terms_text


# Words past this many characters of one text are not indexed (bounded work per
# document); `read` still returns every character.
MAX_INDEXED_CHARS = 1 << 20


def event_key(seq: int) -> str:
    return f"e:{seq}"


def frame_key(frame_id: str) -> str:
    return f"f:{frame_id}"


def event_doc(ev: R.Event) -> Doc:
    return Doc(event_key(ev.seq), "event",
               terms_text(secrets.shown_text(ev)[:MAX_INDEXED_CHARS]),
               event_time_us(ev.time), ev.session)


def raw_event_doc(raw: bytes) -> Doc:
    """event_doc of a stored event straight from its JSON (a rebuild's hot path: no
    record object)."""
    ev = event_dict(raw)
    return Doc(event_key(ev["seq"]), "event",
               terms_text(secrets.shown_dict_text(ev)[:MAX_INDEXED_CHARS]),
               event_time_us(ev["time"]), ev.get("session", ""))


def frame_doc(f: R.Frame, changed: Optional[R.Event]) -> Doc:
    """A frame's words are its id and its current body; its time is the time of the
    event that last changed it (the transaction or the activation that matured it)."""
    body = secrets.frame_body(f.id, f.body)
    return Doc(frame_key(f.id), "frame", terms(f"{f.id}\n{body}"[:MAX_INDEXED_CHARS]),
               event_time_us(changed.time) if changed else None)
