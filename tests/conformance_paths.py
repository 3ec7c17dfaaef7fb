"""The conformance kit's tests share these: the requirement document they read (the copy
that ships inside the kit, morphz_conformance/CONFORMANCE.md), where the project's own
design/CONFORMANCE.md is when it is at hand (../shared beside the checkout; a git
worktree of the project sits elsewhere, so its main checkout's neighbour is tried too),
the requirement ids the document lists, and the ids the kit has no case for yet."""
from __future__ import annotations

import pathlib
import re
import subprocess
from typing import Optional

# The requirements the kit has no case for yet: the gap, in the open. KIT-01's test
# (tests/unit/test_conformance_kit.py) fails when one of them gets a case (take it off this
# list) and when any other id has none.
CASE_MISSING = frozenset({
})

ROOT = pathlib.Path(__file__).resolve().parents[1]
KIT = ROOT / "clients" / "conformance"


def conformance_md() -> pathlib.Path:
    """The kit's copy of the document: what the tests read, in any checkout."""
    return KIT / "morphz_conformance" / "CONFORMANCE.md"


def design_conformance_md() -> Optional[pathlib.Path]:
    """The project's design/CONFORMANCE.md, where a checkout has it beside it; else None
    (a clone standing alone)."""
    candidates = [ROOT.parent / "shared" / "design" / "CONFORMANCE.md"]
    common = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--path-format=absolute",
                             "--git-common-dir"], capture_output=True, text=True)
    if common.returncode == 0 and common.stdout.strip():
        main_checkout = pathlib.Path(common.stdout.strip()).parent
        candidates.append(main_checkout.parent / "shared" / "design" / "CONFORMANCE.md")
    return next((path for path in candidates if path.is_file()), None)


def conformance_ids() -> list[str]:
    """Every requirement id the document lists, in its order."""
    return re.findall(r"^- ([A-Z]+-\d+) ", conformance_md().read_text(encoding="utf-8"),
                      re.MULTILINE)
