"""Dependency check: is each input a snapshot used still
current? Reads the current projections only; the snapshot itself is never touched.
Any change makes the snapshot invalid for new use (ASM-04); replay still reproduces
what the evaluation saw."""
from __future__ import annotations

from morphz.shared.mind import records as R
from morphz.shared.mind.view import MindView


def check(record: dict, m: MindView) -> dict:
    inputs = record["inputs"]
    changed: list[dict] = []

    def note(key: str, kind: str, reason: str, recorded: int = 0, current: int = 0) -> None:
        changed.append({"key": key, "kind": kind, "status": "changed", "reason": reason,
                        "recorded_revision": recorded, "current_revision": current})

    for o in inputs["observations"]:
        obs = m.observation(int(o["ref"][2:]))
        if obs is None or obs.retired:
            note(o["ref"], "event", "source_retired")
    for f in inputs["frames"]:
        cur = m.frame(f["id"])
        if cur is None:
            note(f["id"], "frame", "frame_removed", f["revision"])
        elif cur.state == R.RETIRED:
            note(f["id"], "frame", "frame_retired", f["revision"], cur.revision)
        elif cur.revision != f["revision"]:
            note(f["id"], "frame", "frame_revised", f["revision"], cur.revision)
    for s, n, o in inputs["relations"]:
        if not m.has_relation(s, n, o):
            note(f"{s} {n} {o}", "relation", "relation_removed")
    for s in inputs["sessions"]:
        cur = m.session(s["id"])
        if cur is not None and cur.state == R.RETIRED and s["state"] != R.RETIRED:
            # The evaluating session losing attention revokes the snapshot's access.
            reason = "access_revoked" if s["id"] == record["session"] else "session_retired"
            note(s["id"], "session", reason)
    meta = m.meta()
    checked = (len(inputs["observations"]) + len(inputs["frames"]) + len(inputs["relations"])
               + len(inputs["sessions"]))
    return {"snapshot": record["id"], "snapshot_revision": record["revision"],
            "checked_revision": meta.revision, "current": not changed,
            "valid_for_new_use": not changed, "inputs_checked": checked, "changed": changed}
