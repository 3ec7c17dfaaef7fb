"""Dependency check: is each input a snapshot used still
current? Reads the current projections only; the snapshot itself is never touched.
Any change makes the snapshot invalid for new use (ASM-04); replay still reproduces
what the evaluation saw."""
from __future__ import annotations

from morphz.shared.mind import records as R, secrets
from morphz.shared.mind.view import MindView
from morphz.services.encoding.core.record import SnapshotRecord
from morphz.services.encoding.core.results import CheckReport, Dependency


def check(record: SnapshotRecord, m: MindView) -> CheckReport:
    inputs = record.body.inputs
    changed: list[Dependency] = []

    def note(key: str, kind: str, reason: str, recorded: int = 0, current: int = 0) -> None:
        changed.append(Dependency(key, kind, "changed", reason, recorded, current))

    for o in inputs.observations:
        obs = m.observation(o.seq)
        ev = m.event(o.seq) if m.has_event(o.seq) else None
        if ev is not None and secrets.erasure_of(ev.data):  # PRIV-01: its content is gone
            note(o.ref, "event", "source_erased")
        elif obs is None or obs.retired:
            note(o.ref, "event", "source_retired")
    for f in inputs.frames:
        cur = m.frame(f.id)
        shown = m.frame_at(f.id, record.head.revision) if record.head.revision else None
        if shown is not None and shown.erased:
            note(f.id, "frame", "frame_erased", f.revision, cur.revision if cur else 0)
        elif cur is None:
            note(f.id, "frame", "frame_removed", f.revision)
        elif cur.state == R.RETIRED:
            note(f.id, "frame", "frame_retired", f.revision, cur.revision)
        elif cur.revision != f.revision:
            note(f.id, "frame", "frame_revised", f.revision, cur.revision)
    for s, n, o in inputs.relations:
        if not m.has_relation(s, n, o):
            note(f"{s} {n} {o}", "relation", "relation_removed")
    for s in inputs.sessions:
        cur = m.session(s.id)
        if cur is not None and cur.state == R.RETIRED and s.state != R.RETIRED:
            # The evaluating session losing attention revokes the snapshot's access.
            reason = "access_revoked" if s.id == record.session else "session_retired"
            note(s.id, "session", reason)
    meta = m.meta()
    checked = (len(inputs.observations) + len(inputs.frames) + len(inputs.relations)
               + len(inputs.sessions))
    return CheckReport(record.id, record.head.revision, meta.revision, not changed,
                       not changed, checked, changed)
