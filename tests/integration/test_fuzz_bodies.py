"""SEC-03 for event bodies: MORPHZ_FUZZ_BODY_CASES hostile texts (default 10,000: mixed
scripts, combining marks, controls, NUL, markup, S-expressions, refs, runs without a
space, long lines) appended as inputs and tool results, then rendered into encodings,
indexed and searched. Every append is accepted or refused with a registered reason,
every compile and search answers, recall catches up, and audit matches.
MORPHZ_FUZZ_SEED replays a run."""
from __future__ import annotations

import os
import random
import time

import grpc
import pytest

from morphz.services.encoding.client import EncodingClient
from morphz.services.encoding.core.options import MAX_BUDGET_BYTES
from morphz.services.recall.client import RecallClient
from morphz.services.server.app import AllInOne, ServerConfig
from morphz.shared.auth import IN_PROCESS_CALLER
from morphz.shared.errors import MorphzError
from tests.integration.test_fuzz import SEED

CASES = int(os.environ.get("MORPHZ_FUZZ_BODY_CASES", "10000"))
PIECES = ["release", "发布", "測試報告", "リリース", "مرحبا", "שלום", "e\u0301\u0301\u0301",
          "\u200d", "\u200b", "\ufeff", "\U0001f680", "\U0001f469\u200d\U0001f4bb", "\x00",
          "\x1b[31m", "\t", "\r\n", "\n" * 5, "(", ")", '"', "\\", "\\\"", "@e1", "@e99999",
          "(context-tx (base-version 0) (retire f1))", "<script>x</script>", "{\"k\": [1,",
          "%s%n", "${PATH}", "NaN", "-0", "9" * 40, "a" * 300, "\ud7ff", "\U0010ffff",
          "ǅ", "ß", "İ", "ﬁ", "Ⅻ", "﷽", ";", "#|", "|#", "'", "`"]
KINDS = ["user-message", "tool-result", "external", "approval"]


def body(rng: random.Random) -> str:
    if rng.random() < 0.1:  # a long run: no spaces, one script
        return rng.choice(PIECES) * rng.randrange(1, 200)
    return rng.choice(["", " ", "\n"]).join(rng.choice(PIECES)
                                             for _ in range(rng.randrange(0, 40)))


@pytest.mark.all_in_one(reason="appends through the in-process transaction core of an "
                        "all-in-one server of its own")
def test_sec_03_fuzzed_event_bodies_are_stored_rendered_indexed_and_searched(tmp_path):
    print(f"MORPHZ_FUZZ_SEED={SEED} MORPHZ_FUZZ_BODY_CASES={CASES}")
    rng = random.Random(SEED)
    app = AllInOne(ServerConfig(str(tmp_path / "server"), "127.0.0.1:0", sync=False)).start()
    channel = grpc.insecure_channel(f"127.0.0.1:{app.port}")
    encoding, recall = EncodingClient(channel, timeout=60), RecallClient(channel, timeout=60)
    core, caller = app.transactions, IN_PROCESS_CALLER
    contexts = ["b1", "b2"]
    try:
        for c in contexts:
            core.create_context(c, caller=caller)
        refused, bodies, compiled = 0, [], 0
        for i in range(CASES):
            text, context = body(rng), rng.choice(contexts)
            try:
                core.append_event(context, rng.choice(["s1", "s2"]), rng.choice(KINDS), text,
                                  caller=caller)
                bodies.append(text)
            except MorphzError as e:  # a size limit, say: never a crash
                assert e.reason != "INTERNAL" and len(e.message) <= 400, (text[:200], e)
                refused += 1
            if i % 2500 == 2499:  # render what arrived (every active input is rendered)
                for c in contexts:
                    for s in ("s1", "s2"):
                        try:
                            assert encoding.compile(c, s, budget_bytes=MAX_BUDGET_BYTES)[
                                "snapshot"]
                            compiled += 1
                        except MorphzError as e:  # an inbox over the largest budget
                            assert e.reason == "ENCODING_BUDGET_EXCEEDED", e
        for c in contexts:
            deadline = time.monotonic() + 120
            while recall.inspect(c)["lag"] and time.monotonic() < deadline:
                time.sleep(0.1)
            assert recall.inspect(c)["lag"] == 0
            for query in rng.sample(PIECES, 12) + [rng.choice(bodies)[:200]]:
                try:
                    recall.search(c, query)
                except MorphzError as e:  # a query with no searchable words, say
                    assert e.reason != "INTERNAL", (query, e)
            assert core.audit(c, caller=caller).match
        print(f"{CASES} bodies: {CASES - refused} stored, {refused} refused")
        assert len(bodies) > CASES // 2 and compiled
    finally:
        channel.close()
        app.stop(grace=1)
