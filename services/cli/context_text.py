"""Text output of the `morphz context` commands the transaction service answers: a
readable rendering of each reply dict (`--format=json` prints the dict as it is)."""
from __future__ import annotations

from typing import TextIO

from morphz.services.cli import space


def _line(out: TextIO, key: str, value: object) -> None:
    if isinstance(value, bool):
        value = "yes" if value else "no"
    elif isinstance(value, list):
        value = ", ".join(map(str, value)) or "-"
    elif value is None or value == "":
        value = "-"
    print(f"{key}: {value}", file=out)


def render_status(r: dict, out: TextIO) -> None:
    _line(out, "context", r["context"])
    _line(out, "revision", r["revision"])
    _line(out, "cognitive_tick", r["cognitive_tick"])
    _line(out, "window", r["window"])
    frames = dict(r.get("frames_by_state") or {})
    order = [k for k in ("active", "retiring", "retired") if k in frames]
    order += sorted(set(frames) - set(order))
    _line(out, "frames", " ".join(f"{k}={frames[k]}" for k in order))
    _line(out, "event_count", r["event_count"])
    _line(out, "commit_seq", r.get("commit_seq", 0))
    for key in ("owner", "owner_address", "fencing_token", "shard"):
        if r.get(key):  # only where etcd places and owns contexts
            _line(out, key, r[key])
    if r.get("storage_space"):
        state = r["storage_space"]
        _line(out, "storage_space", f"{state}: {space.NOTE[state]}" if state in space.NOTE
              else state)
    render_retention(r, out)
    _line(out, "sessions", len(r.get("sessions") or []))
    for s in r.get("sessions") or []:
        print(f"  {s['id']} state={s['state']} level={s['level']} pending={s['pending']}"
              f" messages_waiting={s.get('messages_waiting', 0)}"
              f" outstanding_calls={s.get('outstanding_calls', 0)}", file=out)


def render_event_receipt(r: dict, out: TextIO) -> None:
    for key in ("ref", "seq", "id", "replayed"):
        _line(out, key, r[key])
    # Where an action, a call's result or a message went (absent for other inputs).
    for key in ("session", "activation", "call", "returned_to", "target_session"):
        if r.get(key):
            _line(out, key, r[key])


def render_activation(r: dict, out: TextIO) -> None:
    _line(out, "activation", r["id"])
    _line(out, "session", r["session"])
    _line(out, "claimed", r["claimed"])
    _line(out, "root", r["root"])
    _line(out, "tick", f"{r['tick']}{' (advanced)' if r['tick_advanced'] else ''}")
    _line(out, "retired_frames", r["retired_frames"])
    _line(out, "delivered", r["delivered"])
    if r.get("results"):  # results of its calls that came while it was open
        _line(out, "results", r["results"])


def render_receipt(r: dict, out: TextIO) -> None:
    print(f"revision {r['revision']}", file=out)
    for res in r["results"]:
        extra = []
        if res.get("frame_revision"):
            extra.append(f"frame revision {res['frame_revision']}")
        if res.get("due_tick"):
            extra.append(f"due tick {res['due_tick']}")
        suffix = f" ({', '.join(extra)})" if extra else ""
        print(f"#{res['index']} {res['op']} {res['target']} -> {res['outcome']}{suffix}",
              file=out)
    _line(out, "base_version", r["base_version"])
    _line(out, "cognitive_tick", r["cognitive_tick"])
    _line(out, "event_ref", r["event_ref"])
    cap = r.get("capacity") or {}
    if cap:
        _line(out, "released_now", f"{cap['released_now_bytes']} bytes "
              f"[{', '.join(cap['released_now'])}]")
        _line(out, "released_after_window", f"{cap['released_after_window_bytes']} bytes "
              f"[{', '.join(cap['released_after_window'])}]")
    if r.get("replayed"):
        _line(out, "replayed", True)


def render_frame(r: dict, out: TextIO) -> None:
    _line(out, "id", r["id"])
    _line(out, "revision", r["revision"])
    _line(out, "state", r["state"])
    _line(out, "protected", r["protected"])
    _line(out, "sources", r["sources"])
    retire = r.get("retire")
    if retire:
        _line(out, "retire", f"due tick {retire['due_tick']} "
              f"({retire['remaining_ticks']} ticks remaining)")
        _line(out, "retire_reason", retire["reason"])
    _line(out, "changed_at", r["changed_at"])
    _line(out, "as_of_revision", r["as_of_revision"])
    for rel in r.get("relations") or []:  # when the server reports the frame's edges
        _line(out, "relation", f"{rel['subject']} {rel['name']} {rel['object']}")
    if r.get("secret"):
        _line(out, "secret", "yes: (secret ...) parts")
    print(file=out)
    print(r["body"], file=out)


def render_frames(r: dict, out: TextIO) -> None:
    """A frame a line: id, state, revision and the body's first 100 characters."""
    for f in r["frames"]:
        body = " ".join(f["body"].split())
        print(f"{f['id']} [{f['state']}] rev {f['revision']}  "
              f"{body[:100]}{'…' if len(body) > 100 else ''}", file=out)
    if r.get("next_cursor"):
        print(f"next_cursor: {r['next_cursor']}", file=out)


def render_event(r: dict, out: TextIO) -> None:
    for key in ("ref", "id", "seq", "kind", "session", "actor", "time", "state",
                "protected", "causal_refs", "request_id", "context"):
        _line(out, key, r.get(key))
    for key in ("activation", "call", "target_session", "secret", "occurred_at"):
        if r.get(key):
            _line(out, key, r[key])
    print(file=out)
    print(r.get("text", ""), file=out)


def render_audit(r: dict, out: TextIO) -> None:
    verdict = "match" if r["match"] else "MISMATCH"
    print(f"audit {r['context']}: {verdict} ({r['events_replayed']} events replayed)",
          file=out)
    for p in r["projections"]:
        print(f"{'ok' if p['match'] else 'MISMATCH'} {p['projection']}", file=out)
        for d in p["differences"]:
            print(f"  {d}", file=out)
    if r.get("replay_error"):
        print(f"REPLAY FAILED: {r['replay_error']}", file=out)
    links = r.get("chain") or {}
    if links.get("match", True):
        erased = links.get("erased", 0)
        print(f"ok event chain ({links.get('checked', 0)} links"
              + (f", {erased} erased events" if erased else "") + ")", file=out)
    else:
        print(f"BROKEN event chain at {links['first_broken']}: {links['problem']}", file=out)


def render_rebuild(r: dict, out: TextIO) -> None:
    print(f"rebuilt {r['context']} from {r['events_replayed']} events", file=out)
    for table, n in sorted(r["rewritten"].items()):
        print(f"rewritten {table}: {n} row(s)", file=out)
    if not r["rewritten"]:
        print("every projection already matched", file=out)
    for table in r["unrepairable"]:
        print(f"UNREPAIRABLE {table} (append-only)", file=out)
    for row in r.get("quarantined", []):
        print(f"quarantined {row} (a stray row past the history, kept aside)", file=out)


def render_policy(r: dict, out: TextIO) -> None:
    _line(out, "context", r["context"])
    if r.get("event_ref"):
        _line(out, "event_ref", r["event_ref"])
    for g in r.get("grants") or []:
        print(f"  {g['principal']} {g['right']}"
              f"{' session ' + g['session'] if g.get('session') else ''}", file=out)
    render_retention(r, out)


def render_retention(r: dict, out: TextIO) -> None:
    """The retention policy line of a status or a policy (none: nothing)."""
    kept = r.get("retention")
    if kept:
        due = kept.get("next_due") or "on demand only (morphz job start retention)"
        _line(out, "retention", f"{kept['policy']} set at {kept['set_at']}; next due {due}")


def render_list(r: dict, out: TextIO) -> None:
    for name in r.get("contexts") or []:
        print(name, file=out)


def audit_exit(r: dict) -> int:
    return 0 if r.get("match") else 1
