"""The lines of a `morphz context import` file: one JSON object per line, checked whole
before anything is sent, each with an idempotency key of its own.

A line's key is the file's digest and its line number, so the same file imported again
(after a kill, or twice) applies each line at most once: the transaction service answers
a key it has applied with its original reply (AppendEvents)."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Optional

from morphz.shared.errors import MorphzError
from morphz.shared.limits import EVENT_TEXT_BYTES
from morphz.shared.names import check_label, check_name
from morphz.shared.occurred import check_occurred_at

# What a line may hold (an input event); kind, session and text are required. `erased`:
# an export's placeholder for an event an erasure took (its text is the erased marker;
# imported as it reads).
FIELDS = ("kind", "session", "actor", "text", "occurred_at", "secret", "erased")
KINDS = ("user-message", "tool-result", "approval", "external", "continuation")
MAX_REPORTED = 20  # bad lines named in the error (the count says how many in all)


@dataclass(frozen=True)
class Line:
    number: int  # from 1, as an editor counts
    event: dict  # AppendEvents' item: session, kind, text, actor, ..., request_id
    size: int  # the line's bytes (batches are bounded by them)


def file_key(raw: bytes) -> str:
    """What names the file in its lines' request ids: its content, not its path."""
    return hashlib.sha256(raw).hexdigest()[:32]


def parse_lines(raw: bytes, path: str) -> list[Line]:
    """Every non-blank line as a Line, or CONTEXT_INPUT_INVALID naming the bad lines
    (their numbers and why) when any is bad: then nothing is imported."""
    key = file_key(raw)
    lines, bad = [], []
    for number, text in enumerate(raw.split(b"\n"), start=1):
        if not text.strip():
            continue
        try:
            event = _event(text)
        except MorphzError as e:
            bad.append({"line": number, "message": e.message,
                        **({"field": e.details["field"]} if "field" in e.details else {})})
            continue
        event["request_id"] = f"import-{key}-{number}"
        lines.append(Line(number, event, len(text)))
    if bad:
        raise MorphzError("CONTEXT_INPUT_INVALID", f"{len(bad)} bad line(s) in {path[:200]} "
                          f"(first: line {bad[0]['line']}); nothing was imported",
                          field="file", path=path[:200], bad_lines=len(bad),
                          lines=bad[:MAX_REPORTED])
    return lines


def _event(text: bytes) -> dict:
    try:
        obj = json.loads(text)
    except (UnicodeDecodeError, ValueError) as e:
        raise _bad(f"not a JSON object: {e}") from None
    if not isinstance(obj, dict):
        raise _bad("not a JSON object")
    unknown = sorted(set(obj) - set(FIELDS))
    if unknown:
        raise _bad(f"unknown field {unknown[0][:40]!r} (fields: {', '.join(FIELDS)})",
                   unknown[0][:40])
    for name in ("kind", "session", "text"):
        if not isinstance(obj.get(name), str):
            raise _bad(f"{name} is required (a string)", name)
    for name in ("actor", "occurred_at"):
        if not isinstance(obj.get(name, ""), str):
            raise _bad(f"{name} must be a string", name)
    for name in ("secret", "erased"):
        if not isinstance(obj.get(name, False), bool):
            raise _bad(f"{name} must be true or false", name)
    if obj["kind"] not in KINDS:
        raise _bad(f"kind must be one of {', '.join(KINDS)}", "kind")
    check_name(obj["session"], "session")
    check_label(obj.get("actor", ""), "actor")
    size = len(obj["text"].encode("utf-8", "surrogatepass"))
    if size > EVENT_TEXT_BYTES.max:
        raise _bad(f"text exceeds {EVENT_TEXT_BYTES.max} bytes", "text")
    return {"session": obj["session"], "kind": obj["kind"], "text": obj["text"],
            "actor": obj.get("actor", ""),
            "occurred_at": check_occurred_at(obj.get("occurred_at", "")),
            "secret": obj.get("secret", False)}


def _bad(message: str, field: Optional[str] = None) -> MorphzError:
    return MorphzError("CONTEXT_INPUT_INVALID", message, field=field)
