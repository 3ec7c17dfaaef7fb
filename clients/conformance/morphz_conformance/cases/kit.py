"""The Kit extension (KIT-01..03): the kit checks itself, so a report shows the kit that
made it could tell a broken implementation from a sound one.

KIT-03 bends the target's behaviour inside the kit (a driver that forwards everything but
one fault) and requires the case named for that fault to fail against it while it passes
against the target itself. The repository's own tests do the same with a faulting gRPC
proxy in front of a real server (tests/conformance_proxy.py)."""
from __future__ import annotations

import json
import re
import sys
import uuid

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from morphz_conformance.driver import Rejected
from morphz_conformance.mapping import EXTENSIONS, PROFILES, REQUIREMENTS
from morphz_conformance.registry import CaseRun, case
from morphz_conformance.report import REDACTED, VerifyError, canonical, scrub, sign, verify


@case("KIT-01", "every requirement maps to a profile and a case; no server module is loaded")
def kit_01_mapping_and_independence(t: CaseRun):
    from morphz_conformance.registry import all_cases
    t.check(set(REQUIREMENTS.values()) <= set(PROFILES + EXTENSIONS),
            "a requirement maps to no known profile or extension")
    ids = {c.id for c in all_cases()}
    t.check(ids <= set(REQUIREMENTS), f"cases for unknown ids: {sorted(ids - set(REQUIREMENTS))}")
    loaded = sorted(m for m in sys.modules if m == "morphz" or m.startswith("morphz."))
    t.eq(loaded, [], "server modules loaded in the kit's process")


@case("KIT-02", "a report is signed over a canonical encoding; a changed byte fails; no secrets")
def kit_02_signing_and_scrubbing(t: CaseRun):
    key = Ed25519PrivateKey.generate()
    planted = f"secret-{uuid.uuid4().hex}"
    report = scrub({"cases": [{"id": "CORE-01", "reason": f"echoed {planted}"}],
                    "implementation": {"name": "x", "version": "1"}}, {planted})
    t.check(planted not in repr(report) and REDACTED in repr(report), "the secret was scrubbed")
    signed = sign(report, key)
    verify(signed, key.public_key())
    body = canonical(signed)
    for i in range(len(body)):
        changed = bytearray(body)
        changed[i] ^= 0x01
        try:
            tampered = json.loads(changed.decode("utf-8"))
        except ValueError:
            continue
        if canonical(tampered) == body:
            continue
        tampered["signature"] = signed["signature"]
        try:
            verify(tampered, key.public_key())
        except VerifyError:
            continue
        t.check(False, f"a report changed at byte {i} still verifies")


class _Bent:
    """The target's driver with one behaviour broken; everything else forwarded."""

    def __init__(self, inner) -> None:
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)


class _StaleLastWriterWins(_Bent):
    """A stale transaction (TX_CONFLICT) is applied anyway over the latest version."""

    def commit(self, context, text, **kw):
        try:
            return self._inner.commit(context, text, **kw)
        except Rejected as e:
            if e.reason != "TX_CONFLICT":
                raise
        latest = self._inner.status(context).revision
        return self._inner.commit(
            context, re.sub(r"\(base-version \d+\)", f"(base-version {latest})", text, count=1),
            **kw)


class _RetryAnsweredTwice(_Bent):
    """A retried request (same request id) is applied a second time."""

    def _fresh(self, kw):
        if kw.get("request_id"):
            kw["request_id"] = f"{kw['request_id']}-{uuid.uuid4().hex[:8]}"
        return kw

    def commit(self, context, text, **kw):
        return self._inner.commit(context, text, **self._fresh(kw))

    def append(self, context, session, kind, text, **kw):
        return self._inner.append(context, session, kind, text, **self._fresh(kw))


class _LeaksOtherSessions(_Bent):
    """A session's commit is checked as an operator's: another session's private evidence
    may be cited (the causal scope is not enforced)."""

    def commit(self, context, text, **kw):
        kw["session"] = ""
        return self._inner.commit(context, text, **kw)


# fault -> the case named for it (by function name)
FAULTS = (
    (_StaleLastWriterWins, "conc_02_changed_boundary_rejected"),
    (_RetryAnsweredTwice, "dur_04_idempotent_retries"),
    (_LeaksOtherSessions, "conc_07_causal_scope"),
)


@case("KIT-03", "each deliberately broken target fails the case named for its fault")
def kit_03_broken_targets_fail_their_cases(t: CaseRun):
    from morphz_conformance.registry import all_cases
    from morphz_conformance.runner import FAIL, PASS, run_case
    by_name = {c.name: c for c in all_cases()}
    secrets: set[str] = set()
    for fault, name in FAULTS:
        named = by_name[name]
        sound = run_case(t.driver, named, f"k3s{uuid.uuid4().hex[:6]}", secrets)
        t.eq(sound.outcome, PASS, f"{name} against the target itself ({sound.reason})")
        bent = run_case(fault(t.driver), named, f"k3b{uuid.uuid4().hex[:6]}", secrets)
        t.eq(bent.outcome, FAIL, f"{name} against {fault.__doc__.strip()!r}")
