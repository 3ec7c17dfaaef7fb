"""One checkout's TransactionCore in this process, over a fresh LmdbStore: CPU per append or
per five-op commit, no gRPC, no followers. Run by versus.py `--in-process` under each
checkout's own venv, so it imports that checkout's code: it uses only what every version
since the typed core has (LmdbStore, TransactionCore(store), create_context, append_event,
commit; a receipt read as a dict or as a result).

    python _core_calls.py append|commit CALLS [PROFILE_OUT]

Prints `<us of CPU per call>`; with PROFILE_OUT, dumps cProfile stats there instead."""
from __future__ import annotations

import cProfile
import sys
import tempfile
import time

from morphz.services.storage.lmdb import LmdbStore
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.auth import IN_PROCESS_CALLER as ME

WARMUP = 200


def _revision(receipt) -> int:
    return receipt["revision"] if isinstance(receipt, dict) else receipt.revision


def main() -> int:
    op, calls = sys.argv[1], int(sys.argv[2])
    with tempfile.TemporaryDirectory() as d:
        store = LmdbStore(d, map_size=1 << 30, sync=False)
        try:
            core = TransactionCore(store)
            core.create_context("c", caller=ME)
            frames = " ".join(f"(create f{j} (n 0))" for j in range(5))
            revision = [_revision(core.commit("c", f"(context-tx (base-version 0) {frames})",
                                              caller=ME))]

            def commit(i: int) -> None:
                ops = " ".join(f"(revise f{j} (n {i}))" for j in range(5))
                revision[0] = _revision(core.commit(
                    "c", f"(context-tx (base-version {revision[0]}) {ops})", caller=ME))

            def append(i: int) -> None:
                core.append_event("c", "s1", "user-message", f"note {i} about the release",
                                  caller=ME)
            call = {"append": append, "commit": commit}[op]
            for i in range(WARMUP):
                call(i)
            if len(sys.argv) > 3:
                profile = cProfile.Profile()
                profile.enable()
                for i in range(calls):
                    call(WARMUP + i)
                profile.disable()
                profile.dump_stats(sys.argv[3])
            else:
                cpu = time.process_time()
                for i in range(calls):
                    call(WARMUP + i)
                print(f"{1e6 * (time.process_time() - cpu) / calls:.1f}")
        finally:
            store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
