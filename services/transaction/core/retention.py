"""A context's retention policy (docs/privacy.md, PRIV-04):

    (retention (kinds tool-result external) (days 30))

erases the content of the events of those kinds that occurred (where no occurred time
was given: were recorded) more than `days` days before the policy is applied, except
protected inputs (and the root requests of open activations) and the sources of active
frames. It takes raw content only: a frame derived from such events keeps its body (the
agent's conclusion is not what the policy names), unlike an erasure asked for by name.

An administrator sets it as a policy change (SetPolicy, op `retention`): a `policy`
event, chained, audited and replayed like a grant, whose reducer keeps it in the policy
table under a key no grant can have (no principal is empty). The `retention` job applies
it (transaction/jobs.py): on demand, and from the transaction service's timer at every
multiple of its period (transaction/retention_timer.py), which `status` shows as the
next due time."""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Optional

from morphz.shared import sexpr
from morphz.shared.errors import MorphzError
from morphz.services.transaction.core.erase_select import ERASABLE_KINDS, Selector

ROW = ("", "retention", "")  # its key in the policy table
OFF = "none"  # SetPolicy's retention text that removes the policy
MAX_DAYS = 36_500
MAX_TEXT = 1024
RETENTION_EVERY = 3600.0  # the timer's default period (`morphz serve --retention-every`)


@dataclass(frozen=True)
class Retention:
    """Which kinds, older than how many days (kinds sorted, each once)."""
    kinds: tuple[str, ...]
    days: int

    @staticmethod
    def parse(text: str) -> Optional["Retention"]:
        """The policy `text` gives (None for `none`: no policy), or
        CONTEXT_INPUT_INVALID (field `retention`) saying what is wrong."""
        text = (text or "").strip()
        if text == OFF:
            return None
        if not text or len(text) > MAX_TEXT:
            raise _invalid("a retention policy reads (retention (kinds KIND...) (days N)), "
                           "or `none` to remove it")
        try:
            form = sexpr.parse_one(text)
        except sexpr.SexprError as e:
            raise _invalid(f"the retention policy does not parse: {e}") from None
        if not (isinstance(form, list) and form and form[0] == sexpr.Symbol("retention")):
            raise _invalid("a retention policy is one form (retention (kinds ...) (days N))")
        clauses: dict[str, list] = {}
        for clause in form[1:]:
            if not (isinstance(clause, list) and clause and isinstance(clause[0], sexpr.Symbol)
                    and clause[0].name in ("kinds", "days")):
                raise _invalid(f"unknown clause {sexpr.render(clause)[:60]!r}: "
                               "(kinds KIND...) and (days N)")
            if clause[0].name in clauses:
                raise _invalid(f"({clause[0].name} ...) given twice")
            clauses[clause[0].name] = clause[1:]
        return Retention(_kinds(clauses.get("kinds")), _days(clauses.get("days")))

    def text(self) -> str:
        """Its canonical text (what parse reads back to an equal policy)."""
        return f"(retention (kinds {' '.join(self.kinds)}) (days {self.days}))"

    def to_data(self) -> dict:
        return {"kinds": list(self.kinds), "days": self.days}

    @staticmethod
    def from_data(d: dict) -> "Retention":
        return Retention(tuple(d["kinds"]), int(d["days"]))

    def cutoff(self, now: datetime) -> datetime:
        """Events that occurred before this are past the policy's age, applied `now`."""
        return now - timedelta(days=self.days)

    def selector(self, now: datetime) -> Selector:
        """What applying it `now` erases: raw content only (no frame body)."""
        return Selector(kinds=self.kinds, until=self.cutoff(now).isoformat(),
                        keep_protected=True, keep_active_sources=True, derived=False)


def _invalid(message: str) -> MorphzError:
    return MorphzError("CONTEXT_INPUT_INVALID", message, field="retention")


def _kinds(items: Optional[list]) -> tuple[str, ...]:
    if not items:
        raise _invalid("a retention policy names the kinds it erases: (kinds KIND...)")
    kinds = set()
    for k in items:
        name = k.name if isinstance(k, sexpr.Symbol) else k if isinstance(k, str) else ""
        if name not in ERASABLE_KINDS:
            raise _invalid(f"kind {str(k)[:40]!r} is not one a retention policy erases "
                           f"({', '.join(sorted(ERASABLE_KINDS))})")
        kinds.add(name)
    return tuple(sorted(kinds))


def _days(items: Optional[list]) -> int:
    if not items or len(items) != 1 or type(items[0]) is not int or \
            not 1 <= items[0] <= MAX_DAYS:
        raise _invalid(f"a retention policy says its age in whole days: (days N), "
                       f"N in 1..{MAX_DAYS}")
    return items[0]


# -- as kept in the policy table --------------------------------------------------------------
def row_value(policy: Retention, set_at: str) -> bytes:
    """The policy table's row: the policy and the policy event that set it."""
    return json.dumps({**policy.to_data(), "set_at": set_at}, sort_keys=True,
                      separators=(",", ":")).encode()


def from_row(raw: Optional[bytes]) -> Optional[tuple[Retention, str]]:
    """(the policy, the ref of the event that set it), or None where none is set."""
    if raw is None:
        return None
    d = json.loads(raw)
    return Retention.from_data(d), d["set_at"]


# -- when it is applied ---------------------------------------------------------------------
@dataclass(frozen=True)
class Schedule:
    """The retention timer's period: it applies every context's policy at each multiple
    of `every` seconds since the Unix epoch (so every instance, and every restart, names
    the same times). 0: only on demand."""
    every: float = RETENTION_EVERY

    def next_after(self, now: datetime) -> Optional[datetime]:
        """The first time the timer applies the policies after `now` (None: never)."""
        if self.every <= 0:
            return None
        t = now.timestamp()
        return datetime.fromtimestamp((t // self.every + 1) * self.every, timezone.utc)


ON_DEMAND = Schedule(0)  # no timer: applied only when asked
