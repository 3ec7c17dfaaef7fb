"""A context of many events and snapshots for the inspector's evaluation pages (scripts/
bench ui): built in process, on the data folder a `morphz serve` then opens, through
the cores' own calls, as fast as they go.

  history      `events` minus what the evaluations append, imported as append_events
               batches of 10,000 (the import path) over ARCHIVE sessions, each session's
               inputs then claimed once (an activation, delivered) and retired by a
               transaction of 10,000 refs: history that was read, as a long-lived
               context holds it
  evaluations  `snapshots` evaluations alternating between sessions main and side: a
               user message, a compile claiming it (its snapshot), the delivery, and
               every 20 a transaction under it that revises a note and retires what the
               session's evaluations claimed since its last one
"""
from __future__ import annotations

import time
from typing import Callable

from morphz.services.encoding.core.engine import EncodingCore
from morphz.services.server.app import AllInOne
from morphz.services.server.config import ServerConfig
from morphz.services.transaction.core.requests import AppendItem
from morphz.shared.auth import IN_PROCESS_CALLER as ME

ARCHIVE = 10      # sessions the imported history is spread over
BATCH = 10_000    # events a batch (AppendEvents' limit)
# Events an evaluation adds: its input, activation and delivery, and two transactions
# every 20; a history batch: each archive session's activation and delivery, a retire.
PER_EVALUATION = 3 + 2 / 20
PER_BATCH = 2 * ARCHIVE + 1


def build(data_dir: str, context: str, events: int, snapshots: int,
          progress: Callable[[str], None]) -> dict:
    app = AllInOne(ServerConfig(data_dir, "127.0.0.1:0", sync=False,
                                embedder="none")).start()
    try:
        tx = app.transactions
        enc = EncodingCore(app.store, tx)
        tx.create_context(context, caller=ME)
        t0 = time.perf_counter()
        rest = events - 1 - round(snapshots * PER_EVALUATION)  # context-created: 1
        history = max(0, rest - -(-rest // (BATCH + PER_BATCH)) * PER_BATCH)
        _history(tx, context, history, progress)
        imported = time.perf_counter() - t0
        t0 = time.perf_counter()
        _evaluations(tx, enc, context, snapshots, progress)
        evaluated = time.perf_counter() - t0
        st = tx.status(context, caller=ME)
        return {"events": st.event_count, "snapshots": snapshots, "import_s": imported,
                "evaluations_s": evaluated}
    finally:
        app.stop(grace=1)


def _history(tx, context: str, count: int, progress) -> None:
    done = 0
    while done < count:
        n = min(BATCH, count - done)
        reply = tx.append_events(context, [
            AppendItem(f"archive-{i % ARCHIVE}", "user-message",
                       f"imported note {done + i}: the release checklist, item {i % 97}")
            for i in range(n)], caller=ME)
        for k in range(ARCHIVE):  # read: claimed and answered
            act = tx.activate(context, f"archive-{k}", caller=ME)
            tx.deliver(context, act.id, caller=ME)
        revision = tx.status(context, caller=ME).revision
        refs = " ".join(e.ref for e in reply.events)
        tx.commit(context, f'(context-tx (base-version {revision}) (reason "read") '
                  f"(retire {refs}))", caller=ME)
        done += n
        progress(f"history: {done:,} of {count:,} events imported")


def _evaluations(tx, enc, context: str, count: int, progress) -> None:
    claimed: dict[str, list[str]] = {"main": [], "side": []}
    for i in range(count):
        session = ("main", "side")[i % 2]
        tx.append_event(context, session, "user-message",
                        f"step {i}: go on with the release ({session})", caller=ME)
        e = enc.compile(context, session, caller=ME)
        tx.deliver(context, e.activation, caller=ME)
        claimed[session] += e.claimed
        if i % 20 >= 18:
            note = f"notes-{session}"
            op = "create" if i < 20 else "revise"
            tx.commit(context, f'(context-tx (base-version {e.revision}) (reason "step {i}") '
                      f"({op} {note} (step {i})) (retire {' '.join(claimed[session])}))",
                      session=session, activation=e.activation, caller=ME)
            claimed[session] = []
        if (i + 1) % 500 == 0:
            progress(f"evaluations: {i + 1:,} of {count:,} compiled")
