"""Erasing some events of a large history (run: scripts/bench privacy), in process.

Issue 55: erasing 10,000 of 1,000,000 events must take minutes, not hours. A
TransactionCore over an LMDB store (fsync off, as scripts/bench scale) holds one context of
--events events (user messages of two sessions, one event in --every of them by the data
subject, session `subject`, frames derived from some of those), written through
append_events in batches of 10,000; then:

  dry run        what an erasure of session `subject` would take (the walk over the
                 history, nothing written): the selection's cost alone
  erasure        the erasure itself (TransactionCore.erase: the walk, the rewrite of every
                 selected event and of what was derived only from them, in commits of
                 20,000 events each, the erasure events), then the store rewritten compacted
                 (Store.reclaim): its time is reported apart (`compaction`), and the data
                 file's size before and after
  audit          the audit afterwards (it must match, counting the erased events):
                 the baseline the erasure's cost compares with (one pass over the history)

Recall's part (the vector leg's purge and the context's index rebuilt) is not in it: it
follows the change feed in the recall service, as after any commit.

  scripts/bench privacy                                 # 10,000 of 1,000,000 events
  scripts/bench privacy -- --events 100000 --erase 1000 # a quick run
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import log, target, write_json  # noqa: E402

from morphz.services.storage.lmdb import LmdbStore  # noqa: E402
from morphz.services.transaction.core.engine import TransactionCore  # noqa: E402
from morphz.services.transaction.core.erase_select import Selector  # noqa: E402
from morphz.services.transaction.core.requests import AppendItem  # noqa: E402
from morphz.shared.auth import IN_PROCESS_CALLER as CALLER  # noqa: E402

CONTEXT = "history"
BATCH = 10_000
GOAL_S = 600.0  # "minutes, not hours": the whole erasure within ten minutes


def fill(core: TransactionCore, events: int, erase: int) -> None:
    """`events` events, about `erase` of them (spread evenly) in session `subject`; a
    frame derived from every tenth subject's event alone (the erasure takes its body) and
    one from another with an event of session others (it keeps it)."""
    core.create_context(CONTEXT, caller=CALLER)
    every = max(1, events // max(1, erase))
    count, revision, t0, last = 1, 0, time.monotonic(), 0.0
    subject_refs: list[str] = []
    while count < events:
        n = min(BATCH, events - count)
        items = [AppendItem("subject" if (count + i) % every == 0 else "others",
                            "user-message", f"note {count + i}: the parcel for flat "
                            f"{(count + i) % 97} left the depot at {(count + i) % 24}h")
                 for i in range(n)]
        refs = [e.ref for e in core.append_events(CONTEXT, items, caller=CALLER).events]
        subjects = [r for r, it in zip(refs, items) if it.session == "subject"]
        subject_refs += subjects
        count += n
        ops = " ".join(f"(derive f{r[2:]} (from {r}) (parcel left))" for r in subjects[::10])
        ops += " ".join(f" (derive g{r[2:]} (from {r} {refs[0]}) (parcel left))"
                        for r in subjects[5::10] if r != refs[0])
        revision = core.commit(CONTEXT, f"(context-tx (base-version {revision}) {ops})",
                               caller=CALLER).revision
        count += 1
        if time.monotonic() - last > 5:
            last = time.monotonic()
            rate = count / (last - t0)
            log(f"    written {count:,}/{events:,} events ({rate:,.0f}/s, "
                f"{(events - count) / rate:.0f} s to go)")
    log(f"    {count:,} events written in {time.monotonic() - t0:.0f} s; "
        f"{len(subject_refs):,} in session subject")


def timed(fn):
    t0 = time.monotonic()
    out = fn()
    return out, time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--erase", type=int, default=10_000, help="events of session subject")
    ap.add_argument("--data", default=None, help="where the store goes (default: a temp dir)")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="morphz-bench-privacy-", dir=args.data)
    store = LmdbStore(os.path.join(tmp, "lmdb"), sync=False, map_size=64 << 30)
    try:
        core = TransactionCore(store)
        log(f"== privacy benchmark: erase {args.erase:,} of {args.events:,} events "
            f"(LMDB, data in {tmp})")
        fill(core, args.events, args.erase)
        selector = Selector(session="subject")
        log("  dry run")
        dry, dry_s = timed(lambda: core.erase(CONTEXT, selector, "", dry_run=True,
                                              caller=CALLER))
        log(f"    would take {len(dry.events):,} events, {len(dry.frames):,} frames: "
            f"{dry_s:.1f} s")
        log("  erasure (with the store's compacting rewrite)")
        done, erase_s = timed(lambda: core.erase(CONTEXT, selector, "bench: erasure request",
                                                 caller=CALLER))
        reclaimed = done.reclaimed
        compaction_s = reclaimed.duration_ms / 1000
        log("  audit")
        audit, audit_s = timed(lambda: core.audit(CONTEXT, caller=CALLER))
    finally:
        store.close()
        shutil.rmtree(tmp, ignore_errors=True)
    erased = len(done.events)
    assert erased == len(dry.events) and audit.match, (erased, audit)
    rows = {"events": args.events, "erased_events": erased, "erased_frames": len(done.frames),
            "erasure_steps": len(done.erasures), "dry_run_s": dry_s, "erasure_s": erase_s,
            "compaction_s": compaction_s, "ms_per_erased_event": 1e3 * erase_s / erased,
            "ms_per_erased_event_without_compaction":
                1e3 * (erase_s - compaction_s) / erased,
            "store_bytes_before": reclaimed.bytes_before,
            "store_bytes_after": reclaimed.bytes_after, "audit_s": audit_s,
            "audit_erased": audit.chain.erased}
    print(f"\nerase {erased:,} of {args.events:,} events (session subject), "
          f"{len(done.frames):,} frames derived only from them, "
          f"{len(done.erasures)} erasure commit(s), LMDB")
    print(f"  dry run (the selection)      {dry_s:9.1f} s")
    print(f"  erasure, whole               {erase_s:9.1f} s   "
          f"{rows['ms_per_erased_event']:.2f} ms per erased event")
    print(f"    of which compaction        {compaction_s:9.1f} s   store "
          f"{reclaimed.bytes_before / 2**20:,.0f} MiB -> {reclaimed.bytes_after / 2**20:,.0f} MiB")
    print(f"    without compaction         {erase_s - compaction_s:9.1f} s   "
          f"{rows['ms_per_erased_event_without_compaction']:.2f} ms per erased event")
    print(f"  audit afterwards (baseline)  {audit_s:9.1f} s   match, "
          f"{audit.chain.erased:,} erased; erasure / audit x{erase_s / audit_s:.2f}")
    result = target("erasure time", erase_s, f"<= {GOAL_S:.0f} s", erase_s <= GOAL_S, " s")
    if args.json:
        write_json(args.json, {"results": rows, "targets": [result]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
