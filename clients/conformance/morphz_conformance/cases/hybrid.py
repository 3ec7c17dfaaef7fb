"""The Hybrid extension (seed 004; HYB-01..08): a lexical and a vector leg fused, each hit
naming its rank in each leg; an index another embedder built refused as stale; ids, refs
and numbers take an exact path; vector hits pass the same filters as lexical ones; the
default embedder recalls by meaning; fusion keeps each leg's strong hits; embedding off
the hot paths; a turn read with the one it answers; the vector leg's pace reported."""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

from morphz_conformance.registry import CaseFailed, CaseRun, case

VECTOR_BOUND = 120.0  # seconds the vector leg may take to follow on a loaded machine


def _both_legs_caught_up(t: CaseRun, ctx: str) -> None:
    """The vector leg follows the lexical one on its own: wait (bounded) until both hold
    every commit, so each leg ranks the same candidates."""
    t.search(ctx, "warm")  # the lexical leg reaches the current version
    deadline = time.monotonic() + VECTOR_BOUND
    while True:
        st = t.driver.index_status(ctx)
        if st.lag == 0 and st.vector_lag == 0:
            return
        if time.monotonic() > deadline:
            raise CaseFailed(f"the vector leg did not catch up in {VECTOR_BOUND:.0f}s: {st}")
        time.sleep(0.05)


def _events(t: CaseRun, ctx: str) -> dict[str, str]:
    d = t.driver
    return {"both": d.append(ctx, "s1", "user-message", "the launch is on hold until legal signs off").ref,
            "hold": d.append(ctx, "s1", "user-message", "hold the door for the movers").ref,
            "launching": d.append(ctx, "s1", "user-message", "launching the rocket tomorrow").ref,
            "other": d.append(ctx, "s1", "user-message", "weather report: sunny").ref}


@case("HYB-01", "hybrid fuses a lexical and a vector leg; each hit says its rank in each leg")
def hyb_01_ranks_in_each_leg(t: CaseRun):
    d, ctx = t.driver, t.context()
    _events(t, ctx)
    _both_legs_caught_up(t, ctx)
    query = "launch hold"
    lexical = d.search(ctx, query, mode="lexical").keys
    vector = d.search(ctx, query, mode="vector").keys
    hybrid = d.search(ctx, query, mode="hybrid").hits
    t.check(hybrid, "hybrid found nothing")
    for h in hybrid:
        want = (lexical.index(h.key) + 1 if h.key in lexical else 0,
                vector.index(h.key) + 1 if h.key in vector else 0)
        t.eq((h.lexical_rank, h.vector_rank), want, f"the ranks of {h.key}")
        t.check(want != (0, 0), f"{h.key} is in neither leg")
    t.rejected("RECALL_MODE_INVALID", d.search, ctx, "launch", mode="semantic")


@case("HYB-03", "ids, refs and numbers take an exact path; vector hits pass the same filters")
def hyb_03_exact_path_and_filters(t: CaseRun):
    d, ctx = t.driver, t.context()
    refs = _events(t, ctx)
    build = d.append(ctx, "s1", "user-message", "build 4711 failed on the launch pad").ref
    d.append(ctx, "s1", "user-message", "build 4712 passed")
    log = d.append(ctx, "s1", "tool-result", "launching checklist draft, superseded").ref
    t.tx(ctx, '(create memory/old (note "old launch plan"))')
    t.tx(ctx, f'(derive memory/new (from memory/old {log}) (note "new plan")) '
              f"(retire memory/old {log})", reason="digested")
    other = d.append(ctx, "s2", "user-message", "launching from the other session").ref
    _both_legs_caught_up(t, ctx)
    for mode in ("vector", "hybrid"):
        t.eq(d.search(ctx, refs["other"], mode=mode).keys[:1], [refs["other"]],
             f"{mode}: a ref finds its item first")
        t.eq(d.search(ctx, "memory/new", mode=mode).keys[:1], ["memory/new"],
             f"{mode}: a frame id finds its frame first")
        t.eq(d.search(ctx, "4711", mode=mode).keys, [build], f"{mode}: a number, exactly")
        active = d.search(ctx, "launch", mode=mode, states=["active"]).hits
        t.check(all(h.state == "active" for h in active) and log not in [h.key for h in active],
                f"{mode}: the state filter holds for vector hits")
        s1 = d.search(ctx, "launch", mode=mode, sessions=["s1"]).keys
        t.check(other not in s1, f"{mode}: the session filter holds for vector hits")


@case("HYB-02", "an index another embedder built is refused as stale, never mixed",
      needs=("embedder", "restart"))
def hyb_02_other_embedder_refused_as_stale(t: CaseRun):
    d, ctx = t.driver, t.context()
    _events(t, ctx)
    _both_legs_caught_up(t, ctx)
    before = d.search(ctx, "launch", mode="vector").keys
    t.check(before, "the vector leg found nothing")
    d.restart_with_other_embedder()
    try:
        for mode in ("vector", "hybrid"):
            err = t.rejected("RECALL_INDEX_STALE", d.search, ctx, "launch", mode=mode)
            t.check("rebuild" in err.message, f"{mode}: the refusal says what to do")
        t.check(t.search(ctx, "launch", mode="lexical").keys, "the lexical leg still answers")
    finally:
        d.restart()  # the original embedder, whose vectors these are
    _both_legs_caught_up(t, ctx)
    t.eq(d.search(ctx, "launch", mode="vector").keys, before,
         "the original embedder's vectors serve again, unmixed")


@case("HYB-06", "the vector leg reports its own lag; a rebuild with an unchanged embedder "
      "reuses the stored vectors")
def hyb_06_rebuild_reuses_stored_vectors(t: CaseRun):
    d, ctx = t.driver, t.context()
    for i in range(40):
        d.append(ctx, "s1", "user-message", f"lantern note {i} from the shed")
    t.tx(ctx, "(create f1 (note lantern frame))")
    _both_legs_caught_up(t, ctx)  # the vector leg says it holds every commit
    before = d.index_status(ctx)
    t.check(before.embedder, "the target names no embedder")
    t.check(before.embedded >= 41, f"the target says it embedded {before.embedded} texts")
    ranked = d.search(ctx, "lantern note 7", mode="vector").keys
    d.rebuild_index(ctx)
    _both_legs_caught_up(t, ctx)
    after = d.index_status(ctx)
    t.eq(after.embedded, before.embedded, "texts embedded again by a rebuild, same embedder")
    t.eq(d.search(ctx, "lantern note 7", mode="vector").keys, ranked,
         "the vector ranking after the rebuild")


# Memories and queries that share no word with them, across languages (HYB-04/05).
MEANINGS = ("Release 2.3 paused until legal signs off on the new terms of service",
            "数据库连接池耗尽，查询排队超过 2 秒",
            "lunch order for the team: noodles from the place downstairs",
            "the printer on the third floor is out of toner again",
            "用户喜欢简短的回答，先给结论再给细节")
PARAPHRASES = (("why did we hold the launch", 0), ("回复尽量简洁", 4),
               ("too many open sessions to Postgres", 1), ("the user likes brief replies", 4))


@contextmanager
def _default_embedder(t: CaseRun) -> Iterator[None]:
    """The target restarted with its default embedder; the run's own comes back after."""
    t.driver.restart_with_default_embedder()
    try:
        yield
    finally:
        t.driver.restart()


def _with_default_embedder(t: CaseRun, check) -> None:
    """Run `check(ctx, refs)` on the target restarted with its default embedder, over the
    memories above."""
    with _default_embedder(t):
        ctx = t.context()
        refs = [t.driver.append(ctx, "s1", "user-message", text).ref for text in MEANINGS]
        _both_legs_caught_up(t, ctx)
        check(ctx, refs)


@case("HYB-04", "the default embedder is pretrained and multilingual: it recalls by meaning "
      "across languages", needs=("default_embedder", "restart"))
def hyb_04_default_embedder_recalls_by_meaning(t: CaseRun):
    d = t.driver

    def check(ctx: str, refs: list[str]) -> None:
        identity = d.index_status(ctx).embedder
        t.check(identity, "the target names no embedder identity")
        # No query shares a word with its note. The vector leg ranks each note in its top
        # two and most first (a small model may put a cross-language paraphrase second:
        # e5-small ranks the English release note 0.004 above the Chinese pool note for
        # the Postgres query); hybrid keeps each in its top three, found by the vector leg.
        first = 0
        for query, i in PARAPHRASES:
            keys = d.search(ctx, query, mode="vector").keys
            t.check(refs[i] in keys[:2],
                    f"{query!r}: the vector leg did not rank {MEANINGS[i]!r} in its top two: "
                    f"{keys}")
            first += keys[:1] == [refs[i]]
            hits = d.search(ctx, query, mode="hybrid").hits[:3]
            found = next((h for h in hits if h.key == refs[i]), None)
            t.check(found is not None and found.vector_rank >= 1,
                    f"{query!r} did not find {MEANINGS[i]!r} by meaning in hybrid's top three: "
                    f"{[h.key for h in hits]}")
        t.check(first >= len(PARAPHRASES) - 1,
                f"the vector leg ranked only {first} of {len(PARAPHRASES)} notes first")
    _with_default_embedder(t, check)


@case("HYB-05", "fusion keeps each leg's strong hits: a paraphrase's vector hit stays in "
      "hybrid's top results, an exact lexical match on top",
      needs=("default_embedder", "restart"))
def hyb_05_fusion_keeps_each_legs_strong_hits(t: CaseRun):
    d = t.driver

    def check(ctx: str, refs: list[str]) -> None:
        for query, _ in PARAPHRASES:
            top = d.search(ctx, query, mode="vector").keys[:1]
            t.check(top, f"{query!r}: the vector leg found nothing")
            hybrid = d.search(ctx, query, mode="hybrid").keys[:3]
            t.check(top[0] in hybrid, f"{query!r}: the vector leg's first hit {top[0]} is "
                                      f"not in hybrid's top three {hybrid}")
        lexical = d.search(ctx, "printer toner", mode="lexical").keys[:1]
        t.eq(lexical, [refs[3]], "the exact match in the lexical leg")
        hits = d.search(ctx, "printer toner", mode="hybrid").hits
        t.eq((hits[0].key, hits[0].lexical_rank), (refs[3], 1),
             "the exact match in hybrid's first place")
    _with_default_embedder(t, check)


# Short dialogues whose evidence only means something after the turn before it (HYB-07):
# (session, [(kind, actor, text)]); a tool result answers the last call before it.
DIALOGUES = (
    ("trip", (("user-message", "Mara", "Can you check the trains from Porto to Lisbon on Friday?"),
              ("action", "assistant", "reply: There is one at 7:40 arriving 10:35, and one "
                                      "at 9:15 arriving 12:10."),
              ("user-message", "Mara", "The early one, please."),
              ("action", "assistant", "reply: Done, you're on the 7:40."))),
    ("knee", (("user-message", "Mara", "Can you find what the doctor wrote after the MRI of my knee?"),
              ("action", "files", "files.find(query='MRI report')"),
              ("tool-result", "files", "12 March: small meniscus tear, no surgery; "
                                       "physiotherapy twice a week for six weeks"),
              ("action", "assistant", "reply: Found it, no surgery needed."))),
    ("dinner", (("user-message", "Mara", "Should we book the Thai place or the pizzeria for "
                                         "Jonas's birthday?"),
                ("action", "assistant", "reply: The Thai place has a table for eight at 19:30; "
                                        "the pizzeria only at 21:00."),
                ("user-message", "Mara", "Go with the first, he hates eating late."),
                ("action", "assistant", "reply: Booked for eight at 19:30."))),
    ("chores", (("user-message", "Mara", "Remind me to water the plants on Sunday."),
                ("action", "assistant", "reply: Reminder set for Sunday at 10:00."),
                ("user-message", "Mara", "What's the weather going to be in Porto tomorrow?"),
                ("action", "assistant", "reply: Sunny, around 24 degrees."))),
)
# (question, session, the evidence turn's index): each shares some words with the dialogue
QUESTIONS = (("Which Lisbon train did Mara choose?", "trip", 2),
             ("How often does Mara need physiotherapy for her knee?", "knee", 2),
             ("Where is Jonas's birthday dinner and why?", "dinner", 2))


def _dialogues(t: CaseRun, ctx: str) -> dict[tuple[str, int], str]:
    """The dialogues as an agent runtime records them: a person's message, then the
    agent's replies and tool calls in an activation, each tool result answering its call."""
    d, refs = t.driver, {}
    for session, turns in DIALOGUES:
        activation, call = "", ""
        for i, (kind, actor, text) in enumerate(turns):
            if kind == "user-message":
                if activation:
                    d.deliver(ctx, activation)
                    activation = ""
                ref = d.append(ctx, session, kind, text, actor=actor).ref
            elif kind == "action":
                activation = activation or d.activate(ctx, session).id
                ref = call = d.append(ctx, session, kind, text, actor=actor,
                                      activation=activation).ref
            else:
                ref = d.append(ctx, session, kind, text, actor=actor, causal_refs=[call]).ref
            refs[(session, i)] = ref
    return refs


@case("HYB-07", "a turn is embedded with the turn it answers and fusion weighs both legs' "
      "scores: a question sharing some words with its evidence finds it ahead of either leg",
      needs=("default_embedder", "restart"))
def hyb_07_evidence_read_with_its_context(t: CaseRun):
    d = t.driver
    with _default_embedder(t):
        ctx = t.context()
        refs = _dialogues(t, ctx)
        _both_legs_caught_up(t, ctx)
        ahead = 0
        for question, session, i in QUESTIONS:
            want = refs[(session, i)]
            ranks = {}
            for mode in ("lexical", "vector", "hybrid"):
                keys = d.search(ctx, question, mode=mode, limit=20).keys
                ranks[mode] = keys.index(want) + 1 if want in keys else 99
            # The requirement is "ahead of either leg"; the top five bounds it over the 26
            # events (a target embedding each turn once may place one a rank below three).
            t.check(ranks["hybrid"] <= 5, f"{question!r}: its evidence {want} is not in "
                                          f"hybrid's top five ({ranks})")
            t.check(ranks["hybrid"] <= min(ranks["lexical"], ranks["vector"]),
                    f"{question!r}: hybrid ranks its evidence behind a leg ({ranks})")
            ahead += ranks["hybrid"] < min(ranks["lexical"], ranks["vector"])
        t.check(ahead >= 1, "no question found its evidence ahead of both legs")


@case("HYB-08", "the vector leg reports its pace and the time to cover what it lacks; a "
      "new write is found by meaning within the search's bound",
      needs=("default_embedder", "restart"))
def hyb_08_vector_leg_pace_and_a_new_write_by_meaning(t: CaseRun):
    d = t.driver
    with _default_embedder(t):
        ctx = t.context()
        behind: list = []  # states seen while the vector leg lagged, with a pace
        workers = 0
        for i in range(300):
            d.append(ctx, f"s{i % 3}", "user-message",
                     f"note {i}: shipment {i * 7} left dock {i % 11} for warehouse {i % 5}")
        # 300 turns (600 passages) take the leg seconds: watch it cover them (bounded).
        t.search(ctx, "warm")  # the lexical leg reaches the current version
        deadline = time.monotonic() + VECTOR_BOUND
        while True:
            st = d.index_status(ctx)
            workers = max(workers, st.embed_workers)
            if st.vector_lag and st.documents_per_second > 0:
                behind.append(st)
            if st.lag == 0 and st.vector_lag == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        t.check(workers >= 1, "the target names no process its vector leg embeds in")
        t.check(behind, "the vector leg never said its pace while it lagged")
        t.check(all(st.eta_seconds > 0 for st in behind),
                f"a lagging vector leg with a pace said nothing of the time to go: {behind}")
        _both_legs_caught_up(t, ctx)
        t.eq(d.index_status(ctx).eta_seconds, 0.0, "the time to go once the leg caught up")
        written = d.append(ctx, "s9", "user-message",
                           "The airport shuttle leaves the hotel lobby at six in the morning.")
        page = d.search(ctx, "when does the ride to the airport go", mode="hybrid",
                        min_commit_seq=written.commit_seq)
        t.eq(page.vector_lag, 0, "the vector leg's lag behind the write the search named")
        hit = next((h for h in page.hits if h.key == written.ref), None)
        t.check(hit is not None and hit.vector_rank >= 1 and page.keys.index(written.ref) < 3,
                f"the new write was not found by meaning in hybrid's top three: {page.keys}")
