"""The Soak extension (SOAK-01): a short soak any target with control hooks can be given.

Writers commit and append under request ids for SOAK_SECONDS while a fault comes every
FAULT_EVERY seconds, drawn from the hooks the target offers: SIGKILL and start again
(always), its lease service lost and back ("lease"), started with its storage nearly full
and again with room ("space"), its standby promoted ("replication"). A write whose
outcome the fault left unknown is sent again under its request id until it is known, as
a client must. At the end every acknowledged write is in the history exactly once (read
back event by event), no refused one is, the audit matches, nothing was answered
INTERNAL, and after each fault a write was acknowledged within RECOVERY_BOUND of its
end. The soak's length: MORPHZ_KIT_SOAK_SECONDS (default 60)."""
from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from functools import partial

from morphz_conformance.driver import Rejected, Unreachable
from morphz_conformance.registry import CaseFailed, CaseRun, case

SOAK_SECONDS = float(os.environ.get("MORPHZ_KIT_SOAK_SECONDS") or 60)
FAULT_EVERY = 15.0
FAULT_HELD = 5.0  # seconds a lease loss or a full store lasts
RECOVERY_BOUND = 60.0
WRITERS = 3
# Refusals after which the same request, sent again, may pass (nothing was applied), and
# transport outcomes that leave it unknown: both are sent again under the same id.
AGAIN = {"STORAGE_UNAVAILABLE", "OWNERSHIP_LOST", "NOT_OWNER", "STORAGE_FULL",
         "BYTES_IN_FLIGHT_LIMIT", "CONCURRENT_RPC_LIMIT", "UNAVAILABLE", "DEADLINE_EXCEEDED",
         "STORAGE_SNAPSHOT_EXPIRED", "CANCELLED", "UNKNOWN"}


class _Soak:
    def __init__(self, t: CaseRun, ctx: str) -> None:
        self.t, self.ctx = t, ctx
        self.lock = threading.Lock()
        self.acked: dict[str, str] = {}  # request id -> its mark (in the event's text)
        self.refused: dict[str, str] = {}
        self.acks: list[tuple[float, float]] = []  # (sent, acknowledged)
        self.internal: list[str] = []
        self.reasons: Counter = Counter()
        self.stop = threading.Event()

    def writer(self, k: int) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            rid = self.t.request_id(f"soak-w{k}-{n}")
            mark = f"soakmark{k}x{n}"
            if n % 2:
                send = partial(self.t.driver.append, self.ctx, f"s{k}", "user-message",
                               f"soak {mark}", request_id=rid)
            else:
                base = self._revision()
                if base is None:
                    continue
                send = partial(self.t.tx, self.ctx, f"(create {mark} (writer {k}) (n {n}))",
                               base=base, request_id=rid)
            self._until_known(rid, mark, send)

    def _revision(self):
        try:
            return self.t.revision(self.ctx)
        except (Rejected, Unreachable, ValueError):  # ValueError: a channel being replaced
            time.sleep(0.2)
            return None

    def _until_known(self, rid: str, mark: str, send) -> None:
        while True:
            sent = time.monotonic()
            try:
                send()
            except Rejected as e:
                self.reasons[e.reason] += 1
                if e.reason == "INTERNAL":
                    self.internal.append(e.message[:200])
                if e.reason in AGAIN or e.reason == "INTERNAL":
                    time.sleep(0.2)
                    continue
                with self.lock:
                    self.refused[rid] = f"{mark} {e.reason}"
                return
            except (Unreachable, ValueError):
                time.sleep(0.2)
                continue
            with self.lock:
                self.acked[rid] = mark
                self.acks.append((sent, time.monotonic()))
            return

    def first_ack_after(self, t: float) -> float:
        with self.lock:
            found = [a for s, a in self.acks if s >= t]
        return min(found) if found else 0.0


def _faults(t: CaseRun) -> list[tuple[str, callable]]:
    d, caps = t.driver, t.driver.capabilities()

    def kill():
        d.kill()
        d.start()

    def held(start, end):
        """A fault that lasts FAULT_HELD seconds, the writers going on meanwhile."""
        def fault():
            start()
            time.sleep(FAULT_HELD)
            end()
        return fault

    out = [("kill", kill)]
    if "lease" in caps:
        out.append(("lease", held(d.lose_leases, d.restore_leases)))
    if "space" in caps:
        out.append(("space", held(d.limit_space, d.free_space)))
    if "replication" in caps:
        out.append(("promote", d.promote_standby))
    return out


@case("SOAK-01", "under continuous load with faults nothing acknowledged is lost or doubled, "
      "the audit matches and each fault's recovery is bounded", needs=("kill", "start"))
def soak_01_nothing_lost_under_faults(t: CaseRun):
    d, ctx = t.driver, t.context()
    soak = _Soak(t, ctx)
    threads = [threading.Thread(target=soak.writer, args=(k,), daemon=True)
               for k in range(WRITERS)]
    for th in threads:
        th.start()
    faults, rng = _faults(t), random.Random(ctx)
    recoveries: list[tuple[str, float]] = []
    started = time.monotonic()
    try:
        while time.monotonic() - started < SOAK_SECONDS:
            time.sleep(FAULT_EVERY)
            name, fault = rng.choice(faults)
            fault()
            healed = time.monotonic()
            while not soak.first_ack_after(healed):
                if time.monotonic() - healed > RECOVERY_BOUND:
                    raise CaseFailed(f"no write acknowledged within {RECOVERY_BOUND:.0f}s "
                                     f"after the fault {name}: {dict(soak.reasons)}")
                time.sleep(0.1)
            recoveries.append((name, round(soak.first_ack_after(healed) - healed, 2)))
    finally:
        soak.stop.set()
        for th in threads:
            th.join(RECOVERY_BOUND * 2)
    t.check(not any(th.is_alive() for th in threads), "a writer never learnt an outcome")
    t.check(len(soak.acked) > 20, f"too few writes acknowledged: {len(soak.acked)}")
    t.eq(soak.internal, [], "calls answered INTERNAL")
    count = d.status(ctx).event_count
    texts = [d.event(ctx, f"@e{n}").text for n in range(count)]
    seen = Counter(word for text in texts for word in text.replace(")", " ").split()
                   if word.startswith("soakmark"))
    lost = sorted(m for m in soak.acked.values() if seen[m] == 0)
    doubled = sorted(m for m in soak.acked.values() if seen[m] > 1)
    t.eq(lost, [], f"acknowledged writes missing from the history (recoveries {recoveries})")
    t.eq(doubled, [], "writes applied more than once")
    t.eq(sorted(m for m in soak.refused.values() if seen[m.split()[0]]), [],
         "refused writes applied")
    audit = d.audit(ctx)
    t.check(audit.match, f"the audit after the soak: {audit.problems[:3]}")
    t.check(recoveries, "no fault was injected")
