"""Running cases: each against the driver, timed, one progress line each, then a
summary table; and the report they make."""
from __future__ import annotations

import datetime
import time
import traceback
import uuid
from dataclasses import dataclass
from typing import Any, Iterable, Optional, TextIO

from morphz_conformance import __version__
from morphz_conformance.driver import Driver, NotSupported, Rejected, Unreachable
from morphz_conformance.mapping import CONDITIONS, ids_of, included
from morphz_conformance.registry import Case, CaseFailed, CaseRun, NotApplicable
from morphz_conformance.report import environment, kit_hash, scrub

PASS, FAIL, NOT_APPLICABLE = "pass", "fail", "not-applicable"
NOT_OFFERED = "not-offered"  # a conditional requirement whose feature the target declares absent
REASON_CHARS = 600  # a reason is for people; the report stays readable


@dataclass(frozen=True)
class Result:
    id: str
    case: str
    profile: str
    outcome: str
    reason: str
    ms: int


def select(cases: Iterable[Case], profile: str, extensions: Iterable[str] = (),
           only: Iterable[str] = ()) -> list[Case]:
    """The cases a claim of `profile` (plus `extensions`) runs; `only`: just these ids
    or case names (a debugging aid: such a run's report says so)."""
    scope = set(included(profile)) | set(extensions)
    chosen = [c for c in cases if c.profile in scope]
    only = set(only)
    return [c for c in chosen if c.id in only or c.name in only] if only else chosen


def run_case(driver: Driver, case: Case, run_id: str, secrets: set[str],
             not_offered: frozenset[str] = frozenset()) -> Result:
    """`not_offered`: the features (mapping.CONDITIONS) the target declares it lacks."""
    started = time.monotonic()
    missing = sorted(case.needs - driver.capabilities())
    feature = CONDITIONS.get(case.id, "")
    if feature and feature in not_offered:
        outcome, reason = NOT_OFFERED, f"the implementation declares it offers no {feature}"
    elif missing:
        outcome, reason = NOT_APPLICABLE, f"the driver has no {', '.join(missing)} hook"
    else:
        try:
            case.fn(CaseRun(driver, run_id, case, secrets))
            outcome, reason = PASS, ""
        except (NotApplicable, NotSupported) as e:
            outcome, reason = NOT_APPLICABLE, str(e) or type(e).__name__
        except CaseFailed as e:
            outcome, reason = FAIL, str(e)
        except Rejected as e:
            outcome, reason = FAIL, f"unexpected rejection {e.reason}: {e.message}"
        except Unreachable as e:
            outcome, reason = FAIL, f"the target did not answer: {e}"
        except Exception as e:  # a case's own bug or a driver's: still this case's failure
            where = traceback.extract_tb(e.__traceback__)[-1]
            outcome, reason = FAIL, (f"error {type(e).__name__}: {e} "
                                     f"(at {where.name}:{where.lineno})")
    ms = int((time.monotonic() - started) * 1000)
    return Result(case.id, case.name, case.profile, outcome,
                  scrub(reason, secrets)[:REASON_CHARS], ms)


def run(driver: Driver, cases: list[Case], out: Optional[TextIO],
        secrets: set[str], not_offered: frozenset[str] = frozenset()) -> list[Result]:
    run_id = uuid.uuid4().hex[:8]
    results = []
    width = len(str(len(cases)))
    for n, case in enumerate(cases, 1):
        result = run_case(driver, case, run_id, secrets, not_offered)
        results.append(result)
        if out is not None:
            line = f"[{n:>{width}}/{len(cases)}] {case.id:<9} {result.outcome:<14} " \
                   f"{result.ms:>6} ms  {case.name}"
            if result.reason:
                line += f"\n{'':>{2 * width + 3}} {result.reason}"
            print(line, file=out, flush=True)
    return results


def summary_table(results: list[Result], profiles: tuple[str, ...],
                  extensions: Iterable[str], case_ids: set[str]) -> str:
    """`case_ids`: the ids the kit has a case for (the others are "uncovered")."""
    rows = [("profile", PASS, FAIL, NOT_APPLICABLE, "uncovered ids")]
    for profile in (*profiles, *extensions):
        mine = [r for r in results if r.profile == profile]
        uncovered = [i for i in ids_of((profile,)) if i not in case_ids]
        rows.append((profile, *(str(sum(r.outcome == o for r in mine))
                                for o in (PASS, FAIL, NOT_APPLICABLE)), str(len(uncovered))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows)


def build_report(results: list[Result], *, profile: str, extensions: list[str],
                 driver: Driver, target: str, started: datetime.datetime, ms: int,
                 partial: bool, secrets: set[str], case_ids: set[str],
                 not_offered: frozenset[str] = frozenset()) -> dict[str, Any]:
    """`case_ids`: the ids the kit has a case for; `partial`: only some of them ran."""
    profiles = included(profile)
    scope = (*profiles, *extensions)
    impl = driver.implementation()
    failed = [r for r in results if r.outcome == FAIL]
    uncovered = [i for i in ids_of(scope) if i not in case_ids]
    report = {
        "format": "morphz-conformance-report/1",
        "kit": {"name": "morphz-conformance", "version": __version__, "hash": kit_hash()},
        "implementation": {"name": impl.name, "version": impl.version},
        "target": target,
        "profile": profile,
        "profiles_included": list(profiles),
        "extensions": list(extensions),
        "started_at": started.isoformat(timespec="seconds"),
        "duration_ms": ms,
        "environment": environment(),
        "cases": [{"id": r.id, "case": r.case, "profile": r.profile, "outcome": r.outcome,
                   "reason": r.reason, "ms": r.ms} for r in results],
        "summary": {PASS: sum(r.outcome == PASS for r in results),
                    FAIL: len(failed),
                    NOT_APPLICABLE: sum(r.outcome == NOT_APPLICABLE for r in results),
                    NOT_OFFERED: sum(r.outcome == NOT_OFFERED for r in results),
                    # ids of the claimed scope the kit has no case for yet: a claim over
                    # them is not proven, and the report says so.
                    "uncovered": uncovered},
        "partial": partial,
        # The features the implementation declared it does not offer (mapping.CONDITIONS):
        # the cases that hold only with them are not-offered, not passed.
        "not_offered": sorted(not_offered),
        # A profile is passed when every case of its scope ran and passed, and every id of
        # it has a case.
        "verdict": PASS if not failed and not uncovered and not partial and not any(
            r.outcome == NOT_APPLICABLE for r in results) else FAIL,
    }
    return scrub(report, secrets)


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)
