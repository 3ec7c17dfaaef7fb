"""SC-Distributed (DIST-*): one owner per context through a lease, fencing tokens, and a
takeover when the owner dies, through the Driver's second runtime and its kill hook;
recall replicas following the change feed (a second replica, killed and started again);
one trace across processes (spans the target exports to the kit)."""
from __future__ import annotations

import secrets
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


# -- DIST-06: recall replicas following the change feed ---------------------------------------
REPLICA_QUERIES = ("sandbox", "deploy note", "release", "green", "streamed")


def _story(t: CaseRun, ctx: str) -> None:
    """Events, frames, a relation, a revision and a rollback: every kind of change."""
    d = t.driver
    for i in range(8):
        d.append(ctx, "main", "user-message", f"deploy note {i} sandbox")
    t.tx(ctx, "(checkpoint start)")
    t.tx(ctx, "(create release (stage testing)) (create tests (result green sandbox)) "
              "(relate tests supports release)")
    t.tx(ctx, "(revise release (stage shipped))")
    t.tx(ctx, "(create scratch (note temporary))")
    t.tx(ctx, "(rollback start)")
    t.tx(ctx, "(create release (stage again)) (create tests (result green sandbox)) "
              "(relate tests supports release)")


def _answers(t: CaseRun, replica, ctx: str) -> dict:
    """What a replica answers once it has seen every write so far (read your writes)."""
    seq = t.driver.status(ctx).commit_seq
    return {q: [(h.kind, h.key, h.state, h.preview)
                for h in replica.search(ctx, q, limit=50, min_commit_seq=seq).hits]
            for q in REPLICA_QUERIES}


def _holds_each_once(t: CaseRun, replica, ctx: str, which: str) -> dict:
    """The replica's answers, after checking it holds every event and frame of the
    context exactly once (nothing missed, nothing indexed twice)."""
    answers = _answers(t, replica, ctx)
    for query, hits in answers.items():
        keys = [key for _, key, *_ in hits]
        t.eq(sorted(k for k in set(keys) if keys.count(k) > 1), [],
             f"{which}: hits listed twice for {query!r}")
    st, held = t.driver.status(ctx), replica.index_status(ctx)
    frames = len(t.driver.frames(ctx))
    t.eq((held.events, held.frames, held.documents),
         (st.event_count, frames, st.event_count + frames),
         f"{which}: (events, frames, documents) indexed against the store's")
    return answers


@case("DIST-06", "recall replicas serve identical results; a restarted one resumes its place",
      needs=("recall_replica", "recall_replica_restart"))
def dist_06_recall_replicas_follow_the_feed(t: CaseRun):
    d, ctx = t.driver, t.context()
    second = d.second_recall()
    try:
        _story(t, ctx)
        first = _holds_each_once(t, d, ctx, "the first replica")
        t.check(first["sandbox"] and first["release"], f"the story is found: {first}")
        t.check(all(key != "scratch" for hits in first.values() for _, key, *_ in hits),
                "a rolled-back frame is still found")
        t.eq(_holds_each_once(t, second, ctx, "the second replica"), first,
             "the second replica's answers")

        # The second replica dies (SIGKILL) while writes stream in, and starts again.
        stop, written, failures = threading.Event(), [0], []

        def writer():
            n = 0
            while not stop.is_set():
                n += 1
                try:
                    d.append(ctx, "main", "user-message", f"streamed {n} sandbox")
                    if n % 5 == 0:
                        t.tx(ctx, f"(create s{n} (note streamed sandbox))")
                except (Rejected, Unreachable) as e:
                    failures.append(repr(e)[:200])
                    return
                written[0] = n
        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        try:
            _wait_for(lambda: written[0] >= 10, "the writer wrote nothing")
            saved = _caught_up(t, second, ctx).feed_position
            d.kill_second_recall()
            mark = written[0]
            _wait_for(lambda: written[0] >= mark + 30 or not thread.is_alive(),
                      "the writer stalled while the replica was down")
            d.start_second_recall()
            resumed = second.index_status(ctx).feed_position
            t.check(resumed >= saved, f"the replica restarted from feed position {resumed}, "
                                      f"before its saved {saved}")
        finally:
            stop.set()
            thread.join(60)
        t.eq(failures, [], "writes refused while a recall replica was down")
        first = _holds_each_once(t, d, ctx, "the first replica")
        t.eq(_holds_each_once(t, second, ctx, "the restarted replica"), first,
             "the restarted replica's answers")
    finally:
        second.close()


def _caught_up(t: CaseRun, replica, ctx: str):
    """The replica's index state once it holds the context's current version."""
    seq = t.driver.status(ctx).commit_seq
    replica.search(ctx, "sandbox", limit=1, min_commit_seq=seq)
    return replica.index_status(ctx)


def _wait_for(done, failure: str, bound: float = TAKEOVER_BOUND) -> None:
    deadline = time.monotonic() + bound
    while not done():
        if time.monotonic() > deadline:
            raise CaseFailed(failure)
        time.sleep(0.05)


# -- DIST-07: one trace across processes, no text in spans ------------------------------------
SPAN_BOUND = 90.0  # seconds for spans to be exported (batched) and connected


@case("DIST-07", "one trace follows a request across every process; spans carry no text",
      needs=("tracing",))
def dist_07_one_trace_no_text_in_spans(t: CaseRun):
    d, ctx = t.driver, t.context()
    tag = secrets.token_hex(4)
    event_text = t.secret(f"kit-event-text-{tag} the user asked for the plan")
    secret_text = t.secret(f"kit-secret-{tag}")
    body, reason = t.secret(f"kit-frame-body-{tag}"), t.secret(f"kit-tx-reason-{tag}")
    markers = (event_text, secret_text, body, reason)
    requests = {  # one request each, each in a trace of its own
        "append": lambda x: x.append(ctx, "s1", "user-message", event_text),
        "append a secret": lambda x: x.append(ctx, "s1", "user-message", secret_text,
                                              secret=True),
        "commit": lambda x: x.commit(ctx, _tx(0, f'(reason "{reason}") '
                                                 f'(create plan (note "{body}"))')),
        "stale commit": lambda x: x.commit(ctx, _tx(0, "(create other (x 1))")),
        "frame": lambda x: x.frame(ctx, "plan"),
        "encoding": lambda x: x.encoding(ctx, "s1"),
        "search": lambda x: x.search(ctx, "plan", min_commit_seq=x.status(ctx).commit_seq),
        "read": lambda x: x.read(ctx, "@e1"),
    }
    roots: dict[str, tuple[str, str]] = {}
    began = time.time_ns()  # from here to `ended` every call the kit makes is traced
    for label, request in requests.items():
        trace_id, root = secrets.token_hex(16), secrets.token_hex(8)
        traced = d.traced(trace_id, root)
        try:
            request(traced)
        except Rejected as e:
            if label != "stale commit":
                raise
            t.eq(e.reason, "TX_CONFLICT", "the stale commit's refusal")
        finally:
            traced.close()
        roots[label] = (trace_id, root)
    ended = time.time_ns()
    t.eq(d.frame(ctx, "plan").body.count(body), 1, "the commit's body was stored")

    def problems() -> list[str]:
        spans = d.exported_spans()
        found = []
        for label, (trace_id, root) in roots.items():
            trace = {s.id: s for s in spans if s.trace == trace_id}
            if not any(s.parent == root for s in trace.values()):
                found.append(f"{label}: no span continues the kit's trace context")
            orphans = [s.name for s in trace.values()
                       if s.parent != root and s.parent not in trace]
            if orphans:
                found.append(f"{label}: spans whose parent is not in the trace: {orphans}")
            # Each call one process made to another is continued there, in this trace.
            called = {s.parent for s in trace.values() if s.kind == "server"}
            dropped = sorted(f"{s.service} {s.name}" for s in trace.values()
                             if s.kind == "client" and s.id not in called)
            if dropped:
                found.append(f"{label}: calls the process called did not continue: {dropped}")
        # A process reached by the kit's requests without their trace context serves them
        # in traces of its own: a server span with no parent while they ran (the target
        # serving nothing else meanwhile; background work makes no server spans).
        lost = sorted({f"{s.service} {s.name}" for s in spans if s.kind == "server"
                       and not s.parent and began <= s.start_ns <= ended})
        if lost:
            found.append(f"requests served outside the kit's traces: {lost}")
        return found

    deadline, found = time.monotonic() + SPAN_BOUND, ["no spans yet"]
    while found:
        found = problems()
        if found and time.monotonic() > deadline:
            raise CaseFailed("; ".join(found)[:500])
        if found:
            time.sleep(0.2)
    for s in d.exported_spans():
        for text in s.strings:
            for marker in markers:
                t.check(marker not in text, f"a text the request carried is in span "
                                            f"{s.name!r} of {s.service}")
