"""What an erasure takes (docs/privacy.md): the events a selector names, the frame
versions derived only from erased events, and where those bodies were copied to.

One walk of the history selects the events and notes, for each frame, the transactions
whose ops wrote its bodies; then the frame versions are judged in revision order (a
version whose sources are all erased events, or frames whose version at that revision is
erased, is derived only from erased content), and the checkpoints that copied such a
version are found. Nothing is changed here: erasure.py rewrites what the plan names."""
from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Optional

from morphz.shared.deadline import NEVER, Deadline
from morphz.shared.errors import MorphzError
from morphz.shared.mind import envelope, records as R
from morphz.shared.mind.view import MindView
from morphz.shared.names import check_label, check_name
from morphz.shared.occurred import check_occurred_at
from morphz.shared.text.analyze import normalize
from morphz.services.transaction.core.txlang import FRAME_OPS

# What an erasure takes whole: what runtimes append (inputs and actions). Runtime events
# (context-created, activations, deliveries, policy changes, erasures) hold no one's
# content, and a transaction loses only the frame bodies it wrote that are erased.
ERASABLE_KINDS = frozenset(R.APPEND_KINDS)
MAX_REFS = 4096  # refs one selector names (a longer list: select by session or time)
PROGRESS_EVERY = (1 << 12) - 1  # the walk reports its progress every 4,096 events


@dataclass(frozen=True)
class Selector:
    """Which events: all the given criteria hold (refs, session, actor, kinds, a phrase in
    the text, occurred time in [since, until)). `keep_protected`, `keep_active_sources`:
    leave protected observations (and the root requests of open activations) and the
    sources of active frames; `derived` False: take the events' content only, never a
    frame body derived from them (a retention policy's: core/retention.py)."""
    refs: tuple[str, ...] = ()
    session: str = ""
    actor: str = ""
    kinds: tuple[str, ...] = ()
    phrase: str = ""
    since: str = ""
    until: str = ""
    keep_protected: bool = False
    keep_active_sources: bool = False
    derived: bool = True

    def check(self) -> "Selector":
        """The selector with its times normalized, or CONTEXT_INPUT_INVALID naming the
        field: it must name events (refs, a session, an actor or a phrase; kinds only
        with an end time, as a retention policy does)."""
        if not (self.refs or self.session or self.actor or self.phrase.strip()
                or (self.kinds and self.until)):
            raise _invalid("an erasure names its events: refs, a session, an actor or a "
                           "phrase (kinds only with an end time)", "selector")
        if len(self.refs) > MAX_REFS:
            raise _invalid(f"at most {MAX_REFS} refs; select by session, actor or time",
                           "refs", maximum=MAX_REFS)
        for r in self.refs:
            if not R.is_ref(r):
                raise _invalid(f"{r[:80]!r} is not an event ref (@eN)", "refs")
        if self.session:
            check_name(self.session, "session")
        if self.actor:
            check_label(self.actor, "actor")
        for k in self.kinds:
            if k not in ERASABLE_KINDS:
                raise _invalid(f"kind {k[:40]!r} is not one an erasure takes "
                               f"({', '.join(sorted(ERASABLE_KINDS))})", "kinds")
        since, until = _time(self.since, "since"), _time(self.until, "until")
        return Selector(tuple(self.refs), self.session, self.actor, tuple(sorted(self.kinds)),
                        self.phrase, since, until, self.keep_protected,
                        self.keep_active_sources, self.derived)

    def recorded(self) -> dict:
        """What the erasure event records of the selector: never the phrase (it is what
        was erased), only that one was given."""
        out = {k: v for k, v in (("refs", list(self.refs)), ("session", self.session),
                                 ("actor", self.actor), ("kinds", list(self.kinds)),
                                 ("since", self.since), ("until", self.until)) if v}
        if self.phrase:
            out["phrase"] = True
        return out


def _invalid(message: str, field_: str, **details) -> MorphzError:
    return MorphzError("CONTEXT_INPUT_INVALID", message, field=field_, **details)


def _time(value: str, field_: str) -> str:
    try:
        return check_occurred_at(value)
    except MorphzError as e:
        raise _invalid(e.message.replace("occurred_at", field_), field_) from None


@dataclass
class Plan:
    """What an erasure takes. `events`: erased whole (seq order); `transactions`: seq ->
    the frames whose op bodies it takes; `versions`: the frame versions whose bodies it
    takes (each with whether it is the frame's present one); `checkpoints`: those that
    copied such a version. `more`: the selection went past `limit` (erasure.py erases
    the rest in another step)."""
    events: list[int] = field(default_factory=list)
    transactions: dict[int, set[str]] = field(default_factory=dict)
    versions: list[tuple[R.Frame, bool]] = field(default_factory=list)
    checkpoints: list[R.Checkpoint] = field(default_factory=list)
    more: bool = False

    @property
    def empty(self) -> bool:
        return not (self.events or self.versions)


class _Scan:
    """One walk of the history: the events selected, those erased before, and for each
    frame the transactions (revision, seq) whose ops wrote its bodies."""

    def __init__(self, sel: Selector, m: MindView, limit: int) -> None:
        self.sel, self.limit = sel, limit
        self.chosen: list[int] = []
        self.erased_before: set[int] = set()
        self.frame_ops: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.more = False
        self._phrase = normalize(sel.phrase) if sel.phrase.strip() else ""
        self._since = datetime.fromisoformat(sel.since) if sel.since else None
        self._until = datetime.fromisoformat(sel.until) if sel.until else None
        self._refs = {R.ref_seq(r) for r in sel.refs}
        self._kept = _kept(m, sel)
        self._m = m

    def walk(self, m: MindView, deadline: Deadline) -> "_Scan":
        meta = m.meta()
        revision, total = 0, meta.next_seq if meta is not None else 0
        for ev in m.events():
            deadline.check("the erasure's walk of the history")
            if not ev.seq & PROGRESS_EVERY:
                deadline.advanced(ev.seq, total)  # a job's progress (the retention job)
            if ev.kind == R.CONTEXT_TX:
                revision += 1
                for op in (ev.data.get("tx") or {}).get("ops", ()):
                    if op.get("op") in FRAME_OPS:
                        self.frame_ops[op["frame_id"]].append((revision, ev.seq))
            elif ev.kind in ERASABLE_KINDS:
                if envelope.mark(ev.data) is not None:
                    self.erased_before.add(ev.seq)
                elif self._selects(ev):
                    if len(self.chosen) >= self.limit:
                        self.more = True
                    else:
                        self.chosen.append(ev.seq)
        deadline.advanced(total, total)
        return self

    def _selects(self, ev: R.Event) -> bool:
        sel = self.sel
        if (self._refs and ev.seq not in self._refs) or ev.seq in self._kept:
            return False
        if (sel.session and ev.session != sel.session) or (sel.actor and ev.actor != sel.actor):
            return False
        if sel.kinds and ev.kind not in sel.kinds:
            return False
        if self._since is not None or self._until is not None:
            at = datetime.fromisoformat(R.occurred_at(ev.data) or ev.time)
            if (self._since is not None and at < self._since) or \
                    (self._until is not None and at >= self._until):
                return False
        if self._phrase and self._phrase not in normalize(ev.text):
            return False
        return not (sel.keep_protected and self._m.observation_protected(ev.seq))


def _kept(m: MindView, sel: Selector) -> set[int]:
    """The events a retention policy leaves, but protected observations (_selects asks
    for those it would take): the root requests of open activations, the sources of
    active frames."""
    kept: set[int] = set()
    if sel.keep_protected:
        kept |= m.root_requests()
    if sel.keep_active_sources:
        kept |= {R.ref_seq(s) for f in m.frames() if f.state == R.ACTIVE
                 for s in f.sources if R.is_ref(s)}
    return kept


def plan(m: MindView, sel: Selector, *, limit: int,
         deadline: Deadline = NEVER) -> Plan:
    """What erasing `sel` takes now (at most `limit` events in this step)."""
    scan = _Scan(sel, m, limit).walk(m, deadline)
    missing = sorted(scan._refs - set(scan.chosen) - scan.erased_before)
    _check_refs(m, missing)
    erased = scan.erased_before | set(scan.chosen)
    versions = _erased_versions(m, erased, deadline) if sel.derived else []
    out = Plan(events=scan.chosen, more=scan.more)
    if not versions:
        return out
    present = {f.id: f.changed_at for f in m.frames()}
    out.versions = [(f, present.get(f.id) == f.changed_at) for f in versions]
    new = {(f.id, f.changed_at) for f in versions}
    timelines = _timelines(m)
    for fid in {f.id for f in versions}:
        for revision, seq in scan.frame_ops.get(fid, ()):
            if _as_of(fid, timelines[fid], revision) in new:
                out.transactions.setdefault(seq, set()).add(fid)
    for cp in m.checkpoints():
        if any((f.id, f.changed_at) in new for f in cp.frames):
            out.checkpoints.append(cp)
    return out


def _check_refs(m: MindView, missing: list[int]) -> None:
    """A ref the selector names that was neither chosen nor erased before: no such
    event, one of a kind no erasure takes, or one a retention policy keeps."""
    for seq in missing:
        ev = m.event(seq) if m.has_event(seq) else None
        if ev is None:
            raise MorphzError("EVENT_NOT_FOUND", f"no event {R.ref(seq)}", ref=R.ref(seq))
        if ev.kind not in ERASABLE_KINDS:
            raise MorphzError("ERASE_NOT_ERASABLE", f"{R.ref(seq)} is a {ev.kind} event: an "
                              "erasure takes what runtimes append (a transaction's frame "
                              "bodies go with the events they derive from)",
                              ref=R.ref(seq), kind=ev.kind)


def _timelines(m: MindView) -> dict[str, list[int]]:
    """Each frame's version revisions, in order."""
    out: dict[str, list[int]] = defaultdict(list)
    for f in m.frame_versions():
        out[f.id].append(f.changed_at)
    return out


def _as_of(fid: str, revisions: list[int], revision: int) -> Optional[tuple[str, int]]:
    """The version of frame `fid` that stood at context revision `revision`."""
    i = bisect.bisect_right(revisions, revision) - 1
    return (fid, revisions[i]) if i >= 0 else None


def _erased_versions(m: MindView, erased_events: set[int],
                     deadline: Deadline) -> list[R.Frame]:
    """The frame versions not erased yet whose sources are all erased: events of
    `erased_events`, or frames whose version as of that revision is erased (judged in
    revision order; within one revision until nothing changes)."""
    versions = sorted(m.frame_versions(), key=lambda f: (f.changed_at, f.id))
    state: dict[str, list[tuple[int, bool]]] = defaultdict(list)  # id -> (rev, erased)
    new: list[R.Frame] = []

    def erased_at(fid: str, revision: int) -> bool:
        line = state.get(fid)
        if not line:
            return False
        i = bisect.bisect_right(line, (revision, True)) - 1
        return i >= 0 and line[i][1]

    def derived_only(f: R.Frame) -> bool:
        return bool(f.sources) and all(
            (R.ref_seq(s) in erased_events) if R.is_ref(s) else erased_at(s, f.changed_at)
            for s in f.sources)

    i = 0
    while i < len(versions):
        deadline.check("the erasure's frames")
        j = i
        while j < len(versions) and versions[j].changed_at == versions[i].changed_at:
            j += 1
        group, changed = versions[i:j], True
        for f in group:
            state[f.id].append((f.changed_at, bool(f.erased)))
        while changed:  # a frame derived from one revised in the same transaction
            changed = False
            for f in group:
                line = state[f.id]
                if not line[-1][1] and derived_only(f):
                    line[-1] = (f.changed_at, True)
                    new.append(f)
                    changed = True
        i = j
    return new
