"""Versions of the rules that decide transactions and activations.

Every context-tx and activation event records the version of the rules it was
decided under (`data["rules"]`, payloads.py; events written before versioning carry
none and are version 1). Replay (audit, projection rebuilds, recovery) applies each event with the
rules of its own version, so changing a rule never makes old history look damaged.

  1  A transaction stamps the boundaries its operations declare (their static
     footprint) and the lifecycles the successor rule retired; activations stamp none.
  2  A transaction also stamps every boundary it actually changed (a rollback's
     frames, edges, order and lifecycles; a session's attention); a window retirement
     at an activation stamps the frame's lifecycle with the revision and tick. Events
     a committed frame cites as sources are promoted into the shared Mind (visible to
     every session's evaluations from then on). The successor rule also judges the
     frames a rollback brought back, and the receipt counts what a rollback released.
"""
from __future__ import annotations

from dataclasses import dataclass

from morphz.shared.errors import MorphzError


@dataclass(frozen=True)
class Rules:
    version: int
    stamp_actual_changes: bool
    stamp_window_retirements: bool
    promote_cited_evidence: bool
    rollback_settles_frames: bool


VERSIONS = {
    1: Rules(1, stamp_actual_changes=False, stamp_window_retirements=False,
             promote_cited_evidence=False, rollback_settles_frames=False),
    2: Rules(2, stamp_actual_changes=True, stamp_window_retirements=True,
             promote_cited_evidence=True, rollback_settles_frames=True),
}
CURRENT = max(VERSIONS)


def rules(version: int) -> Rules:
    found = VERSIONS.get(version)
    if found is None:
        raise MorphzError("RULES_VERSION_UNSUPPORTED", f"rules version {version} is not known "
                          f"to this server (it knows {', '.join(map(str, VERSIONS))})",
                          rules_version=version)
    return found
