"""Erasures applied again to a store restored from a backup (docs/privacy.md, PRIV-03):
the erasure log (services/storage/erasure_log.py) of the store the backup was taken
from names, for each erasure, the events it rewrote by the digest of their record then.
Each event the restored store holds as exactly that record is erased again, in log
order, as an erasure of the restored history (its own `erasure` event, made by the
restoring operator, saying which logged erasure it re-applies); frames derived only from
them follow as in any erasure. An event the store holds otherwise (erased already: the
backup came after; another record: another history) is left as it is."""
from __future__ import annotations

from dataclasses import dataclass

from morphz.services.transaction.core.engine import TransactionCore
from morphz.services.transaction.core.erase_select import ERASABLE_KINDS, MAX_REFS, Selector
from morphz.shared.auth import IN_PROCESS_CALLER
from morphz.shared.mind import envelope, records as R
from morphz.shared.mind.view import MindView
from morphz.shared.storage.api import Store


@dataclass(frozen=True)
class Reapplied:
    context: str
    logged_commit: int  # the erased store's commit the log line names
    logged_at: str
    events: tuple[str, ...]  # erased again here
    erasures: tuple[str, ...]  # the erasure events that did it

    def plain(self) -> dict:
        return {"context": self.context, "logged_commit": self.logged_commit,
                "logged_at": self.logged_at, "events": list(self.events),
                "erasures": list(self.erasures)}


def reapply(store: Store, lines: list[dict]) -> list[Reapplied]:
    """Apply each logged erasure again where the store holds what it took."""
    core = TransactionCore(store)
    contexts = set(store.contexts())
    out = []
    for line in lines:
        context = line["context"]
        if context not in contexts:
            continue
        refs = _still_held(store, context, line["events"])
        reason = (f"re-applied after a restore: the erasure logged at {line['at']} (commit "
                  f"{line['commit_seq']} of store {str(line.get('store', ''))[:32]})")
        events, erasures = [], []
        for at in range(0, len(refs), MAX_REFS):  # a selector names MAX_REFS at most
            done = core.erase(context, Selector(refs=refs[at:at + MAX_REFS]), reason,
                              caller=IN_PROCESS_CALLER)
            events += done.events
            erasures += done.erasures
        if erasures:
            out.append(Reapplied(context, line["commit_seq"], line["at"], tuple(events),
                                 tuple(erasures)))
    return out


def _still_held(store: Store, context: str, events: list) -> tuple[str, ...]:
    """The logged events the context holds as the record the erasure rewrote."""
    refs = []
    with store.reader(context) as reader:
        m = MindView(reader)
        for seq, digest in events:
            raw = m.event_row(seq) if m.has_event(seq) else None
            if raw is None or envelope.raw_digest(raw) != digest:
                continue
            ev = m.event(seq)
            if ev.kind in ERASABLE_KINDS:  # a transaction's bodies follow its sources
                refs.append(R.ref(seq))
    return tuple(refs)
