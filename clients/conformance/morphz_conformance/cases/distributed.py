"""SC-Distributed (DIST-*): one owner per context through a lease, fencing tokens, and a
takeover when the owner dies, through the Driver's second runtime and its kill hook."""
from __future__ import annotations

import threading
import time

from morphz_conformance.driver import Rejected, Unreachable
from morphz_conformance.registry import CaseFailed, CaseRun, NotApplicable, case

TAKEOVER_BOUND = 90.0  # seconds a takeover may take (lease TTL plus a loaded machine)


def _tx(base: int, ops: str) -> str:
    return f"(context-tx (base-version {base}) {ops})"


@case("DIST-01", "one owner per context; the other runtime's writes are refused naming it",
      needs=("second_runtime",))
def dist_01_one_owner(t: CaseRun):
    d, ctx = t.driver, t.context()
    t.tx(ctx, "(create plan (goal ship))")
    st = d.status(ctx)
    t.check(st.owner and st.fencing_token > 0,
            f"the status names the owner and its fencing token: {st}")
    other = d.second_runtime()
    try:
        err = t.rejected("NOT_OWNER", other.commit, ctx, _tx(1, "(create other (x 1))"))
        t.eq(err.details.get("owner"), st.owner, "the refusal names the owner")
        t.rejected("NOT_OWNER", other.append, ctx, "main", "user-message", "hi")
        t.eq(other.status(ctx).revision, 1, "reads are any runtime's")
    finally:
        other.close()
    t.eq(t.tx(ctx, "(create next (x 2))").revision, 2, "the owner goes on committing")
    t.eq(d.status(ctx).fencing_token, st.fencing_token, "the same owner, the same token")


@case("DIST-03", "when the owner dies another runtime takes over with nothing lost",
      needs=("second_runtime", "kill", "start"))
def dist_03_takeover(t: CaseRun):
    d, ctx = t.driver, t.context()
    acked: list[int] = []
    enough = threading.Event()

    def writer():
        for n in range(10_000):
            try:
                d.commit(ctx, _tx(n, f"(create f{n} (n {n}))"))
            except (Rejected, Unreachable):
                return
            acked.append(n)
            if len(acked) >= 5:
                enough.set()
    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    t.check(enough.wait(60), "the owner acknowledged no commits")
    before = d.status(ctx)
    d.kill()
    thread.join(60)
    other = d.second_runtime()
    try:
        deadline, refusals = time.monotonic() + TAKEOVER_BOUND, set()
        while True:
            try:
                receipt = other.commit(ctx, _tx(other.status(ctx).revision,
                                                "(create after-takeover (by other))"))
                break
            except Rejected as e:
                refusals.add(e.reason)
            if time.monotonic() > deadline:
                raise CaseFailed(f"no takeover within {TAKEOVER_BOUND:.0f}s: {refusals}")
            time.sleep(0.1)
        t.check(refusals <= {"NOT_OWNER"}, f"until the lease expired: {refusals}")
        after = other.status(ctx)
        t.check(after.owner != before.owner and after.fencing_token > before.fencing_token,
                f"a new owner with a higher token: {before.owner}/{before.fencing_token} -> "
                f"{after.owner}/{after.fencing_token}")
        frames = {f.id for f in other.frames(ctx)}
        lost = [n for n in acked if f"f{n}" not in frames]
        t.eq(lost, [], "acknowledged commits lost in the takeover")
        t.eq(receipt.revision, len(frames), "it continued from the committed state")
    finally:
        other.close()
        d.start()  # the first runtime back, for the cases after this one


@case("DIST-02", "a commit with a lower fencing token than the highest seen is rejected",
      needs=("fence",))
def dist_02_stale_token_fenced(t: CaseRun):
    d, ctx = t.driver, t.context()
    t.tx(ctx, "(create plan (goal ship))")
    st = d.status(ctx)
    if st.fencing_token == 0:
        raise NotApplicable("the target runs without owners (no fencing token)")
    for stale in (st.fencing_token - 1, 0):
        t.rejected("FENCED", d.fenced_write, ctx, stale)
    after = d.status(ctx)
    t.eq((after.commit_seq, after.revision), (st.commit_seq, st.revision),
         "nothing written under a stale token, though at the current version")
    t.rejected("FRAME_NOT_FOUND", d.frame, ctx, "kit-fenced-write")
    t.eq(t.tx(ctx, "(create next (x 2))").revision, 2, "the owner goes on committing")


@case("DIST-04", "an owner that cannot renew its lease refuses at once, then resumes",
      needs=("lease",))
def dist_04_lease_lost_refuses_then_resumes(t: CaseRun):
    d, ctx = t.driver, t.context()
    t.tx(ctx, "(create plan (goal ship))")
    revision = 1
    d.lose_leases()
    try:
        deadline, refusal = time.monotonic() + TAKEOVER_BOUND, None
        while refusal is None:
            try:
                revision = t.tx(ctx, f"(create r{revision} (x 1))", base=revision).revision
            except Rejected as e:
                refusal = e
            if refusal is None and time.monotonic() > deadline:
                raise CaseFailed("the owner kept committing without its lease")
            time.sleep(0.1)
        t.eq(refusal.reason, "OWNERSHIP_LOST", f"the refusal: {refusal.message[:200]}")
        t.check("lease" in refusal.message, "the refusal says the lease is the cause")
        t.rejected("OWNERSHIP_LOST", t.tx, ctx, "(create refused (x 1))", base=revision)
    finally:
        d.restore_leases()
    deadline = time.monotonic() + TAKEOVER_BOUND
    while True:
        try:
            receipt = t.tx(ctx, "(create back (x 1))", base=revision)
            break
        except (Rejected, Unreachable) as e:
            if time.monotonic() > deadline:
                raise CaseFailed(f"never resumed: {e}") from None
            time.sleep(0.1)
    t.eq(receipt.revision, revision + 1, "nothing was written while refused")


@case("DIST-05", "the reads of one request see one version while commits go on")
def dist_05_one_version_per_request(t: CaseRun):
    d, ctx = t.driver, t.context()
    d.append(ctx, "s1", "user-message", "watch the frames")
    t.tx(ctx, " ".join(f"(create f{i} (v 0))" for i in range(6)))
    stop = threading.Event()

    def writer():
        n = 0
        while not stop.is_set():
            n += 1
            try:
                t.tx(ctx, " ".join(f"(revise f{i} (v {n}))" for i in range(6)))
            except Rejected:
                continue  # a conflict with nothing: the next round rereads
    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        for _ in range(8):
            e = d.encoding(ctx, "s1")
            shown = {i.key: i.revision for i in e.items if i.kind == "frame"}
            t.eq(len(set(shown.values())), 1,
                 f"one encoding shows frames of several versions: {shown}")
            for key, rev in shown.items():
                t.eq(d.frame(ctx, key, at_revision=e.revision).revision, rev,
                     f"{key} as of the encoding's revision {e.revision}")
    finally:
        stop.set()
        thread.join(30)
