"""Cases: each a function of a `CaseRun`, named by its CONFORMANCE id with `@case`, and
collected from the case modules in definition order. A case's profile is its id's
(mapping.REQUIREMENTS): one source for both."""
from __future__ import annotations

import itertools
import types
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

from morphz_conformance.driver import Driver, NotSupported, Receipt, Rejected
from morphz_conformance.mapping import REQUIREMENTS

_SPEC = "__conformance_case__"


class CaseFailed(Exception):
    """The implementation did not behave as the requirement says."""


class NotApplicable(Exception):
    """The case cannot run against this target (a control hook the driver lacks)."""


@dataclass(frozen=True)
class Case:
    id: str         # CONFORMANCE id, e.g. CORE-05
    name: str       # the function's name, unique across the kit
    title: str
    profile: str
    needs: frozenset[str]  # driver capabilities (control hooks) the case uses
    fn: Callable[["CaseRun"], None]


def case(rid: str, title: str, *, needs: Iterable[str] = ()):
    """Mark a function as the kit case for requirement `rid`."""
    if rid not in REQUIREMENTS:
        raise ValueError(f"{rid} is not a CONFORMANCE id")

    def mark(fn):
        setattr(fn, _SPEC, (rid, title, frozenset(needs)))
        return fn
    return mark


def collect(modules: Iterable[types.ModuleType]) -> list[Case]:
    cases = []
    for module in modules:
        for name, fn in vars(module).items():
            spec = getattr(fn, _SPEC, None)
            if spec is not None:
                rid, title, needs = spec
                cases.append(Case(rid, name, title, REQUIREMENTS[rid], needs, fn))
    return cases


def all_cases() -> list[Case]:
    from morphz_conformance.cases import MODULES
    return collect(MODULES)


class CaseRun:
    """What a case works with: the driver, fresh contexts, and checks that fail the case
    with a message saying what differed."""

    def __init__(self, driver: Driver, run_id: str, case: Case,
                 secrets: Optional[set[str]] = None) -> None:
        self.driver, self.case = driver, case
        self._prefix = f"kit-{run_id}-{case.name.replace('_', '-')}"[:80]
        self._n = itertools.count(1)
        self._secrets = secrets if secrets is not None else set()

    # -- set-up ----------------------------------------------------------------------------
    def context(self, *, window: int = 0) -> str:
        """A new context of this case's own."""
        name = f"{self._prefix}-{next(self._n)}"
        self.driver.create_context(name, window=window)
        return name

    def request_id(self, label: str) -> str:
        """A request id unique to this run and case (retries reuse the same one)."""
        return f"{self._prefix}-{label}"

    def secret(self, text: str) -> str:
        """Register a secret text the case plants: it is scrubbed from every report."""
        self._secrets.add(text)
        return text

    def needs(self, capability: str) -> None:
        if capability not in self.driver.capabilities():
            raise NotApplicable(f"the driver has no {capability!r} hook")

    # -- the model, tersely ------------------------------------------------------------------
    def revision(self, ctx: str) -> int:
        return self.driver.status(ctx).revision

    def tx(self, ctx: str, ops: str, *, base: Optional[int] = None, reason: str = "",
           session: str = "", request_id: str = "", activation: str = "") -> Receipt:
        """Commit `(context-tx (base-version B) [(reason R)] OPS)`; base: the current."""
        base = self.revision(ctx) if base is None else base
        reason_form = f" (reason {_quoted(reason)})" if reason else ""
        return self.driver.commit(ctx, f"(context-tx (base-version {base}){reason_form} {ops})",
                                  session=session, request_id=request_id, activation=activation)

    def search(self, ctx: str, query: str = "", **kw):
        """A search that sees every write made so far (it names the context's current
        version: read your writes, RECALL-13)."""
        kw.setdefault("min_commit_seq", self.driver.status(ctx).commit_seq)
        return self.driver.search(ctx, query, **kw)

    def tick(self, ctx: str, n: int = 1, session: str = "s1"):
        """Advance cognitive_tick n times: one external input per claimed batch."""
        act = None
        for i in range(n):
            self.driver.append(ctx, session, "tool-result", f"tool output {i}")
            act = self.driver.activate(ctx, session)
        return act

    # -- checks ------------------------------------------------------------------------------
    @staticmethod
    def check(condition: Any, message: str) -> None:
        if not condition:
            raise CaseFailed(message)

    @staticmethod
    def eq(actual: Any, expected: Any, what: str) -> None:
        if actual != expected:
            raise CaseFailed(f"{what}: expected {expected!r}, got {actual!r}")

    @staticmethod
    def rejected(expected: str | frozenset[str], fn: Callable, /, *args, **kwargs) -> Rejected:
        """fn(*args, **kwargs) must be rejected with reason `expected` (or one of a set);
        returns the rejection."""
        try:
            result = fn(*args, **kwargs)
        except Rejected as e:
            if e.reason != expected and not (isinstance(expected, frozenset)
                                             and e.reason in expected):
                raise CaseFailed(f"expected rejection {expected}, got {e.reason}: "
                                 f"{e.message[:200]}") from None
            return e
        raise CaseFailed(f"expected rejection {expected}, but it was accepted: "
                         f"{_short(result)}")


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 300 else text[:300] + "..."


__all__ = ["Case", "CaseFailed", "CaseRun", "NotApplicable", "NotSupported", "all_cases",
           "case", "collect"]
